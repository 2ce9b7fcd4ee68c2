"""The public engine: register profiles, match messages against all of them at once.

>>> e = Engine()
>>> e.add("sf", "/nitf[head/pubdata/@edition.area='SF']")
>>> e.add("any-hl", "//hl1")
>>> sorted(e.match(b"<nitf><head><pubdata edition.area='SF'/></head><hl1>x</hl1></nitf>"))
['any-hl', 'sf']
>>> e.remove("sf")
>>> sorted(e.match(b"<nitf><head><pubdata edition.area='SF'/></head></nitf>"))
[]

Not thread-safe: a broker serialises ``add``/``remove`` with ``match`` (they may
interleave freely between messages; a change is visible from the next message on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from formats.message import Message
from yfilter.compiler import Registry, compile_path, path_key
from yfilter.dfa import DEFAULT_BUDGET, DState, LazyDFA
from yfilter.document import TableDoc, TreeDoc, parse_xml
from yfilter.errors import MessageError
from yfilter.nfa import NFA, State, Step
from yfilter.parser import parse
from yfilter.runtime import Run, walk

MessageLike = bytes | bytearray | memoryview | str | Message


@dataclass(eq=False)
class _Query:
    """One distinct profile (by canonical key) and the ids registered with it."""

    key: str
    steps: tuple[Step, ...]
    state: State
    ids: set[str] = field(default_factory=set)


class Matches:
    """The outcome of matching one message: the accepting DFA states reached, turned
    into ids by :meth:`ids` (kept apart so a benchmark can time matching and
    reporting). Each DFA state caches the ids it accepts, so reporting is a union of
    a few cached sets."""

    __slots__ = ("dstates", "dfa")

    def __init__(self, dstates: set[DState], dfa: LazyDFA) -> None:
        self.dstates, self.dfa = dstates, dfa

    def ids(self) -> frozenset[str]:
        ds = self.dstates
        if not ds:
            return frozenset()
        if len(ds) == 1:
            return next(iter(ds)).ids(self.dfa)
        sets = sorted((d.ids(self.dfa) for d in ds), key=len, reverse=True)
        return sets[0].union(*sets[1:])


class Engine:
    """Shared filtering of many XPath profiles (DESIGN.md sections 3-4).

    ``namespaces`` binds the prefixes profiles may use (``xml`` is always bound);
    ``dfa_budget`` bounds each lazy DFA cache (see :mod:`yfilter.dfa`).
    """

    def __init__(self, namespaces: Mapping[str, str] | None = None, *,
                 dfa_budget: int = DEFAULT_BUDGET) -> None:
        self._namespaces = dict(namespaces or {})
        self._nfa = NFA()
        self._reg = Registry()
        self._budget = dfa_budget
        self._dfa = LazyDFA(self._nfa.root, dfa_budget)
        self._rel_dfas: dict[int, LazyDFA] = {}  # nesting level -> DFA of that level
        self._queries: dict[str, _Query] = {}
        self._by_id: dict[str, _Query] = {}
        self._texts: dict[str, str] = {}

    # -- registration ---------------------------------------------------------
    def add(self, profile_id: str, text: str) -> None:
        """Register (or replace) profile ``profile_id``. Raises ProfileError, in
        which case nothing changes (a replaced profile stays as it was)."""
        if not isinstance(profile_id, str):
            raise TypeError(f"profile id must be str, not {type(profile_id).__name__}")
        path = parse(text, self._namespaces)
        txn: dict = {}
        steps = compile_path(path, self._reg, txn)
        key = path_key(steps)
        old = self._by_id.get(profile_id)
        if old is not None and old.key == key:
            self._texts[profile_id] = text
            return
        q = self._queries.get(key)
        if q is None:
            for _, _, g in steps:
                if g is not None:
                    self._reg.ref_guard(g)
            state = self._nfa.insert(steps)
            q = self._queries[key] = _Query(key, steps, state)
            state.accept = q.ids
        q.ids.add(profile_id)
        self._changed()  # DFA states cache the ids they accept
        self._by_id[profile_id] = q
        self._texts[profile_id] = text
        if old is not None:
            self._drop(old, profile_id)

    def remove(self, profile_id: str) -> None:
        """Unregister a profile; ``KeyError`` if it is not registered."""
        q = self._by_id.pop(profile_id)
        del self._texts[profile_id]
        self._drop(q, profile_id)

    def _drop(self, q: _Query, profile_id: str) -> None:
        q.ids.discard(profile_id)
        self._changed()
        if q.ids:
            return
        del self._queries[q.key]
        q.state.accept = None
        self._nfa.delete(q.steps)
        for _, _, g in q.steps:
            if g is not None:
                self._reg.unref_guard(g)

    def _changed(self) -> None:
        # Cached state sets would not see the new or removed NFA states.
        for dfa in (self._dfa, *self._rel_dfas.values()):
            if len(dfa):
                dfa.flush()

    def _rel_dfa(self, level: int) -> LazyDFA:
        dfa = self._rel_dfas.get(level)
        if dfa is None:
            dfa = self._rel_dfas[level] = LazyDFA(self._reg.rel_nfa(level).root, self._budget)
        return dfa

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._by_id

    def profile(self, profile_id: str) -> str:
        """The text a profile was registered with."""
        return self._texts[profile_id]

    def ids(self) -> list[str]:
        return list(self._by_id)

    # -- matching -------------------------------------------------------------
    def evaluate(self, message: MessageLike) -> Matches:
        """Match without building the id set yet (see :class:`Matches`)."""
        return Matches(walk(self._dfa, Run(_document(message), self._rel_dfa)), self._dfa)

    def match(self, message: MessageLike) -> frozenset[str]:
        """Ids of all profiles matching ``message`` (XML text or a decoded
        :class:`formats.Message`), each once. Raises :class:`MessageError`."""
        return self.evaluate(message).ids()

    def run(self, message: MessageLike) -> dict[str, list[bytes]]:
        """Results per matching profile id. A filter's result is the message itself
        (as XML text); transformation profiles (issue 4) will return what they build."""
        matched = self.match(message)
        if not matched:
            return {}
        if isinstance(message, Message):
            xml = message.to_xml()
        elif isinstance(message, str):
            xml = message.encode("utf-8")
        else:
            xml = bytes(message)
        return {pid: [xml] for pid in matched}

    def stats(self) -> dict[str, int]:
        """Sizes: profiles, distinct profiles, NFA states, guards, nested paths, and
        the lazy DFA caches (states, units, flushes)."""
        return {
            "profiles": len(self._by_id),
            "distinct_profiles": len(self._queries),
            "nfa_states": self._nfa.size,
            "rel_nfa_states": sum(n.size for n in self._reg.rel_nfas.values()),
            "guards": len(self._reg.guards),
            "nested_paths": len(self._reg.rels),
            "dfa_states": len(self._dfa),
            "dfa_units": self._dfa.units,
            "dfa_flushes": self._dfa.flushes,
            "rel_dfa_states": sum(len(d) for d in self._rel_dfas.values()),
            "rel_dfa_units": sum(d.units for d in self._rel_dfas.values()),
            "rel_dfa_flushes": sum(d.flushes for d in self._rel_dfas.values()),
        }


def _document(message: MessageLike) -> TableDoc | TreeDoc:
    if isinstance(message, Message):
        if not message.tags:
            raise MessageError("empty message has no root element")
        return TableDoc(message)
    if isinstance(message, (bytes, bytearray, memoryview, str)):
        return TreeDoc(parse_xml(message))
    raise TypeError(f"cannot match a {type(message).__name__}; give XML text or a "
                    "formats.Message")
