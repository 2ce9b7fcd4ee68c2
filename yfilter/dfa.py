"""A lazy DFA over the NFA: state sets and their transitions are built the first
time a message needs them and then reused (Green et al., TODS 2004), so matching
an element costs a few dictionary lookups however many profiles share the automaton.

Guards make a plain subset construction explode: which guarded transitions fire
depends on attribute values, and every combination would be a new state set whose
transitions must be computed from scratch, over all the (many) states that only
follow the structure. So a walk state is *factored*: a short tuple of cached
:class:`DState` components. The first follows only unguarded transitions (pure
structure: few distinct sets, always warm); when guards hold at an element, the
states they lead to form new components: one per index bucket that matched (all
the guards that need exactly ``@a = 'v'``, say), cached on the bucket, plus one for
the other guards that held, cached per set. So a component is the same object in
every message where the same value appears, whatever the other values are.
(Measured and dropped: a component per combination of guards that held, and
merging the components of an element; both rebuild large state sets for almost
every new message. The price of not merging is more components per element.) A component dies when no NFA
state is left in it. An element costs one cached transition per live component.

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

DEFAULT_BUDGET = 16_000_000
"""Default unit budget per automaton. A unit is a set member, an index entry or a
cached id, roughly 40-60 bytes of Python objects, so this is about 1 GB at worst."""


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


class _Bucket:
    """The guards found under one index key. ``pure`` ones hold whenever the key
    matches (the key is all they test): they lead to one cached ``component``,
    the same object in every message where the key matches. The ``impure`` ones
    still need checking."""

    __slots__ = ("pure", "impure", "component")

    def __init__(self, guards: list[Guard]) -> None:
        self.pure = [g for g in guards if g.pure]
        self.impure = [g for g in guards if not g.pure]
        self.component: DState | None = None


class Trans:
    """The transition of one DState on one tag. Index buckets are plain lists of
    guards until first hit (building a transition stays cheap)."""

    __slots__ = ("base", "plain", "targets", "by_eq", "by_text", "by_self", "by_has", "by_rel",
                 "always", "memo")

    def __init__(self, base: DState, targets: dict[Guard, list[State]]) -> None:
        self.base = base  # target when no guard holds
        self.plain = not targets
        self.targets = targets
        self.by_eq: dict[str, dict] = {}  # attribute -> value -> bucket
        self.by_text: dict = {}  # a text node's value -> bucket
        self.by_self: dict = {}  # the string-value -> bucket
        self.by_has: dict = {}  # attribute -> bucket
        self.by_rel: dict[int, dict] = {}  # level -> accepting state -> bucket
        self.always: list[Guard] = []
        self.memo: dict[frozenset[Guard], DState] = {}
        for g in targets:
            a = g.anchor
            kind = a[0]
            if kind == "eq":
                table = self.by_eq.get(a[1])
                if table is None:
                    table = self.by_eq[a[1]] = {}
                key = a[2]
            elif kind == "text":
                table, key = self.by_text, a[1]
            elif kind == "self":
                table, key = self.by_self, a[1]
            elif kind == "rel":
                rel = a[1]
                table = self.by_rel.get(rel.level)
                if table is None:
                    table = self.by_rel[rel.level] = {}
                key = rel.state
            elif kind == "has":
                table, key = self.by_has, a[1]
            else:
                self.always.append(g)
                continue
            bucket = table.get(key)
            if bucket is None:
                table[key] = [g]
            else:
                bucket.append(g)

    def fire(self, dfa: "LazyDFA", run, node, out: list) -> None:
        """Append to ``out`` the components that guards holding at ``node`` lead to."""
        doc = run.doc
        hit: list = []  # (table, key) of matching buckets
        if self.by_eq or self.by_has:
            by_eq, by_has = self.by_eq, self.by_has
            for name, value in doc.attr_items(node):
                table = by_eq.get(name)
                if table is not None and value in table:
                    hit.append((table, value))
                if name in by_has:
                    hit.append((by_has, name))
        if self.by_text:
            for t in doc.text_nodes(node):
                if t in self.by_text:
                    hit.append((self.by_text, t))
        if self.by_self:
            sv = run.string_value(node)
            if sv in self.by_self:
                hit.append((self.by_self, sv))
        for level, by_rel in self.by_rel.items():
            seen = run.witnessed(node, level)
            if seen:
                if len(seen) < len(by_rel):
                    hit.extend((by_rel, s) for s in seen if s in by_rel)
                else:
                    hit.extend((by_rel, s) for s in by_rel if s in seen)
        impure: list[Guard] = []
        for table, key in hit:
            bucket = table[key]
            if bucket.__class__ is list:
                bucket = table[key] = _Bucket(bucket)
            if bucket.pure:
                c = bucket.component
                if c is None:
                    c = bucket.component = dfa.component(self, bucket.pure)
                out.append(c)
            for g in bucket.impure:
                if g.check(run, node):
                    impure.append(g)
        for g in self.always:
            if g.check(run, node):
                impure.append(g)
        if impure:
            key = frozenset(impure)
            d = self.memo.get(key)
            if d is None:
                d = self.memo[key] = dfa.component(self, key)
            out.append(d)


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

    def component(self, tr: Trans, guards) -> DState:
        """The component that the guards ``guards`` of ``tr`` lead to."""
        states: set[State] = set()
        for g in guards:
            for t in tr.targets[g]:
                states.add(t)
                if t.eps is not None:
                    states.add(t.eps)
        d = self._intern(frozenset(states))
        self.charge(1)
        return d


def _closure(states: set[State]) -> frozenset[State]:
    """Add the ``//`` helper states (the only epsilon moves; they have none of their own)."""
    return frozenset(states | {s.eps for s in states if s.eps is not None})


def advance(dfa: LazyDFA, comps: tuple[DState, ...], tag: str, run, node) -> tuple[DState, ...]:
    """One step of the walk: the components of an element whose parent's are ``comps``
    (empty: nothing below can match)."""
    out: list[DState] = []
    for d in comps:
        tr = d.trans.get(tag)
        if tr is None:
            tr = dfa.build(d, tag)
        if not tr.base.dead:
            out.append(tr.base)
        if not tr.plain:
            tr.fire(dfa, run, node, out)
    if len(out) > 1 and len(set(out)) < len(out):
        out = list(dict.fromkeys(out))
    return tuple(out)
