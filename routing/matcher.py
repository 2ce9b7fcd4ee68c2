"""Matching many links' routing queries at once: one shared engine over atoms.

A :class:`LinkMatcher` holds, per output link, a multiset of conjunctions (each a
set of atoms, see :mod:`routing.dnf`). Every distinct atom is registered once as a
profile of an :class:`AtomEngine` (a :class:`yfilter.Engine`); after the engine has
matched a message, a counting step over the conjunctions turns matched atoms into
links, skipping the conjunctions of links already chosen for this message and
stopping as soon as every link is chosen.

Each conjunction is filed under one of its atoms, its *anchor*: the one least likely to
match (an equality on a value before a range, a range before a bare path, the longer
path first). A message's matched atoms are intersected with the anchors (in C, over the
smaller set), and only the conjunctions of matched anchors are checked. An atom that
is some conjunction's anchor is matched by the engine with all the others; any other
atom is *lazy*: it is not in the automaton, and is checked by navigation on the message
only when a conjunction whose anchor matched asks, at most once per message however
many conjunctions share it. A workload whose atoms match often — a price bound that
half of all quotes meet, in each profile one of a few thousand — costs what its few
candidate conjunctions cost, not a report of every bound the price meets (quotes,
100k profiles under two links: 661 us a message when shared bounds were matched by
the automaton, 88 us lazy).

Whether an atom matches a message does not depend on which table asks, so several
matchers may share one :class:`AtomEngine`: the tables of one broker (one per
broadcast tree), or every table of a simulated overlay. The engine remembers its
answer for the last message, so the tables sharing it match a message once.

>>> m = LinkMatcher()
>>> m.add("b5", frozenset({"/nitf/head", "/nitf//hl1"}))
True
>>> m.add("b6", frozenset({"/nitf/head"}))
True
>>> sorted(m.route(b"<nitf><head/></nitf>")), sorted(m.route(b"<nitf><head/><hl1/></nitf>"))
(['b6'], ['b5', 'b6'])
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Iterable, Iterator

import formats
from routing.budget import SizeModel
from routing.dnf import Conjunction, engine_text
from yfilter import Engine
from yfilter.navigate import Nav, Session, select
from yfilter.parser import parse

_IMMUTABLE = (bytes, str, formats.Message)  # messages whose answer may be remembered by identity


class AtomEngine:
    """Reference-counted atoms over one :class:`yfilter.Engine`.

    >>> e = AtomEngine()
    >>> e.acquire("/a/b"); e.acquire("/a/b"); e.acquire("//c")
    >>> sorted(e.match(b"<a><b/><c/></a>"))
    ['//c', '/a/b']
    >>> e.release("/a/b"); e.release("/a/b"); sorted(e.match(b"<a><b/><c/></a>"))
    ['//c']
    """

    def __init__(self) -> None:
        self._refs: Counter[str] = Counter()
        self._prefixes: dict[str, str] = {}
        # Built on the first match: a table that only collects (the driver's copy of a
        # broker's state, a burst of routing deltas before any message) never parses an atom.
        self._engine: Engine | None = None
        self._last: tuple[object, frozenset[str]] | None = None
        # Atoms checked only when asked (see holds()): compiled for navigation, not in the
        # automaton, so a message does not report them each time it matches them.
        self._lazy: Counter[str] = Counter()
        self._navs: dict[str, Nav] = {}  # of lazy atoms, compiled into the engine when it is built
        self._asked: tuple[object, Session | None, dict[str, bool]] | None = None
        self._probe: AtomEngine | None = None  # atoms asked about by sample_bits, kept
        self._probed: OrderedDict[int, tuple[object, int, frozenset[str]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._refs)

    def __contains__(self, atom: object) -> bool:
        return atom in self._refs

    def acquire(self, atom: str) -> None:
        """One more user of ``atom`` (registered with the engine on first use, once the
        engine is built)."""
        self._refs[atom] += 1
        if self._refs[atom] == 1:
            if self._engine is not None:
                self._add(atom)
            self._last = None

    def release(self, atom: str) -> None:
        """One user fewer; the last one unregisters it."""
        self._refs[atom] -= 1
        if not self._refs[atom]:
            del self._refs[atom]
            if self._engine is not None:
                self._engine.remove(atom)
            self._last = None

    def acquire_lazy(self, atom: str) -> None:
        """One more user of ``atom`` as a lazy atom: never matched with the others, only
        checked on a message when :meth:`holds` asks (see :class:`LinkMatcher`)."""
        self._lazy[atom] += 1
        if self._lazy[atom] == 1:
            known = len(self._prefixes)
            engine_text(atom, self._prefixes)
            if len(self._prefixes) != known and self._engine is not None:
                # A new namespace URI: the engine binds prefixes when it is built (see _add).
                self._engine = self._build()
            self._navs.pop(atom, None)

    def release_lazy(self, atom: str) -> None:
        self._lazy[atom] -= 1
        if not self._lazy[atom]:
            del self._lazy[atom]
            nav = self._navs.pop(atom, None)
            if nav is not None and self._engine is not None:
                self._engine.release_steps(nav.steps)

    def warm(self) -> None:
        """Build the engine and compile every lazy atom now, not at the first message that
        needs them: a broker's worker then hands the new objects to the collector's
        permanent generation with the rest of the change (see ``broker.dataplane.executor``).

        >>> e = AtomEngine()
        >>> e.acquire("/nitf/head/title")   # an anchor: no atom is lazy
        >>> e.warm(); e.built
        True
        """
        # Built even when no atom is lazy (every conjunction one atom, as transformation
        # profiles' for/where paths often are): else the first message a worker routes
        # builds it (seconds at 100k atoms) and it stays out of the frozen generation, so
        # the collector's pass after every task walks it (issue 41: p50 5.5 s at b6).
        self._engine_now()
        for atom in self._lazy:
            self._nav(atom)

    @property
    def built(self) -> bool:
        """Whether the engine over the atoms is built (:meth:`warm`, or a first match)."""
        return self._engine is not None

    def _nav(self, atom: str) -> Nav:
        """The lazy ``atom`` compiled for navigation in the engine (once)."""
        nav = self._navs.get(atom)
        if nav is None:
            engine = self._engine_now()
            steps = parse(engine_text(atom, self._prefixes), self._namespaces()).steps
            nav = self._navs[atom] = Nav(engine.intern_steps(steps))
        return nav

    def holds(self, atom: str, message) -> bool:
        """Whether the lazy ``atom`` selects anything in ``message``: navigated on the
        message once (memoised with every other lazy atom asked about it)."""
        asked = self._asked
        if asked is None or asked[0] is not message:
            asked = self._asked = (message, None, {})
        answers = asked[2]
        answer = answers.get(atom)
        if answer is None:
            nav = self._nav(atom)
            session = asked[1]
            if session is None:
                session = self._engine.start(message)
                self._asked = (message, session, answers)
            answer = answers[atom] = bool(select(session, nav))
        return answer

    def _namespaces(self) -> dict[str, str]:
        return {p: uri for uri, p in self._prefixes.items()}

    def _engine_now(self) -> Engine:
        if self._engine is None:
            self._engine = self._build()
        return self._engine

    def _build(self) -> Engine:
        """The engine over every atom held now (all at once: ``add_many`` is the fast path)."""
        texts = [(atom, engine_text(atom, self._prefixes)) for atom in self._refs]
        engine = Engine(self._namespaces())
        engine.add_many(texts)
        self._navs.clear()  # lazy atoms are compiled into this engine when next asked about
        self._asked = None
        return engine

    def _add(self, atom: str) -> None:
        known = len(self._prefixes)
        text = engine_text(atom, self._prefixes)
        if len(self._prefixes) != known:
            # The engine binds prefixes when it is built: a new namespace URI means a
            # new engine with every atom (this one included) re-added (rare: URIs come
            # with new schemas).
            self._engine = self._build()
        else:
            self._engine.add(atom, text)

    def match(self, message) -> frozenset[str]:
        """The atoms ``message`` matches (XML bytes or a :class:`formats.Message`).
        The answer for the last message object is remembered until the atoms change."""
        last = self._last
        if last is not None and last[0] is message:
            return last[1]
        out = self._engine_now().match(message) if self._refs else frozenset()
        if isinstance(message, _IMMUTABLE):
            self._last = (message, out)
        return out

    def sample_bits(self, atoms: Iterable[str], messages: list) -> dict[str, int]:
        """For each atom, a bit mask of the ``messages`` it matches (bit ``i`` for
        ``messages[i]``). Made for generalization, which asks about a table's atoms and
        derived ones (skeletons) on the same recent messages again and again: the
        atoms go into a second engine that keeps them, so each is parsed once, and
        each message is matched again only after new atoms came in.

        >>> e = AtomEngine()
        >>> e.sample_bits(["/a/b", "//c"], [b"<a><b/></a>", b"<c/>", b"<a><b/><c/></a>"])
        {'/a/b': 5, '//c': 6}
        """
        atoms = list(dict.fromkeys(atoms))
        probe = self._probe
        if probe is None:
            probe = self._probe = AtomEngine()
        for atom in atoms:
            if atom not in probe:
                probe.acquire(atom)
        size, seen = len(probe), self._probed
        bits = dict.fromkeys(atoms, 0)
        for i, message in enumerate(messages):
            held = seen.get(id(message))
            if held is None or held[0] is not message or held[1] != size:
                held = (message, size, probe.match(message))
                seen[id(message)] = held
            seen.move_to_end(id(message))
            matched = held[2]
            for atom in atoms:
                if atom in matched:
                    bits[atom] |= 1 << i
        while len(seen) > _PROBED:
            seen.popitem(last=False)
        return bits


_PROBED = 512  # messages whose sample_bits answers are kept


def anchor(conj: Conjunction) -> str:
    """The atom a conjunction is filed under: the one least likely to match a message,
    by its text (an equality on a literal, then any value predicate, then a bare path;
    among those the longest, then the first in order, so the choice is stable).

    >>> anchor(frozenset({"/quote/price[. >= 37.5]", "/quote/symbol[. = 'S0042']", "/quote"}))
    "/quote/symbol[. = 'S0042']"
    """
    return min(conj, key=_rarity)


def _rarity(atom: str) -> tuple[int, int, str]:
    if "= '" in atom or '= "' in atom:
        kind = 0
    elif "[" in atom and ("= " in atom and "!=" not in atom and "<=" not in atom and ">=" not in atom):
        kind = 1  # a numeric equality
    elif "[" in atom:
        kind = 2
    else:
        kind = 3
    return kind, -len(atom), atom


class LinkMatcher:
    """Reference-counted conjunctions per link over an :class:`AtomEngine` (its own,
    or ``engine`` shared with other matchers)."""

    def __init__(self, engine: AtomEngine | None = None) -> None:
        self._conj: dict[str, Counter[Conjunction]] = {}
        self._atom_refs: Counter[str] = Counter()
        self._anchored: dict[str, set[tuple[str, Conjunction]]] = {}  # anchor atom -> (link, conjunction)
        self._anchors: set[str] = set()  # its keys, as a set: set & set runs over the smaller one in C
        self._always: Counter[str] = Counter()  # links with an empty (always-true) conjunction
        self._anchor_refs: Counter[str] = Counter()  # conjunctions an atom is the anchor of
        self._eager: set[str] = set()  # atoms the engine matches
        self._lazy_atoms: set[str] = set()  # atoms checked by navigation when asked
        self.engine = engine if engine is not None else AtomEngine()
        self._size: SizeModel | None = None  # made by the first stats(), kept up to date after

    @property
    def links(self) -> list[str]:
        """Links with at least one conjunction."""
        return sorted(self._conj)

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

    def total(self) -> int:
        """Distinct ``(link, conjunction)`` pairs."""
        return sum(len(c) for c in self._conj.values())

    def add(self, link: str, conj: Conjunction) -> bool:
        """Add one reference; True if the conjunction is new for this link."""
        counts = self._conj.setdefault(link, Counter())
        counts[conj] += 1
        if counts[conj] > 1:
            return False
        if not conj:
            self._always[link] += 1
        else:
            key = anchor(conj)
            self._anchored.setdefault(key, set()).add((link, conj))
            self._anchors.add(key)
            self._anchor_refs[key] += 1
        for atom in conj:
            self._atom_refs[atom] += 1
            if self._atom_refs[atom] == 1 and self._size is not None:
                self._size.add(atom)
        for atom in conj:
            self._settle(atom)
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
        else:
            key = anchor(conj)
            held = self._anchored[key]
            held.discard((link, conj))
            if not held:
                del self._anchored[key]
                self._anchors.discard(key)
            self._anchor_refs[key] -= 1
            if not self._anchor_refs[key]:
                del self._anchor_refs[key]
        for atom in conj:
            self._atom_refs[atom] -= 1
            if not self._atom_refs[atom]:
                del self._atom_refs[atom]
                if self._size is not None:
                    self._size.remove(atom)
            self._settle(atom)
        return True

    def _settle(self, atom: str) -> None:
        """Hold ``atom`` in the engine the way its uses now call for: eager when it is an
        anchor, lazy when conjunctions have it
        besides its anchor, not at all when no conjunction has it."""
        refs = self._atom_refs.get(atom, 0)
        eager = bool(self._anchor_refs.get(atom))
        was = atom in self._eager
        if refs and eager and not was:
            self.engine.acquire(atom)
            self._eager.add(atom)
        if was and (not refs or not eager):
            self.engine.release(atom)
            self._eager.discard(atom)
        lazy_now = refs > 0 and not eager
        lazy_was = atom in self._lazy_atoms
        if lazy_now and not lazy_was:
            self.engine.acquire_lazy(atom)
            self._lazy_atoms.add(atom)
        elif lazy_was and not lazy_now:
            self.engine.release_lazy(atom)
            self._lazy_atoms.discard(atom)

    def close(self) -> None:
        """Forget everything, releasing the atoms from the engine (a matcher that is
        replaced must not keep its atoms alive in a shared engine)."""
        for atom in self._eager:
            self.engine.release(atom)
        for atom in self._lazy_atoms:
            self.engine.release_lazy(atom)
        for state in (self._conj, self._atom_refs, self._anchored, self._anchors, self._always,
                      self._anchor_refs, self._eager, self._lazy_atoms):
            state.clear()
        self._size = None

    def route(self, message) -> set[str]:
        """Links whose conjunctions ``message`` satisfies (XML bytes or a
        :class:`formats.Message`). Only conjunctions whose anchor matched are checked,
        and none of a link already chosen; once every link is chosen the engine is not
        asked (all links always-true) or the rest is not looked at."""
        chosen = set(self._always)
        wanted = len(self._conj)
        if len(chosen) == wanted:
            return chosen
        engine = self.engine
        matched = engine.match(message)
        anchored, lazy = self._anchored, self._lazy_atoms
        for atom in self._anchors & matched:
            for link, conj in anchored[atom]:
                if link in chosen:
                    continue
                for a in conj:
                    if a not in matched and (a not in lazy or not engine.holds(a, message)):
                        break
                else:
                    chosen.add(link)
                    if len(chosen) == wanted:
                        return chosen
        return chosen

    def stats(self) -> dict[str, int]:
        """Links, conjunctions, distinct atoms, and the NFA states and guards
        (predicates) the atoms need in a YFilter engine of their own (see
        :class:`~routing.budget.SizeModel`: an upper bound on what
        :class:`yfilter.Engine` builds, exact unless two predicates are written
        differently but mean the same)."""
        if self._size is None:
            self._size = SizeModel(self._atom_refs)
        size = self._size.size()
        return {"links": len(self._conj), "conjunctions": self.total(), "atoms": size["atoms"],
                "nfa_states": size["nfa_states"], "guards": size["guards"]}

