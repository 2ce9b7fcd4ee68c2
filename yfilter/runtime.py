"""Walking a message through the lazy DFA, and checking the profiles whose values
the indexes bring forward.

The walk visits elements in document order with their depth, twice. The first pass
runs the DFA alone (shape states, :mod:`yfilter.dfa`): an element in a dead state
has nothing below it that can match, and the walk jumps over its subtree. The
second keeps the chain of the current element's ancestors (per depth the element,
its tag and its DFA state) and, where a DFA state has final check nodes, its index
gives the candidates at the element: those whose anchor one of the element's values
hits, and those whose key value the message contains (:meth:`Run.contents`),
selected once per message among the shape states the first pass reached
(:class:`yfilter.keyed.Keyed`). A candidate is checked only if the message contains
everything it needs.

A check node ``c`` (:class:`yfilter.nfa.CheckNode`) holds at an element ``y`` at
depth ``d`` when (1) ``c``'s shape state is in ``y``'s DFA state: the structure up
to ``c`` fits the path to ``y``; (2) ``c``'s guard holds at ``y``; and (3) ``c``'s
prior holds at an ancestor ``z`` from which ``c``'s segment of unguarded steps fits
the chain down to ``y``: at depth ``c.prior.depth`` when the path to the prior is
all child steps (the shape's own match puts it there), exactly ``span`` levels up
for a segment of child steps, else some ``z`` where the steps embed (a search over
at most ``d`` ancestors). The
answers are memoised per node and element, so profiles that share a prefix share
its checks, and a guard (nested paths included) is evaluated at most once per
element. So a message costs one DFA step per element, one hash lookup per attribute
or text node the indexes care about, one set intersection per index and message,
and then work in proportion to the candidates (profiles whose structure reaches an
element and whose values the message contains), not to the number of profiles.

:class:`Run` is the per-message context the operators evaluate in: the document,
the memo of guard results, string-values and nested-path joins.
"""

from __future__ import annotations

from yfilter.dfa import _UNBUILT, DState, Index, LazyDFA, Pool
from yfilter.document import Contents, TableDoc, TreeDoc
from yfilter.nfa import CheckNode

_DEEPER = 1 << 30


class Run:
    """Evaluation context of one message."""

    __slots__ = ("doc", "memo", "_values", "_nested", "_contents")

    def __init__(self, doc: TableDoc | TreeDoc) -> None:
        self.doc = doc
        self.memo: dict = {}
        self._values: dict = {}
        self._nested: dict = {}
        self._contents: Contents | None = None

    def string_value(self, node) -> str:
        """The node's string-value, computed once per message."""
        v = self._values.get(node)
        if v is None:
            v = self._values[node] = self.doc.string_value(node)
        return v

    def contents(self) -> Contents:
        """The values and names the message contains (computed once)."""
        c = self._contents
        if c is None:
            c = self._contents = self.doc.contents()
        return c

    def nested(self, rel, node) -> bool:
        """Does the nested path ``rel`` select anything from ``node`` (computed once
        per message)?"""
        key = (rel, node)
        r = self._nested.get(key)
        if r is None:
            r = self._nested[key] = rel.exists(self, node)
        return r


def walk(dfa: LazyDFA, run: Run, checks: bool = True) -> tuple[set[DState], list]:
    """Run ``dfa`` over the document. Returns the DFA states reached that accept
    guard-free profiles, and the id sets of the other profiles found to match (none
    without ``checks``: the profiles with predicates are not looked at)."""
    doc = run.doc
    if isinstance(doc, TableDoc):
        nodes, tags, depths = range(len(doc.tags)), doc.tags, doc.depths
    else:
        nodes, tags, depths = doc.preorder()
    # First the structure: each element's DFA state (None: below a dead one), and the
    # indexes met, so that the values are looked up only for shape states reached.
    chain: list = [None] * (max(depths) + 1)
    chain[0] = dfa.start()
    states: list = []
    indexes: set[Index] = set()
    skip = _DEEPER
    for k in range(len(tags)):
        dep = depths[k]
        if dep > skip:
            states.append(None)
            continue
        skip = _DEEPER
        par = chain[dep - 1]
        d = par.trans.get(tags[k])
        if d is None:
            d = dfa.step(par, tags[k])
        if d.dead:
            skip = dep  # nothing below can match
            states.append(None)
            continue
        chain[dep] = d
        states.append(d)
        if checks:
            ix = d.index
            if ix is _UNBUILT:
                ix = dfa.index(d)
            if ix is not None:
                indexes.add(ix)
    accepted: set[DState] = set()
    if not indexes:
        accepted.update(d for d in states if d is not None and d.accepts)
        return accepted, []
    chk = _Checker(run, dfa, len(chain), indexes)
    cd, cn, ct, chosen = chk.dstates, chk.nodes, chk.tags, chk.chosen
    cd[0] = chain[0]
    for k in range(len(tags)):
        d = states[k]
        if d is None:
            continue
        dep = depths[k]
        cd[dep] = d
        node = cn[dep] = nodes[k]
        ct[dep] = tags[k]
        if d.accepts:
            accepted.add(d)
        ix = d.index
        if ix is _UNBUILT:  # the cache was flushed since the first pass
            ix = dfa.index(d)
        if ix is not None:
            if ix.eager:
                chk.fire(ix, node, dep)
            if ix.lazy is not None:
                cands = chosen.get(ix)
                if cands is None:
                    cands = chk.unanchored(ix)
                if cands:
                    chk.check(cands, dep)
    return accepted, chk.found


class _Checker:
    """The checks of one message (see the module docstring). ``found`` collects the
    id sets of matching profiles."""

    __slots__ = ("run", "doc", "dfa", "dstates", "nodes", "tags", "memo", "found", "done",
                 "chosen", "_keyed", "_indexes")

    def __init__(self, run: Run, dfa: LazyDFA, height: int, indexes: set[Index]) -> None:
        self.run, self.doc, self.dfa = run, run.doc, dfa
        self._indexes = indexes  # of the DFA states the message reaches
        self.dstates: list = [None] * height  # per depth of the chain
        self.nodes: list = [None] * height
        self.tags: list = [None] * height
        self.memo: dict = {}
        self.found: list = []
        self.done: set[CheckNode] = set()  # final nodes already reported
        self.chosen: dict[Pool | Index, tuple] = {}  # candidates in this message
        self._keyed: dict | None = None  # the unanchored candidates, by shape state

    def fire(self, ix: Index, node, dep: int) -> None:
        """Check the final nodes whose anchor the element's values hit."""
        doc = self.doc
        by_eq, by_has, by_text, by_self = ix.by_eq, ix.by_has, ix.by_text, ix.by_self
        if by_eq or by_has:
            for name, value in doc.attr_items(node):
                t = by_eq.get(name)
                if t is not None:
                    b = t.get(value)
                    if b is not None:
                        self._hit(t, value, b, dep)
                b = by_has.get(name)
                if b is not None:
                    self._hit(by_has, name, b, dep)
        if by_text:
            texts = doc.text_nodes(node)
            for t in (set(texts) if len(texts) > 1 else texts):
                b = by_text.get(t)
                if b is not None:
                    self._hit(by_text, t, b, dep)
        if by_self:
            sv = self.run.string_value(node)
            b = by_self.get(sv)
            if b is not None:
                self._hit(by_self, sv, b, dep)

    def _hit(self, table: dict, key: str, b, dep: int) -> None:
        if b.__class__ is list:
            b = self.dfa.bucket(table, key)
        if b.pure_ids is not None:
            self.found.append(b.pure_ids)
        if b.pool is not None:
            self.candidates(b.pool, dep)

    def candidates(self, pool: Pool, dep: int) -> None:
        """Check the final nodes of ``pool`` at this element, once the message is
        known to contain what they need (selected once per pool and message). A pure
        node in a bucket's pool needs no guard check: its anchor is its guard."""
        cands = self.chosen.get(pool)
        if cands is None:
            cands = self.chosen[pool] = pool.select(self.run.contents())
        if cands:
            self.check(cands, dep)

    def unanchored(self, ix: Index) -> tuple[CheckNode, ...]:
        """The unanchored final nodes of ``ix``'s shape states that the message's
        values select (chosen once per message for all shape states at once, see
        :meth:`yfilter.keyed.Keyed.select`); kept in :attr:`chosen`."""
        by = self._keyed
        if by is None:
            shapes = set().union(*[i.lazy for i in self._indexes if i.lazy is not None])
            by, roots = self.dfa.keyed.select(self.run.contents(), shapes)
            self._keyed = by
            run, root, found = self.run, self.nodes[1], self.found
            for c in roots:  # their shapes are reached: the root decides
                if c.prior.guard.check(run, root):
                    found.append(c.accept)
        lazy = ix.lazy
        out: list = []
        for s in (lazy.intersection(by) if len(by) < len(lazy) else by.keys() & lazy):
            out.extend(by[s])
        cands = self.chosen[ix] = tuple(out)
        return cands

    def check(self, cands: tuple[CheckNode, ...], dep: int) -> None:
        """Report the candidates that hold at the element at depth ``dep``."""
        done, found, run = self.done, self.found, self.run
        dstates, nodes = self.dstates, self.nodes
        node = nodes[dep]
        for c in cands:
            if c in done:
                continue
            g = c.guard
            if g is not None and not c.pure and not g.check(run, node):
                continue
            p = c.prior
            if p is not None:
                z = p.depth
                if z:  # c's shape is on the chain, so the prior's element is at z
                    if z >= dep:
                        continue
                    if p.prior is None:  # the common case, inline
                        if not p.guard.check(run, nodes[z]):
                            continue
                    elif not self.holds(p, z):
                        continue
                    done.add(c)
                    found.append(c.accept)
                    continue
                span = c.span
                if not span:
                    if not self.prior_ok(c, dep):
                        continue
                elif span >= dep:
                    continue
                elif p.prior is None:
                    z = dep - span
                    if p.shape not in dstates[z].states or not p.guard.check(run, nodes[z]):
                        continue
                elif not self.holds(p, dep - span):
                    continue
            done.add(c)
            found.append(c.accept)

    def holds(self, c: CheckNode, z: int) -> bool:
        """Does ``c`` hold at the element at depth ``z`` of the chain?"""
        g = c.guard
        if c.prior is None:  # the guard's own memo is enough
            return c.shape in self.dstates[z].states and (g is None or g.check(self.run,
                                                                             self.nodes[z]))
        node = self.nodes[z]
        key = (c, node)
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = (c.shape in self.dstates[z].states
                                  and (g is None or g.check(self.run, node))
                                  and self.prior_ok(c, z))
        return r

    def prior_ok(self, c: CheckNode, dep: int) -> bool:
        """Does ``c``'s prior hold at an ancestor from which ``c``'s segment leads to
        depth ``dep``?"""
        p = c.prior
        if p.depth:  # see check
            return p.depth < dep and self.holds(p, p.depth)
        if c.span:
            z = dep - c.span
            return z > 0 and self.holds(p, z)
        seg, tags, dstates, shape = c.seg, self.tags, self.dstates, p.shape
        for z in range(dep - len(seg), 0, -1):
            if shape in dstates[z].states and _fits(seg, 0, z, dep, tags) and self.holds(p, z):
                return True
        return False


def _fits(seg: tuple[tuple[str, str], ...], i: int, pos: int, end: int, tags: list) -> bool:
    """Can the steps ``seg[i:]`` bind chain depths below ``pos``, the last one exactly
    at ``end``?"""
    axis, test = seg[i]
    rest = len(seg) - 1 - i  # steps still to place after this one
    if rest == 0:
        if end <= pos or (axis == "/" and end != pos + 1):
            return False
        return test == "*" or tags[end] == test
    if axis == "/":
        q = pos + 1
        return q <= end - rest and (test == "*" or tags[q] == test) \
            and _fits(seg, i + 1, q, end, tags)
    for q in range(pos + 1, end - rest + 1):
        if (test == "*" or tags[q] == test) and _fits(seg, i + 1, q, end, tags):
            return True
    return False
