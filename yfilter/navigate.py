"""Selecting nodes by navigation, over the engine's shared operator network.

The automaton answers *whether* a path occurs in a message, for all profiles at once.
Some work needs the nodes themselves, and only for a few paths: the bindings of a
transformation profile whose ``for``/``where`` matched, the nodes a ``return`` clause
projects, the targets of a plan that must be decided before the rest. That work walks
the document along compiled location steps ``(axis, test, guard)``, whose guards are
the same interned operators the automaton uses, checked through the same per-message
memo (:class:`yfilter.runtime.Run`): a predicate already evaluated on an element by the
walk, or by another path, is not evaluated again.

A :class:`Session` is that per-message state: the run (document + operator memo), the
node sets of path prefixes already navigated (paths with a common prefix share it), the
fragments built by transformation steps, and a count of operator executions.
"""

from __future__ import annotations

from yfilter.document import TableDoc, TreeDoc
from yfilter.nfa import Step
from yfilter.runtime import Run


class Session:
    """Evaluation state of one message (see the module docstring). ``ops`` counts
    navigation and transformation operator executions; with the guard evaluations
    memoised in the run they make :attr:`operator_executions`."""

    __slots__ = ("run", "doc", "nodes", "cands", "frags", "tree", "ops")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.doc = run.doc
        self.nodes: dict = {}  # (context, path prefix key) -> nodes
        self.cands: dict = {}  # (context, axis, name test) -> elements, before predicates
        self.frags: dict = {}  # (node, step-pipeline prefix key) -> built fragments
        self.tree: list | None = None  # a decoded Message's elements as lxml, if needed
        self.ops = 0

    @property
    def guard_evaluations(self) -> int:
        """Predicate evaluations so far: every (guard, element) the memo holds was
        evaluated exactly once (positions add one entry per sibling checked)."""
        return len(self.run.memo)

    @property
    def operator_executions(self) -> int:
        return self.ops + len(self.run.memo)


class Nav:
    """Compiled location steps with the canonical key of each prefix (equal keys:
    equal node sets from the same context)."""

    __slots__ = ("steps", "keys")

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = tuple(steps)
        keys, acc = [], ""
        for axis, test, guard in self.steps:
            acc += axis + (test if guard is None else guard.key)
            keys.append(acc)
        self.keys = tuple(keys)

    def __repr__(self) -> str:
        return f"Nav({self.keys[-1] if self.keys else '.'})"


def root(doc: TableDoc | TreeDoc):
    """The document element."""
    return 0 if isinstance(doc, TableDoc) else doc.root


def select(session: Session, nav: Nav, context=None) -> list:
    """The elements ``nav`` selects, in document order: from the document (``context``
    None, an absolute path) or from the element ``context`` (a relative path; no steps
    selects ``context`` itself)."""
    if not nav.steps:
        return [] if context is None else [context]
    memo = session.nodes
    current = None
    start = 0
    for i in range(len(nav.steps) - 1, -1, -1):  # the longest prefix already navigated
        current = memo.get((context, nav.keys[i]))
        if current is not None:
            start = i + 1
            break
    if current is None:
        current = [context]
    doc, run, by_test = session.doc, session.run, session.cands
    for i in range(start, len(nav.steps)):
        if not current:
            break
        axis, test, guard = nav.steps[i]
        session.ops += len(current)
        out: list = []
        seen: set | None = set() if axis == "//" and len(current) > 1 else None
        for c in current:
            cands = by_test.get((c, axis, test))
            if cands is None:
                cands = by_test[(c, axis, test)] = _candidates(doc, c, axis, test)
            for n in cands:
                if seen is not None:
                    if n in seen:
                        continue
                    seen.add(n)
                if guard is None or guard.check(run, n):
                    out.append(n)
        if len(current) > 1 and len(out) > 1:
            out.sort(key=doc.order)  # nested contexts interleave
        current = out
        memo[(context, nav.keys[i])] = current
    return current


def _candidates(doc, context, axis: str, test: str) -> list:
    """The elements a step's axis and name test reach from ``context`` (None: the
    document), before its predicates: shared by every path with that step."""
    if context is None:
        top = root(doc)
        nodes = (top,) if axis == "/" else (top, *doc.descendants(top))
    else:
        nodes = doc.children(context) if axis == "/" else doc.descendants(context)
    if test == "*":
        return list(nodes)
    tag = doc.tag
    return [n for n in nodes if tag(n) == test]
