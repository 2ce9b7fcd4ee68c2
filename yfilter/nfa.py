"""The shared path automaton (YFilter's NFA), built and shrunk in place, and the
check nodes that tie its guards to the structure.

Every location step is one of four fragments: ``/a``, ``//a``, ``/*``, ``//*``; a
``//`` goes through the state's single ``eps`` successor, which loops on every
element. Paths with a common prefix share states: ``insert`` walks existing
transitions as far as they go and creates only the rest. Transitions are labelled
by name test *and* guard (the step's predicates, see :mod:`yfilter.operators`), so
``/a[@x='1']/b`` and ``/a/b`` share ``/a``'s fragment only up to the guard.
Every state counts the paths through it; ``delete`` unlinks states whose count
drops to zero, so the automaton never needs a rebuild.

The *shape* of a path is the path with every guard stripped. A path with guards is
inserted twice: as itself, and as its shape (an unguarded path, shared with any
profile that has that shape). So the unguarded states are a trie of all shapes,
and only they are run as a (lazy) DFA: its states follow the document's structure
alone and stay few and warm whatever the values are (see :mod:`yfilter.dfa`). Each
guarded state knows its ``shape`` state, and a :class:`CheckNode` keeps what the
shape forgets, for every state whose activity the structure alone does not decide:
the target of a guarded step, and the final state of a profile with a guard
anywhere on its path. A node knows its *prior* (the nearest guarded node above it)
and the unguarded *segment* of steps between the two, so whether it holds at an
element is: its guard holds there, the prior held at an ancestor, and the segment
fits the ancestors in between (see :mod:`yfilter.runtime`).

>>> nfa = NFA()
>>> s = nfa.insert([("/", "a", None), ("//", "b", None)])
>>> t = nfa.insert([("/", "a", None), ("/", "c", None)])
>>> nfa.size  # a, the '//' loop state, b, c
4
>>> nfa.delete([("/", "a", None), ("//", "b", None)]); nfa.size
2
"""

from __future__ import annotations

from typing import Iterable

from yfilter.keyed import Keyed
from yfilter.operators import NO_NEED, AttrTest, Guard, Nested, SelfTest, TextTest

Step = tuple[str, str, "Guard | None"]  # (axis '/' or '//', name test, guard)

_EPS = ("eps",)


class State:
    """A state of the trie. ``edges[(test, guard)]`` are the transitions (``test`` a
    name or ``'*'``; None until there is one), ``label`` the key of the edge that
    leads here (``('eps',)`` for the ``//`` helper ``eps``), ``loop``
    whether this state loops on every element. ``refs`` counts the inserted paths
    through it, ``real`` those that are profiles' own (not only shapes). ``accept``:
    the profile ids accepted here. ``guarded``: a guard on the way here; then
    ``shape`` is the unguarded state at the same position (else the state itself)
    and ``node`` its :class:`CheckNode`, if any. Unguarded states only: ``checks``,
    the check nodes whose shape they are (one node, or a set of several, to spare
    memory)."""

    __slots__ = ("edges", "eps", "loop", "refs", "real", "accept", "parent", "label", "sid",
                 "shape", "node", "guarded", "checks")
    _next_id = 0

    def __init__(self, parent: "State | None" = None, label: tuple | None = None,
                 loop: bool = False) -> None:
        self.edges: dict[tuple[str, Guard | None], State] | None = None
        self.eps: State | None = None
        self.loop = loop
        self.refs = self.real = 0
        self.accept: set[str] | None = None
        self.parent, self.label = parent, label
        self.guarded = parent is not None and (parent.guarded or (
            label is not None and len(label) == 2 and label[1] is not None))
        self.shape: State | None = None if self.guarded else self
        self.node: CheckNode | None = None
        self.checks: CheckNode | set[CheckNode] | None = None
        State._next_id += 1
        self.sid = State._next_id

    def __repr__(self) -> str:
        return f"State({self.sid})"


class CheckNode:
    """A guarded-trie state that must be checked against the values of a message.

    ``guard`` is the step's guard (None for the final state of a profile whose last
    step has none); ``prior`` the nearest guarded node above (None: nothing but
    structure above); ``seg`` the ``(axis, test)`` steps from the prior (exclusive)
    to here (inclusive) and ``span`` its length when it is all child steps (the
    prior then sits exactly ``span`` levels up), else 0. ``eager`` when the guard
    has an indexable anchor (:attr:`Guard.anchor`: one hash lookup on an element's
    values finds it). ``need``: the values a message must contain for this node to
    hold (its guard's and its prior's, see :class:`yfilter.operators.Need`).
    ``accept``: the ids of the profile ending here, if any."""

    __slots__ = ("state", "shape", "guard", "pure", "prior", "seg", "span", "depth", "eager",
                 "need", "accept")

    def __init__(self, state: State) -> None:
        self.state, self.shape = state, state.shape
        self.guard: Guard | None = state.label[1]
        self.pure = self.guard is not None and self.guard.pure
        seg: list[tuple[str, str]] = []
        s = state
        while True:
            par = s.parent
            if par.label == _EPS:
                axis, par = "//", par.parent
            else:
                axis = "/"
            seg.append(_pair(axis, s.label[0]))
            if par.parent is None:
                self.prior = None
                break
            if par.label[1] is not None:
                self.prior = par.node
                break
            s = par
        seg.reverse()
        self.seg = tuple(seg)
        self.span = len(seg) if all(a == "/" for a, _ in seg) else 0
        above = 0 if self.prior is None else self.prior.depth
        self.depth = above + self.span if self.span and (above or self.prior is None) else 0
        self.eager = self.guard is not None and self.guard.anchor[0] != "lazy"
        need = NO_NEED if self.guard is None else self.guard.need
        if self.prior is not None:
            need = need | self.prior.need if need else self.prior.need
        self.need = need
        self.accept = state.accept

    def __repr__(self) -> str:
        return f"CheckNode({self.state.sid}, {self.guard!r})"


class Rarity:
    """How many distinct values the registered guards compare each attribute (and
    text nodes or string-values) with: the more there are, the less likely one of
    them is in a given message. Used to pick, for every profile, the value that
    filters it best (:meth:`of`)."""

    def __init__(self) -> None:
        self._values: dict[str | None, dict[str, int]] = {}  # attribute (None: text)

    def count(self, guard: Guard, by: int) -> None:
        for p in guard.preds:
            for c in p.conjuncts():
                if isinstance(c, AttrTest) and c.eq is not None:
                    self._bump(c.name, c.eq, by)
                elif isinstance(c, (TextTest, SelfTest)) and c.eq is not None:
                    self._bump(None, c.eq, by)
                elif isinstance(c, Nested):
                    for _, _, g in c.rel.steps:
                        if g is not None:
                            self.count(g, by)

    def _bump(self, name: str | None, value: str, by: int) -> None:
        vals = self._values.setdefault(name, {})
        n = vals.get(value, 0) + by
        if n:
            vals[value] = n
        else:
            del vals[value]
            if not vals:
                del self._values[name]

    def of(self, atom: str) -> int:
        """The rarity of a value of :attr:`yfilter.operators.Need.base` or ``selves``:
        the number of distinct values its attribute (or text) is compared with; 0 for
        an element name (found in most messages)."""
        name, sep, _ = atom.partition("\x00")
        if sep:
            return len(self._values.get(name, ()))
        texts = self._values.get(None, ())
        return len(texts) if atom in texts else 0


class NFA:
    """A growable, shrinkable YFilter NFA rooted at ``root``. ``size`` counts the
    states on profiles' own paths, ``total`` also those only shapes use. ``keyed``
    files the final check nodes without an anchor (:mod:`yfilter.keyed`)."""

    def __init__(self) -> None:
        self.root = State()
        self.size = self.total = 0
        self.rarity = Rarity()
        self.keyed = Keyed(self.rarity)

    def insert(self, steps: Iterable[Step]) -> State:
        """Add a path (sharing any existing prefix) and, if it has guards, its shape;
        return its final state."""
        steps = tuple(steps)
        path = self._insert(steps, True)
        if path[-1].guarded:
            shape = self._insert(_stripped(steps), False)
            for s, h in zip(path, shape):
                if s.shape is None:
                    s.shape = h
                    if s.label[0] != "eps" and s.label[1] is not None:
                        self._attach(s)
        return path[-1]

    def _insert(self, steps: tuple[Step, ...], real: bool) -> list[State]:
        s = self.root
        path = []
        for axis, test, guard in steps:
            if axis == "//":
                if s.eps is None:
                    s.eps = self._new(s, _EPS, loop=True)
                s = s.eps
                self._ref(s, real)
                path.append(s)
            edges = s.edges
            if edges is None:
                edges = s.edges = {}
            key = (test, guard)
            t = edges.get(key)
            if t is None:
                t = edges[key] = self._new(s, key)
            s = t
            self._ref(s, real)
            path.append(s)
        return path

    def _ref(self, s: State, real: bool) -> None:
        s.refs += 1
        if real:
            s.real += 1
            if s.real == 1:
                self.size += 1

    def _new(self, parent: State, label: tuple, loop: bool = False) -> State:
        self.total += 1
        return State(parent, label, loop)

    def set_accept(self, state: State, ids: set[str] | None) -> None:
        """Make ``state`` (a final state from :meth:`insert`) accept ``ids``, or
        nothing (None)."""
        state.accept = ids
        if not state.guarded:
            return  # the structure alone decides
        node = state.node
        if node is not None:
            node.accept = ids
            if ids is None:
                self.keyed.discard(node)
                if state.label[1] is None:
                    self._detach(state)
            elif not node.eager:
                self.keyed.add(node)
        elif ids is not None:
            self._attach(state)

    def _attach(self, s: State) -> None:
        s.node = CheckNode(s)
        if s.node.guard is not None:
            self.rarity.count(s.node.guard, 1)
        if s.node.accept is not None and not s.node.eager:
            self.keyed.add(s.node)
        h = s.shape
        if h.checks is None:
            h.checks = s.node
        elif h.checks.__class__ is CheckNode:
            h.checks = {h.checks, s.node}
        else:
            h.checks.add(s.node)

    def _detach(self, s: State) -> None:
        self.keyed.discard(s.node)
        if s.node.guard is not None:
            self.rarity.count(s.node.guard, -1)
        h = s.shape
        if h.checks is s.node:
            h.checks = None
        else:
            h.checks.discard(s.node)
            if len(h.checks) == 1:
                h.checks = next(iter(h.checks))
        s.node = None

    def find(self, steps: Iterable[Step]) -> State:
        """The final state of a path that was inserted."""
        s = self.root
        for axis, test, guard in steps:
            if axis == "//":
                s = s.eps
            s = s.edges[(test, guard)]
        return s

    def delete(self, steps: Iterable[Step]) -> None:
        """Remove one insertion of a path (and of its shape); states no other path
        uses go away."""
        steps = tuple(steps)
        guarded = self.find(steps).guarded
        self._delete(steps, True)
        if guarded:
            self._delete(_stripped(steps), False)

    def _delete(self, steps: tuple[Step, ...], real: bool) -> None:
        s = self.find(steps)
        while s is not self.root:
            parent = s.parent
            s.refs -= 1
            if real:
                s.real -= 1
                if s.real == 0:
                    self.size -= 1
            if s.refs == 0:
                self.total -= 1
                if s.node is not None:
                    self._detach(s)
                if s.label == _EPS:
                    parent.eps = None
                else:
                    del parent.edges[s.label]
                    if not parent.edges:
                        parent.edges = None
            s = parent


_PAIRS: dict[tuple[str, str], tuple[str, str]] = {}


def _pair(axis: str, test: str) -> tuple[str, str]:
    """One shared ``(axis, test)`` tuple per pair: segments repeat them a lot."""
    key = (axis, test)
    return _PAIRS.setdefault(key, key)


def nodes_of(checks: CheckNode | set[CheckNode] | None) -> tuple | set:
    """The check nodes in a state's ``checks``."""
    if checks is None:
        return ()
    return (checks,) if checks.__class__ is CheckNode else checks


def _stripped(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    return tuple((axis, test, None) for axis, test, _ in steps)
