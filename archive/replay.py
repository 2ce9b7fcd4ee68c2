"""Replay: the messages (or FLWR results) a profile would have matched in a time window,
found through the value index and verified with the engine.

A profile's required equality predicates (:func:`partitioning.predicates.equalities`:
those every match must satisfy) each name a pattern and a value; each pattern with a
value short enough to index gives the window's messages holding that value there (a
range-timeslice query per archived path the pattern matches), and the candidates are
the intersection. Every candidate is then matched by :class:`yfilter.Engine`, so the
index only has to find a superset. A profile with no indexable predicate scans the
whole window; messages the index could not hold are always candidates.

>>> path_regex("/nitf//p/@id").fullmatch("/nitf/body/p/@id") is not None
True
>>> [str(e) for e in indexable("/nitf[head/title = 'Tide' or @x]//p[@n = 3]")]
['/nitf//p/@n = 3']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from partitioning.predicates import Equality, equalities
from yfilter import Engine
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse

from archive.partition import Archived, PartitionArchive
from archive.triples import value_key

_STEP = re.compile(r"(//|/)((?:\{[^}]*\})?[^/{]+)")
_NAME = r"/(?:\{[^}]*\})?[^/{}@][^/{}]*"


def path_regex(pattern: str) -> re.Pattern:
    """A regular expression over archived paths for a predicate's pattern path (child
    and descendant steps, ``*`` name tests, Clark names)."""
    out = []
    pos = 0
    for m in _STEP.finditer(pattern):
        if m.start() != pos:
            raise ValueError(f"cannot read pattern {pattern!r} at {pos}")
        axis, name = m.groups()
        if axis == "//":
            out.append(f"(?:{_NAME})*")
        out.append(_NAME if name == "*" else re.escape("/" + name))
        pos = m.end()
    if pos != len(pattern):
        raise ValueError(f"cannot read pattern {pattern!r} at {pos}")
    return re.compile("".join(out))


def filter_path(profile: str, namespaces: Mapping[str, str] | None = None):
    """The profile as a filtering path (a FLWR's ``for`` with its ``where``)."""
    return parse_flwr(profile, namespaces).filter_path() if is_flwr(profile) else parse(profile, namespaces)


def indexable(profile: str, namespaces: Mapping[str, str] | None = None) -> list[Equality]:
    """The profile's required equalities whose value the index holds."""
    return [e for e in equalities(filter_path(profile, namespaces)) if value_key(e.value) is not None]


def candidates(part: PartitionArchive, eqs: list[Equality], t1: int, t2: int, as_of: int | None = None
               ) -> list[int]:
    """Ticks of ``part``'s messages in ``[t1, t2]`` that may match: those holding every
    equality of ``eqs`` (all of the window when there is none), plus the unindexed."""
    if eqs:
        found: set[int] | None = None
        for eq in eqs:
            ticks: set[int] = set()
            for path in part.matching_paths(str(eq.pattern)):
                ticks |= part.lookup_ticks(path, eq.value, t1, t2, as_of)
            found = ticks if found is None else found & ticks
            if not found:
                break
        out = found or set()
        span = part.ticks_between(t1, t2)
        if span is not None:
            out |= {k[0] for k, _ in part.unindexed.range((span[0],), (span[1],))}
    else:
        out = set(part.window(t1, t2))
    return sorted(t for t in out if t1 <= part.record(t).time <= t2 and part.live_at(t, _as_of_version(part, as_of)))


def _as_of_version(part: PartitionArchive, as_of: int | None) -> int | None:
    return None if as_of is None else part.version_as_of(as_of)


@dataclass(frozen=True)
class Replayed:
    """One message a profile matched: its record, bytes, and (FLWR) results."""

    record: Archived
    data: bytes
    results: tuple[bytes, ...] = ()


def replay(parts: list[PartitionArchive], profile: str, t1: int, t2: int, *, as_of: int | None = None,
           namespaces: Mapping[str, str] | None = None, progress: Callable[[int, int], None] | None = None,
           use_index: bool = True) -> Iterator[Replayed]:
    """The messages of ``parts`` archived in ``[t1, t2]`` that ``profile`` matches, in
    archive time order per partition; ``progress(done, total)`` after each candidate.
    ``use_index=False`` verifies every message of the window (the reference)."""
    engine = Engine(namespaces)
    engine.add("p", profile)
    transform = is_flwr(profile)
    eqs = indexable(profile, namespaces) if use_index else []
    todo = [(part, candidates(part, eqs, t1, t2, as_of)) for part in parts]
    total = sum(len(c) for _, c in todo)
    done = 0
    for part, ticks in todo:
        for tick in ticks:
            rec, data = part.read(tick)
            done += 1
            if rec.indexed or data:
                try:
                    if transform:
                        res = engine.run(data).get("p")
                        if res:
                            yield Replayed(rec, data, tuple(res))
                    elif "p" in engine.match(data):
                        yield Replayed(rec, data)
                except ValueError:
                    pass            # a malformed message matches nothing
            if progress is not None:
                progress(done, total)
