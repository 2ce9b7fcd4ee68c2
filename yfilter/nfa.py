"""The shared path automaton (YFilter's NFA), built and shrunk in place.

Every location step is one of four fragments: ``/a``, ``//a``, ``/*``, ``//*``; a
``//`` goes through the state's single ``eps`` successor, which loops on every
element. Paths with a common prefix share states: ``insert`` walks existing
transitions as far as they go and creates only the rest. Transitions are labelled
by name test *and* guard (the step's predicates, see :mod:`yfilter.operators`), so
``/a[@x='1']/b`` and ``/a/b`` share ``/a``'s fragment only up to the guard.
Every state counts the paths through it; ``delete`` unlinks states whose count
drops to zero, so the automaton never needs a rebuild.

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

from yfilter.operators import Guard

Step = tuple[str, str, "Guard | None"]  # (axis '/' or '//', name test, guard)


class State:
    """An NFA state. ``named[tag][guard]`` / ``star[guard]`` are the transitions,
    ``eps`` the ``//`` helper, ``loop`` whether this state loops on every element,
    ``accept`` what accepting here means (a set of profile ids in the main automaton,
    the :class:`RelPath` in the relative one) or None."""

    __slots__ = ("named", "star", "eps", "loop", "refs", "accept", "parent", "label", "sid")
    _next_id = 0

    def __init__(self, parent: "State | None" = None, label: tuple | None = None,
                 loop: bool = False) -> None:
        self.named: dict[str, dict[Guard | None, State]] = {}
        self.star: dict[Guard | None, State] = {}
        self.eps: State | None = None
        self.loop = loop
        self.refs = 0
        self.accept = None
        self.parent, self.label = parent, label
        State._next_id += 1
        self.sid = State._next_id

    def __repr__(self) -> str:
        return f"State({self.sid})"


class NFA:
    """A growable, shrinkable YFilter NFA rooted at ``root``."""

    def __init__(self) -> None:
        self.root = State()
        self.size = 0

    def insert(self, steps: Iterable[Step]) -> State:
        """Add a path (sharing any existing prefix) and return its final state."""
        s = self.root
        for axis, test, guard in steps:
            if axis == "//":
                if s.eps is None:
                    s.eps = self._new(s, ("eps",), loop=True)
                s = s.eps
                s.refs += 1
            edges = s.star if test == "*" else s.named.setdefault(test, {})
            t = edges.get(guard)
            if t is None:
                t = edges[guard] = self._new(s, (test, guard))
            s = t
            s.refs += 1
        return s

    def _new(self, parent: State, label: tuple, loop: bool = False) -> State:
        self.size += 1
        return State(parent, label, loop)

    def find(self, steps: Iterable[Step]) -> State:
        """The final state of a path that was inserted."""
        s = self.root
        for axis, test, guard in steps:
            if axis == "//":
                s = s.eps
            s = (s.star if test == "*" else s.named[test])[guard]
        return s

    def delete(self, steps: Iterable[Step]) -> None:
        """Remove one insertion of a path; states no other path uses go away."""
        s = self.find(steps)
        while s is not self.root:
            parent = s.parent
            s.refs -= 1
            if s.refs == 0:
                self.size -= 1
                if s.label[0] == "eps":
                    parent.eps = None
                else:
                    test, guard = s.label
                    if test == "*":
                        del parent.star[guard]
                    else:
                        edges = parent.named[test]
                        del edges[guard]
                        if not edges:
                            del parent.named[test]
            s = parent
