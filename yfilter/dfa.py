"""A lazy DFA over the NFA: state sets and their transitions are built the first
time a message needs them and then reused (Green et al., TODS 2004), so matching
an element costs a few dictionary lookups however many profiles share the automaton.

Guards make a plain subset construction explode: which guarded transitions fire
depends on attribute values, and every combination would be a new state set whose
transitions must be computed from scratch. So a walk state is *factored*: a short
tuple of cached :class:`DState` components. The first component follows only
unguarded transitions (pure structure: few distinct sets, always warm); when guards
hold at an element, the states they lead to form a new component (cached per set of
guards that held) that is followed from then on. A component dies when no NFA state
is left in it. An element costs one cached transition per live component, and there
are at most one more components than ancestors whose guards held.

A transition (``DState`` x tag, a :class:`Trans`) keeps an index of its guards by
anchor: ``by_eq[attribute][value]`` (one hash lookup finds every guard that needs
that value), ``by_text`` / ``by_self`` by the value a text node / the string-value
must equal, ``by_rel`` by nested-path accepting state, ``by_has`` by attribute
name; only those candidates are evaluated.

Memory is bounded by ``budget``, counted in *units*: one per cached component plus
one per NFA state in it, one per transition plus one per guard it indexes, one per
guard-set target, and one per profile id cached for reporting. When the total passes
the budget the whole cache is dropped and rebuilt lazily from the next element on
(the approach of RE2's DFA cache): memory stays bounded, and a hot working set is
rebuilt within a few messages. The engine also drops it when profiles are added or
removed, since cached sets would miss the change.
"""

from __future__ import annotations

from yfilter.nfa import State
from yfilter.operators import Guard

DEFAULT_BUDGET = 4_000_000
"""Default unit budget per automaton (about 1/4 GB of Python objects at worst)."""


class DState:
    """A set of NFA states; ``accepts`` are its accepting members, ``dead`` when empty
    (nothing below can match: the walk may skip the subtree)."""

    __slots__ = ("states", "trans", "accepts", "dead", "_ids")

    def __init__(self, states: frozenset[State]) -> None:
        self.states = states
        self.trans: dict[str, Trans] = {}
        self.accepts = frozenset(s for s in states if s.accept)
        self.dead = not states
        self._ids: frozenset | None = None

    def ids(self, dfa: "LazyDFA") -> frozenset:
        """Union of what the accepting members accept (profile ids), cached."""
        if self._ids is None:
            self._ids = frozenset().union(*(s.accept for s in self.accepts))
            dfa.charge(len(self._ids))
        return self._ids


class _Hits:
    """Guards found under one index key: ``pure`` ones hold on a hit (the key is all
    they test), the others still need checking."""

    __slots__ = ("pure", "impure")

    def __init__(self) -> None:
        self.pure: list[Guard] = []
        self.impure: list[Guard] = []

    def add(self, g: Guard) -> None:
        (self.pure if g.pure else self.impure).append(g)

    def collect(self, out: list, run, node) -> None:
        out.extend(self.pure)
        for g in self.impure:
            if g.check(run, node):
                out.append(g)


class Trans:
    """The transition of one DState on one tag."""

    __slots__ = ("base", "plain", "targets", "by_eq", "by_text", "by_self", "by_has", "by_rel",
                 "always", "memo")

    def __init__(self, base: DState, targets: dict[Guard, list[State]]) -> None:
        self.base = base  # target when no guard holds
        self.plain = not targets
        self.targets = targets
        self.by_eq: dict[str, dict[str, _Hits]] = {}  # attribute -> value -> guards
        self.by_text: dict[str, _Hits] = {}  # a text node's value -> guards
        self.by_self: dict[str, _Hits] = {}  # the string-value -> guards
        self.by_has: dict[str, _Hits] = {}  # attribute -> guards
        self.by_rel: dict[int, dict[State, _Hits]] = {}  # level -> accepting state -> guards
        self.always: list[Guard] = []
        self.memo: dict[frozenset[Guard], DState] = {}
        for g in targets:
            a = g.anchor
            kind = a[0]
            if kind == "eq":
                hits = self.by_eq.setdefault(a[1], {}).get(a[2])
                if hits is None:
                    hits = self.by_eq[a[1]][a[2]] = _Hits()
            elif kind == "text":
                hits = self.by_text.get(a[1]) or self.by_text.setdefault(a[1], _Hits())
            elif kind == "self":
                hits = self.by_self.get(a[1]) or self.by_self.setdefault(a[1], _Hits())
            elif kind == "rel":
                rel = a[1]
                table = self.by_rel.setdefault(rel.level, {})
                hits = table.get(rel.state) or table.setdefault(rel.state, _Hits())
            elif kind == "has":
                hits = self.by_has.get(a[1]) or self.by_has.setdefault(a[1], _Hits())
            else:
                self.always.append(g)
                continue
            hits.add(g)

    def passing(self, run, node) -> list[Guard]:
        """The guards of this transition that hold at ``node``."""
        doc = run.doc
        out: list[Guard] = []
        if self.by_eq or self.by_has:
            by_eq, by_has = self.by_eq, self.by_has
            for name, value in doc.attr_items(node):
                table = by_eq.get(name)
                if table is not None:
                    hits = table.get(value)
                    if hits is not None:
                        hits.collect(out, run, node)
                hits = by_has.get(name)
                if hits is not None:
                    hits.collect(out, run, node)
        if self.by_text:
            for t in doc.text_nodes(node):
                hits = self.by_text.get(t)
                if hits is not None:
                    hits.collect(out, run, node)
        if self.by_self:
            hits = self.by_self.get(doc.string_value(node))
            if hits is not None:
                hits.collect(out, run, node)
        for level, by_rel in self.by_rel.items():
            seen = run.witnessed(node, level)
            if seen:
                if len(seen) < len(by_rel):
                    for s in seen:
                        hits = by_rel.get(s)
                        if hits is not None:
                            hits.collect(out, run, node)
                else:
                    for s, hits in by_rel.items():
                        if s in seen:
                            hits.collect(out, run, node)
        for g in self.always:
            if g.check(run, node):
                out.append(g)
        return out


class LazyDFA:
    """The lazily built, budget-bounded DFA of one NFA (rooted at ``root``)."""

    def __init__(self, root: State, budget: int = DEFAULT_BUDGET) -> None:
        self.root = root
        self.budget = budget
        self.units = 0
        self.flushes = 0
        self._states: dict[frozenset[State], DState] = {}
        self._start: DState | None = None

    def __len__(self) -> int:
        return len(self._states)

    def start(self) -> DState:
        if self._start is None:
            self._start = self._intern(_closure({self.root}))
        return self._start

    def flush(self) -> None:
        """Drop every cached state and transition (they are rebuilt on demand)."""
        for d in self._states.values():
            d.trans.clear()  # a walk still holding an old DState rebuilds from it
        self._states = {}
        self._start = None
        self.units = 0
        self.flushes += 1

    def _intern(self, states: frozenset[State]) -> DState:
        d = self._states.get(states)
        if d is None:
            d = self._states[states] = DState(states)
            self.units += 1 + len(states)
        return d

    def charge(self, units: int) -> None:
        self.units += units
        if self.units > self.budget:
            self.flush()

    def build(self, d: DState, tag: str) -> Trans:
        """Compute (and cache) the transition of ``d`` on ``tag``."""
        base: set[State] = set()
        guarded: dict[Guard, list[State]] = {}
        for s in d.states:
            if s.loop:
                base.add(s)
            for edges in (s.named.get(tag), s.star):
                if edges:
                    for g, t in edges.items():
                        if g is None:
                            base.add(t)
                        else:
                            guarded.setdefault(g, []).append(t)
        tr = Trans(self._intern(_closure(base)), guarded)
        d.trans[tag] = tr
        self.charge(1 + len(guarded))
        return tr

    def extend(self, tr: Trans, passing: frozenset[Guard]) -> DState:
        """The new component when exactly the guards ``passing`` of ``tr`` hold."""
        states: set[State] = set()
        for g in passing:
            for t in tr.targets[g]:
                states.add(t)
                if t.eps is not None:
                    states.add(t.eps)
        d = tr.memo[passing] = self._intern(frozenset(states))
        self.charge(1)
        return d


def _closure(states: set[State]) -> frozenset[State]:
    """Add the ``//`` helper states (the only epsilon moves; they have none of their own)."""
    return frozenset(states | {s.eps for s in states if s.eps is not None})


def advance(dfa: LazyDFA, comps: tuple[DState, ...], tag: str, run, node) -> tuple[DState, ...]:
    """One step of the walk: the components of an element whose parent's are ``comps``."""
    out = []
    for d in comps:
        tr = d.trans.get(tag)
        if tr is None:
            tr = dfa.build(d, tag)
        if not tr.base.dead:
            out.append(tr.base)
        if not tr.plain:
            passing = tr.passing(run, node)
            if passing:
                key = frozenset(passing)
                nd = tr.memo.get(key)
                out.append(nd if nd is not None else dfa.extend(tr, key))
    if len(out) > 1 and len(set(out)) < len(out):
        out = list(dict.fromkeys(out))
    return tuple(out)
