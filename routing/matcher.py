"""Matching many links' routing queries at once: one shared engine over atoms.

A :class:`LinkMatcher` holds, per output link, a multiset of conjunctions (each a
set of atoms, see :mod:`routing.dnf`). Every distinct atom is registered once as a
profile of one :class:`yfilter.Engine`; after the engine has matched a message, a
counting step over the conjunctions turns matched atoms into links, skipping the
conjunctions of links already chosen for this message.

>>> m = LinkMatcher()
>>> m.add("b5", frozenset({"/nitf/head", "/nitf//hl1"}))
True
>>> m.add("b6", frozenset({"/nitf/head"}))
True
>>> sorted(m.route(b"<nitf><head/></nitf>")), sorted(m.route(b"<nitf><head/><hl1/></nitf>"))
(['b6'], ['b5', 'b6'])
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Iterator

from routing.dnf import Conjunction, engine_text
from yfilter import Engine


class LinkMatcher:
    """Reference-counted conjunctions per link over one shared engine of atoms."""

    def __init__(self) -> None:
        self._conj: dict[str, Counter[Conjunction]] = {}
        self._atom_refs: Counter[str] = Counter()
        self._by_atom: dict[str, set[tuple[str, Conjunction]]] = {}
        self._always: Counter[str] = Counter()  # links with an empty (always-true) conjunction
        self._prefixes: dict[str, str] = {}
        self._engine = Engine()

    @property
    def links(self) -> list[str]:
        """Links with at least one conjunction."""
        return sorted(link for link, c in self._conj.items() if c)

    def conjunctions(self, link: str) -> frozenset[Conjunction]:
        return frozenset(self._conj.get(link, ()))

    def items(self) -> Iterator[tuple[str, Conjunction]]:
        """Every distinct ``(link, conjunction)``."""
        for link, counts in self._conj.items():
            for conj in counts:
                yield link, conj

    @property
    def atoms(self) -> Iterable[str]:
        return self._atom_refs.keys()

    def count(self, link: str) -> int:
        """Distinct conjunctions of ``link``."""
        return len(self._conj.get(link, ()))

    def add(self, link: str, conj: Conjunction) -> bool:
        """Add one reference; True if the conjunction is new for this link."""
        counts = self._conj.setdefault(link, Counter())
        counts[conj] += 1
        if counts[conj] > 1:
            return False
        if not conj:
            self._always[link] += 1
        for atom in conj:
            self._by_atom.setdefault(atom, set()).add((link, conj))
            self._atom_refs[atom] += 1
            if self._atom_refs[atom] == 1:
                self._add_atom(atom)
        return True

    def discard(self, link: str, conj: Conjunction) -> bool:
        """Drop one reference; True if the conjunction is gone from this link."""
        counts = self._conj[link]
        counts[conj] -= 1
        if counts[conj] > 0:
            return False
        del counts[conj]
        if not counts:
            del self._conj[link]
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
        return True

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

    def match_atoms(self, message) -> frozenset[str]:
        """The atoms ``message`` matches."""
        return self._engine.match(message) if self._atom_refs else frozenset()

    def route(self, message) -> set[str]:
        """Links whose conjunctions ``message`` satisfies (XML bytes or a
        :class:`formats.Message`)."""
        chosen = set(self._always)
        if len(chosen) == len(self._conj):
            return chosen
        seen: Counter[tuple[str, Conjunction]] = Counter()
        for atom in self.match_atoms(message):
            for key in self._by_atom[atom]:
                link, conj = key
                if link in chosen:
                    continue
                seen[key] += 1
                if seen[key] == len(conj):
                    chosen.add(link)
        return chosen

    def stats(self) -> dict[str, int]:
        """Links, conjunctions, distinct atoms, NFA states and guards (predicates)."""
        e = self._engine.stats()
        return {"links": len(self._conj), "conjunctions": sum(len(c) for c in self._conj.values()),
                "atoms": len(self._atom_refs), "nfa_states": e["nfa_states"], "guards": e["guards"]}


def match_atoms(atoms: Iterable[str], messages: list) -> dict[str, int]:
    """For each atom, a bit mask of the ``messages`` it matches (bit ``i`` for
    ``messages[i]``), from one throw-away engine over all of them."""
    prefixes: dict[str, str] = {}
    texts = {a: engine_text(a, prefixes) for a in atoms}
    engine = Engine({p: uri for uri, p in prefixes.items()})
    for atom, text in texts.items():
        engine.add(atom, text)
    bits = dict.fromkeys(texts, 0)
    for i, message in enumerate(messages):
        for atom in engine.match(message) if texts else ():
            bits[atom] |= 1 << i
    return bits
