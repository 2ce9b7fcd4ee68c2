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

from lxml import etree

from yfilter.dfa import DState, LazyDFA, advance
from yfilter.document import TableDoc, TreeDoc
from yfilter.nfa import State


class Run:
    """Evaluation context of one message."""

    __slots__ = ("doc", "memo", "rel_dfa", "_witnessed")

    def __init__(self, doc: TableDoc | TreeDoc, rel_dfa: LazyDFA) -> None:
        self.doc = doc
        self.memo: dict = {}
        self.rel_dfa = rel_dfa
        self._witnessed: dict = {}

    def witnessed(self, node) -> set[State]:
        """Accepting states of the relative automaton (all nested paths of all
        profiles) reached in ``node``'s subtree, with ``node`` as the context: the
        nested paths that hold at this very element."""
        w = self._witnessed.get(node)
        if w is None:
            w = self._witnessed[node] = walk(self.rel_dfa, self, node)
        return w


def walk(dfa: LazyDFA, run: Run, context=None) -> set:
    """Run ``dfa`` over the descendants of ``context`` (the whole document when None)
    and return the accepting NFA states reached."""
    doc = run.doc
    start = dfa.start()
    accepted: set[DState] = set()
    if isinstance(doc, TableDoc):
        tags, parents, ends = doc.tags, doc.parents, doc.ends
        if context is None:
            i, end, top = 0, len(tags), -1
        else:
            i, end, top = context + 1, ends[context], context
        states: dict[int, DState] = {top: start}
        while i < end:
            d = advance(dfa, states[parents[i]], tags[i], run, i)
            if d.dead:
                i = ends[i]
                continue
            if d.accepts:
                accepted.add(d)
            states[i] = d
            i += 1
    else:
        if context is None:
            root = doc.root
            states = {None: start}
            elements = root.iter(etree.Element)
        else:
            states = {context: start}
            elements = context.iterdescendants(etree.Element)
        for e in elements:
            parent = states[e.getparent()]
            if parent.dead:
                states[e] = parent
                continue
            d = states[e] = advance(dfa, parent, e.tag, run, e)
            if d.accepts:
                accepted.add(d)
    if not accepted:
        return set()
    out: set[State] = set()
    for d in accepted:
        out.update(d.accepts)
    return out
