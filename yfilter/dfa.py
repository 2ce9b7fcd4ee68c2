"""A lazy DFA over the NFA: state sets and their transitions are built the first
time a message needs them and then reused (Green et al., TODS 2004), so matching
an element costs a dictionary lookup however many profiles share the automaton.

A transition is keyed by the current :class:`DState` and the element's tag. Where
NFA transitions carry guards (step predicates), the target also depends on which
guards hold at the element, so the :class:`Trans` keeps an index of its guards by
anchor (``by_eq[attribute][value]``: one hash lookup finds every guard that needs
that value; ``by_rel`` by nested-path accepting state; ``by_has`` by attribute
name), evaluates only those candidates, and caches one target per set of guards
that held.

Memory is bounded by ``budget``, counted in *units*: one per cached DFA state plus
one per NFA state in it, one per transition plus one per guard it indexes, and one
per guard-set target. When the total passes the budget the whole cache is dropped
and rebuilt lazily from the next element on (the approach of RE2's DFA cache):
cost stays bounded by the budget, and a hot working set is rebuilt in a few
messages. The engine also drops it when profiles are added or removed, since
cached state sets would miss the change.
"""

from __future__ import annotations

from yfilter.nfa import State
from yfilter.operators import Guard

DEFAULT_BUDGET = 4_000_000
"""Default unit budget per automaton (about 1/4 GB of Python objects at worst)."""


class DState:
    """A set of NFA states; ``accepts`` are its accepting members, ``dead`` when empty
    (nothing below can match: the walk may skip the subtree)."""

    __slots__ = ("states", "trans", "accepts", "dead")

    def __init__(self, states: frozenset[State]) -> None:
        self.states = states
        self.trans: dict[str, Trans] = {}
        self.accepts = tuple(s for s in states if s.accept)
        self.dead = not states


class Trans:
    """The transition of one DState on one tag."""

    __slots__ = ("base", "plain", "targets", "by_eq", "by_has", "by_rel", "always", "memo")

    def __init__(self, base: DState, targets: dict[Guard, list[State]]) -> None:
        self.base = base  # target when no guard holds
        self.plain = not targets
        self.targets = targets
        self.by_eq: dict[str, dict[str, list[Guard]]] = {}
        self.by_has: dict[str, list[Guard]] = {}
        self.by_rel: dict[State, list[Guard]] = {}
        self.always: list[Guard] = []
        self.memo: dict[frozenset[Guard], DState] = {}
        for g in targets:
            a = g.anchor
            if a[0] == "eq":
                self.by_eq.setdefault(a[1], {}).setdefault(a[2], []).append(g)
            elif a[0] == "rel":
                self.by_rel.setdefault(a[1].state, []).append(g)
            elif a[0] == "has":
                self.by_has.setdefault(a[1], []).append(g)
            else:
                self.always.append(g)

    def passing(self, run, node) -> list[Guard]:
        """The guards of this transition that hold at ``node``."""
        doc = run.doc
        out = []
        if self.by_eq:
            for name, table in self.by_eq.items():
                v = doc.attr(node, name)
                if v is not None:
                    gs = table.get(v)
                    if gs:
                        for g in gs:
                            if g.check(run, node):
                                out.append(g)
        if self.by_has:
            for name, gs in self.by_has.items():
                if doc.attr(node, name) is not None:
                    for g in gs:
                        if g.check(run, node):
                            out.append(g)
        if self.by_rel:
            seen = run.witnessed(node)
            if seen:
                by_rel = self.by_rel
                if len(seen) < len(by_rel):
                    hits = [by_rel[s] for s in seen if s in by_rel]
                else:
                    hits = [gs for s, gs in by_rel.items() if s in seen]
                for gs in hits:
                    for g in gs:
                        if g.check(run, node):
                            out.append(g)
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

    def _charge(self, units: int) -> None:
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
        self._charge(1 + len(guarded))
        return tr

    def extend(self, tr: Trans, passing: frozenset[Guard]) -> DState:
        """The target of ``tr`` when exactly the guards ``passing`` hold."""
        states = set(tr.base.states)
        for g in passing:
            for t in tr.targets[g]:
                states.add(t)
                if t.eps is not None:
                    states.add(t.eps)
        d = tr.memo[passing] = self._intern(frozenset(states))
        self._charge(1)
        return d


def _closure(states: set[State]) -> frozenset[State]:
    """Add the ``//`` helper states (the only epsilon moves; they have none of their own)."""
    return frozenset(states | {s.eps for s in states if s.eps is not None})


def advance(dfa: LazyDFA, d: DState, tag: str, run, node) -> DState:
    """One step of the walk: the state of an element whose parent is in ``d``."""
    tr = d.trans.get(tag)
    if tr is None:
        tr = dfa.build(d, tag)
    if tr.plain:
        return tr.base
    passing = tr.passing(run, node)
    if not passing:
        return tr.base
    key = frozenset(passing)
    nd = tr.memo.get(key)
    return nd if nd is not None else dfa.extend(tr, key)
