"""A lazy DFA over the shapes of the shared NFA, and the per-state indexes of the
profiles' value checks that hang off it.

The DFA runs on the shapes (the unguarded states of the NFA, which hold every
profile's path with its guards stripped, see :mod:`yfilter.nfa`): its states are
sets of them, built the first time a message needs them and then reused (Green et
al., TODS 2004), so an element costs one dictionary lookup however many profiles
share the automaton. Because shapes follow the document's structure alone, a new
message with new values meets the same few DFA states as the last one: nothing is
rebuilt because values changed.

Values are dealt with by *selection postponed* (YFilter, TODS 2003): nothing is
evaluated until the structure reaches a profile's final node, and then only for
candidates that indexes find. Each DFA state keeps an :class:`Index` of the final
check nodes (:class:`yfilter.nfa.CheckNode`) sitting on its shape states:

* a node whose last guard has an indexable anchor is filed under it,
  ``by_eq[attribute][value]``, ``by_text[value]`` (a text node), ``by_self[value]``
  (the string-value), ``by_has[attribute]``: one hash lookup per attribute (text
  node) of an element finds every such profile that can end there. Under one key a
  :class:`Bucket` keeps the ids of the nodes that match outright (the key is all
  they test and no guard is above them: one cached set, no per-profile work) and a
  :class:`Pool` of the others;
* the other final nodes are filed once for the whole automaton, in
  :class:`yfilter.keyed.Keyed`; the index keeps its shape states that have some
  (``lazy``), to take their candidates from the message's selection.

A pool files its nodes by *key*, the rarest of the values a message must contain for
the node to hold (:class:`yfilter.operators.Need`; rarity estimated by
:class:`yfilter.nfa.Rarity` from the values profiles compare with). Per message, one
set intersection of a pool's keys with the values the message contains
(:class:`yfilter.document.Contents`) and a test of the rest of each such node's need
give the candidates, once per pool and message. Only those are checked, by
:mod:`yfilter.runtime`. So equality predicates on the same attribute of the same
DFA state are one hash lookup for all profiles, and a profile whose values are not
all in the message costs nothing beyond its share of the intersection.

Memory is bounded by ``budget``, counted in *units*: one per cached state plus one
per shape state in it, one per transition, one per final node or shape state an
index files (its pools come with it), and one per profile id cached for reporting (a state's
guard-free ids, a bucket's outright ids). When the total passes the budget the whole
cache is dropped and rebuilt lazily from the next element on (the approach of RE2's
DFA cache): memory stays bounded, and the hot working set comes back within a few
messages. The engine also drops it when profiles are added or removed, since cached
states and indexes would miss the change. Per-message structures (candidates chosen,
memos) live only while the message is matched.
"""

from __future__ import annotations

from yfilter.keyed import Keyed, choose_key
from yfilter.nfa import NFA, CheckNode, Rarity, State, nodes_of
from yfilter.operators import attr_atom

DEFAULT_BUDGET = 16_000_000
"""Default unit budget. A unit is a set member, an index entry or a cached id,
roughly 40-100 bytes of Python objects, so this is about 1 GB at worst."""

_UNBUILT = object()
_ANY = ("*", None)  # the unguarded '*' edge


class DState:
    """A set of shape states; ``accepts`` when a profile without guards ends in one of
    them, ``dead`` when empty (nothing below can match: the walk skips the subtree).
    ``index`` is the :class:`Index` of its check nodes (None: none), built on first
    use."""

    __slots__ = ("states", "trans", "accepts", "dead", "index", "_ids")

    def __init__(self, states: frozenset[State]) -> None:
        self.states = states
        self.trans: dict[str, DState] = {}
        self.accepts = any(s.accept for s in states)
        self.dead = not states
        self.index = _UNBUILT
        self._ids: frozenset | None = None

    def ids(self, dfa: "LazyDFA") -> frozenset:
        """Ids of the guard-free profiles accepted here, cached."""
        ids = self._ids
        if ids is None:
            ids = self._ids = frozenset().union(*(s.accept for s in self.states if s.accept))
            dfa.charge(len(ids))
        return ids


class Pool:
    """Final check nodes filed by their *key*, the rarest value their need names that
    is not known to be there already (``known``: the anchor that found them), so that
    one set intersection with a message's contents picks out the ones worth checking
    (:meth:`select`). Under each key, ``sure`` nodes need nothing else; the others'
    whole need is tested."""

    __slots__ = ("base", "selves", "always")

    def __init__(self, nodes: list[CheckNode], rarity: Rarity, known: tuple = ()) -> None:
        self.base: dict[object, tuple[list, list]] = {}  # a value of Need.base -> groups
        self.selves: dict[str, tuple[list, list]] = {}  # a string-value -> groups
        always: list[CheckNode] = []
        for n in nodes:
            need = n.need
            base, selves = need.base.difference(known), need.selves.difference(known)
            table, key = choose_key(base, selves, rarity)
            if table is None:
                always.append(n)
                continue
            sure = len(base) + len(selves) == 1
            groups = (self.base if table == "base" else self.selves).setdefault(key, ([], []))
            groups[0 if sure else 1].append(n)
        self.always = tuple(always)

    def __bool__(self) -> bool:
        return bool(self.always or self.base or self.selves)

    def select(self, values) -> tuple[CheckNode, ...]:
        """The nodes whose whole need the :class:`~yfilter.document.Contents` meet."""
        out = list(self.always)
        for table, present in ((self.base, values.base),
                               (self.selves, values.selves() if self.selves else ())):
            if table:
                for k in table.keys() & present:
                    sure, check = table[k]
                    out.extend(sure)
                    for c in check:
                        if c.need.met(values):
                            out.append(c)
        return tuple(out) if out else ()


class Bucket:
    """The final nodes filed under one anchor value: ``pure_ids`` are the ids of those
    that match whenever the anchor does, ``pool`` the others (to check)."""

    __slots__ = ("pure_ids", "pool")

    def __init__(self, nodes: list[CheckNode], rarity: Rarity) -> None:
        pure = [n for n in nodes if n.pure and n.prior is None]
        self.pure_ids = frozenset().union(*(n.accept for n in pure)) if pure else None
        rest = [n for n in nodes if not (n.pure and n.prior is None)]
        self.pool = Pool(rest, rarity, _atom(rest[0].guard.anchor)) if rest else None


def _atom(anchor: tuple) -> tuple:
    """The values of a need that an anchor's hit shows present."""
    kind = anchor[0]
    return (attr_atom(anchor[1], anchor[2]),) if kind == "eq" else \
        (anchor[1],) if kind in ("text", "self") else ()


class Index:
    """The final check nodes of one DFA state: those with an indexable anchor in
    ``by_eq`` / ``by_text`` / ``by_self`` / ``by_has`` (buckets are plain lists until
    first hit); ``lazy``, its shape states with unanchored final nodes (their
    candidates come from :class:`yfilter.keyed.Keyed`), or None."""

    __slots__ = ("by_eq", "by_text", "by_self", "by_has", "eager", "lazy")

    def __init__(self, nodes: list[CheckNode], lazy: frozenset[State] | None) -> None:
        self.by_eq: dict[str, dict[str, Bucket | list]] = {}
        self.by_text: dict[str, Bucket | list] = {}
        self.by_self: dict[str, Bucket | list] = {}
        self.by_has: dict[str, Bucket | list] = {}
        for n in nodes:
            a = n.guard.anchor
            kind = a[0]
            if kind == "eq":
                table = self.by_eq.get(a[1])
                if table is None:
                    table = self.by_eq[a[1]] = {}
                key = a[2]
            else:
                table = self.by_text if kind == "text" else \
                    self.by_self if kind == "self" else self.by_has
                key = a[1]
            table.setdefault(key, []).append(n)
        self.eager = bool(self.by_eq or self.by_text or self.by_self or self.by_has)
        self.lazy = lazy


class LazyDFA:
    """The lazily built, budget-bounded DFA of the shape of ``nfa``."""

    def __init__(self, nfa: NFA, budget: int = DEFAULT_BUDGET) -> None:
        self.root = nfa.root
        self.rarity = nfa.rarity
        self.keyed: Keyed = nfa.keyed
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
        """Drop every cached state, transition and index (rebuilt on demand)."""
        for d in self._states.values():
            d.trans.clear()  # a walk still holding an old DState rebuilds from it
            d.index = _UNBUILT
            d._ids = None
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

    def step(self, d: DState, tag: str) -> DState:
        """Compute (and cache) the transition of ``d`` on ``tag``."""
        out: set[State] = set()
        for s in d.states:  # unguarded states: follow unguarded transitions only
            if s.loop:
                out.add(s)
            edges = s.edges
            if edges is not None:
                t = edges.get((tag, None))
                if t is not None:
                    out.add(t)
                t = edges.get(_ANY)
                if t is not None:
                    out.add(t)
        t = self._intern(_closure(out))
        d.trans[tag] = t
        self.charge(1)
        return t

    def bucket(self, table: dict, key: str) -> Bucket:
        """Turn the list of nodes under ``table[key]`` into a :class:`Bucket`."""
        b = table[key] = Bucket(table[key], self.rarity)
        if b.pure_ids is not None:
            self.charge(len(b.pure_ids))
        return b

    def index(self, d: DState) -> Index | None:
        """Build (and cache) the index of the final check nodes on ``d``'s states."""
        eager = [n for s in d.states if s.checks for n in nodes_of(s.checks)
                 if n.accept is not None and n.eager]
        keyed = self.keyed
        lazy = frozenset(s for s in d.states if keyed.has(s)) if len(keyed) else ()
        ix = d.index = Index(eager, lazy or None) if eager or lazy else None
        self.charge(len(eager) + len(lazy))
        return ix


def _closure(states: set[State]) -> frozenset[State]:
    """Add the ``//`` helper states (the only epsilon moves; they have none of their own)."""
    return frozenset(states | {s.eps for s in states if s.eps is not None})
