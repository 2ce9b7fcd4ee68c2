"""Walking a message through the lazy DFA.

The walk visits elements in document order and gives each the DFA state reached
from its parent's state (the parent's state is looked up rather than kept on an
explicit stack: the table has ``parents``, lxml has ``getparent``). An element in
a dead state (no NFA state left) has nothing below it that can match: the table
walk jumps over its subtree.

:class:`Run` is the per-message context the operators evaluate in: the document,
the memo of guard results, and the nested-path joins (``witnessed``).
"""

from __future__ import annotations

from typing import Callable

from lxml import etree

from yfilter.dfa import DState, LazyDFA, advance
from yfilter.document import TableDoc, TreeDoc


_NONE: frozenset = frozenset()


class Run:
    """Evaluation context of one message."""

    __slots__ = ("doc", "memo", "rel_dfas", "_joins", "_values")

    def __init__(self, doc: TableDoc | TreeDoc, rel_dfas: Callable[[int], LazyDFA]) -> None:
        self.doc = doc
        self.memo: dict = {}
        self.rel_dfas = rel_dfas
        self._joins: dict[int, dict] = {}
        self._values: dict = {}

    def string_value(self, node) -> str:
        """The node's string-value, computed once per message."""
        v = self._values.get(node)
        if v is None:
            v = self._values[node] = self.doc.string_value(node)
        return v

    def witnessed(self, node, level: int) -> frozenset | set:
        """Accepting states of the level's relative automaton reached from ``node``
        as the context element: the nested paths that hold at this very element."""
        j = self._joins.get(level)
        if j is None:
            j = self._joins[level] = joins(self.rel_dfas(level), self)
        return j.get(node, _NONE)


def walk(dfa: LazyDFA, run: Run) -> set[DState]:
    """Run ``dfa`` over the document and return the DFA components with accepting
    members that were reached."""
    doc = run.doc
    start = (dfa.start(),)
    accepted: set[DState] = set()
    if isinstance(doc, TableDoc):
        tags, parents, ends = doc.tags, doc.parents, doc.ends
        states: dict[int, tuple] = {-1: start}
        i, end = 0, len(tags)
        while i < end:
            comps = advance(dfa, states[parents[i]], tags[i], run, i)
            if not comps:
                i = ends[i]  # nothing below can match
                continue
            for d in comps:
                if d.accepts:
                    accepted.add(d)
            states[i] = comps
            i += 1
    else:
        states = {None: start}
        for e in doc.root.iter(etree.Element):
            parent = states[e.getparent()]
            if not parent:
                states[e] = parent
                continue
            comps = states[e] = advance(dfa, parent, e.tag, run, e)
            for d in comps:
                if d.accepts:
                    accepted.add(d)
    return accepted


def joins(dfa: LazyDFA, run: Run) -> dict:
    """All nested paths of one level, for every element at once: one walk in which
    each element starts a run of the relative automaton for its children, and each
    run carries the element it started from. Runs in the same DFA state advance
    together (what holds at an element does not depend on where a run started).
    Returns element -> accepting states reached from it. A run dies as soon as no
    nested path can continue, so the cost per element is the number of distinct
    live run states (about the nested paths' length, more under ``//``)."""
    doc = run.doc
    start = (dfa.start(),)
    out: dict = {}
    if isinstance(doc, TableDoc):
        nodes = range(1, len(doc.tags))
        tags, parents = doc.tags, doc.parents
        first = 0
    else:
        elements = doc.root.iter(etree.Element)
        first = next(elements)
        nodes = elements
    runs_of: dict = {first: {}}  # element -> {components: origins}
    table = isinstance(doc, TableDoc)
    for x in nodes:
        if table:
            p, tag = parents[x], tags[x]
        else:
            p, tag = x.getparent(), x.tag
        live: dict = {}
        for comps, origins in ((start, (p,)), *runs_of[p].items()):
            nc = advance(dfa, comps, tag, run, x)
            if not nc:
                continue
            have = live.get(nc)
            live[nc] = origins if have is None else have + origins
            for d in nc:
                if d.accepts:
                    for o in origins:
                        w = out.get(o)
                        if w is None:
                            out[o] = set(d.accepts)
                        else:
                            w.update(d.accepts)
        runs_of[x] = live
    return out
