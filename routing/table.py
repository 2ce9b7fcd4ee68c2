"""Routing tables: ``Collect()`` and ``Aggregate()`` over per-profile deltas.

A broker keeps one :class:`RoutingTable` per broadcast tree it is in. For each output
link (a child broker) the table holds the routing queries of every profile hosted
below that link, and matches a message against all of them at once with one shared
:class:`yfilter.Engine` whose profiles are the distinct atoms (absolute linear paths)
and whose targets — through a counting step over conjunctions — are the links.

Changes travel as :class:`Delta` s: "profile P, at version v, contributes query Q"
(``Q is None``: P is gone). A table applies a delta only if its version is newer than
what it holds for that profile on that link, so replays and reordering cannot corrupt
it; the same delta, relabelled with this broker as the link, is what ``Aggregate()``
sends to the parent (see :meth:`RoutingTable.aggregate`). Deleting the last profile
below a link removes the link's entry.

>>> from routing.dnf import map_profile
>>> t = RoutingTable("b4")
>>> t.apply("b5", Delta("q1", 1, map_profile("/nitf//hl1")))
True
>>> t.apply("b6", Delta("q3", 1, map_profile("/nitf[head/title]")))
True
>>> sorted(t.route(b"<nitf><head><title>x</title></head></nitf>"))
['b6']
>>> t.apply("b6", Delta("q3", 2, None)), t.links
(True, ['b5'])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from routing.dnf import Conjunction, RoutingQuery, engine_text
from yfilter import Engine


@dataclass(frozen=True)
class Delta:
    """One profile's routing query at a version; ``query=None`` means deleted."""

    profile_id: str
    version: int
    query: RoutingQuery | None

    def to_json(self) -> dict:
        q = None if self.query is None else sorted(sorted(c) for c in self.query)
        return {"profile_id": self.profile_id, "version": self.version, "query": q}

    @classmethod
    def from_json(cls, d: dict) -> "Delta":
        q = d["query"]
        return cls(d["profile_id"], int(d["version"]),
                   None if q is None else frozenset(frozenset(c) for c in q))


class RoutingTable:
    """The routing table of ``broker`` for one broadcast tree (see module docstring)."""

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self._contrib: dict[str, dict[str, tuple[int, RoutingQuery | None]]] = {}
        self._conj: dict[str, Counter[Conjunction]] = {}
        self._atom_refs: Counter[str] = Counter()
        self._by_atom: dict[str, set[tuple[str, Conjunction]]] = {}
        self._always: Counter[str] = Counter()  # links with an empty (always-true) conjunction
        self._prefixes: dict[str, str] = {}
        self._engine = Engine()

    @property
    def links(self) -> list[str]:
        """Output links that have at least one profile below them."""
        return sorted(link for link, c in self._conj.items() if c)

    def entry(self, link: str) -> RoutingQuery:
        """The routing query of one output link (the union of its profiles' queries)."""
        return frozenset(self._conj.get(link, ()))

    def version(self, link: str, profile_id: str) -> int | None:
        held = self._contrib.get(link, {}).get(profile_id)
        return held[0] if held else None

    def apply(self, link: str, delta: Delta) -> bool:
        """Apply a delta received on ``link``; False if it was old news (ignored)."""
        held = self._contrib.setdefault(link, {})
        old = held.get(delta.profile_id)
        if old is not None and old[0] >= delta.version:
            return False
        held[delta.profile_id] = (delta.version, delta.query)
        if old is not None and old[1] is not None:
            for conj in old[1]:
                self._unref(link, conj)
        if delta.query is not None:
            for conj in delta.query:
                self._ref(link, conj)
        return True

    def _ref(self, link: str, conj: Conjunction) -> None:
        counts = self._conj.setdefault(link, Counter())
        counts[conj] += 1
        if counts[conj] > 1:
            return
        if not conj:
            self._always[link] += 1
        for atom in conj:
            self._by_atom.setdefault(atom, set()).add((link, conj))
            self._atom_refs[atom] += 1
            if self._atom_refs[atom] == 1:
                self._add_atom(atom)

    def _unref(self, link: str, conj: Conjunction) -> None:
        counts = self._conj[link]
        counts[conj] -= 1
        if counts[conj] > 0:
            return
        del counts[conj]
        if not conj:
            self._always[link] -= 1
            if not self._always[link]:
                del self._always[link]
        for atom in conj:
            self._by_atom[atom].discard((link, conj))
            self._atom_refs[atom] -= 1
            if not self._atom_refs[atom]:
                del self._atom_refs[atom], self._by_atom[atom]
                self._engine.remove(atom)

    def _add_atom(self, atom: str) -> None:
        known = len(self._prefixes)
        text = engine_text(atom, self._prefixes)
        if len(self._prefixes) != known:
            # The engine binds prefixes when it is built: a new namespace URI means a
            # new engine with every atom re-added (rare: URIs come with new schemas).
            self._engine = Engine({p: uri for uri, p in self._prefixes.items()})
            for other in self._atom_refs:
                if other != atom:
                    self._engine.add(other, engine_text(other, self._prefixes))
        self._engine.add(atom, text)

    def route(self, message) -> set[str]:
        """Output links whose routing query ``message`` matches (XML bytes or a
        :class:`formats.Message`). Conjunctions of links already chosen are skipped."""
        chosen = set(self._always)
        if len(chosen) == len(self._conj):
            return chosen
        matched = self._engine.match(message) if self._atom_refs else frozenset()
        seen: Counter[tuple[str, Conjunction]] = Counter()
        for atom in matched:
            for key in self._by_atom[atom]:
                link, conj = key
                if link in chosen:
                    continue
                seen[key] += 1
                if seen[key] == len(conj):
                    chosen.add(link)
        return chosen

    def aggregate(self, local: dict[str, tuple[int, RoutingQuery | None]] | None = None) -> list[Delta]:
        """``Aggregate()``: the whole table (plus local profiles) as deltas for the
        parent, where they are all filed under the link to this broker. Used to
        (re)build a parent's entry; single changes are forwarded as they come."""
        out: dict[str, tuple[int, RoutingQuery | None]] = {}
        for held in [*self._contrib.values(), local or {}]:
            for pid, (version, query) in held.items():
                if pid not in out or out[pid][0] < version:
                    out[pid] = (version, query)
        return [Delta(pid, v, q) for pid, (v, q) in sorted(out.items())]

    def stats(self) -> dict[str, int]:
        """Size of the table: links, conjunctions, distinct atoms, engine states."""
        e = self._engine.stats()
        return {"links": len(self.links), "conjunctions": sum(len(c) for c in self._conj.values()),
                "atoms": len(self._atom_refs), "nfa_states": e["nfa_states"], "guards": e["guards"]}
