"""The final check nodes without an anchor, filed by key for all shape states at
once, so that a message selects its candidates among them in one pass.

A node whose last step has no indexable anchor (:attr:`yfilter.nfa.CheckNode.eager`
is false, e.g. ``/a[@x='1']/b`` or ``//b[c]``) cannot be found by a hash lookup on
an element's own values. It is filed under its *key*: the rarest value its
:class:`~yfilter.operators.Need` names (rarity from :class:`yfilter.nfa.Rarity`),
since a message lacking that value cannot satisfy it. Per message, one lookup per
value the message contains (:class:`yfilter.document.Contents`) and a test of the
rest of each such node's need give the candidates, grouped by shape state
(:meth:`Keyed.select`); a DFA state then takes those of its own shape states. A
node decided at the root (:func:`rooted`) needs no more than one guard check. The
work is in proportion to the nodes whose key the message holds, whatever the
number of DFA states that share a shape state.

The table is kept up to date as profiles come and go (no rebuild per change). A
key is chosen when a node is filed, with the rarities known then; once the number
of nodes has doubled since the last time, every node is filed again with the
current rarities (a compaction whose cost is amortised over the additions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yfilter.nfa import CheckNode, Rarity, State


def choose_key(base: frozenset, selves: frozenset, rarity: "Rarity") -> tuple:
    """Of the values ``base`` and ``selves`` (parts of a need), the one least likely
    to be in a message, as ``(table, value)``: table ``'base'`` or ``'self'``, or
    None when there is none."""
    best, table, key = -1, None, None
    for a in base:
        r = rarity.of(a)
        if r > best:
            best, table, key = r, "base", a
    for a in selves:
        r = rarity.of(a)
        if r > best:  # ties go to base: string-values cost more to collect
            best, table, key = r, "self", a
    return table, key


class Keyed:
    """The unanchored final check nodes of the automaton, by key. Under a key,
    ``sure`` nodes need nothing else that is rare; the others' whole need is
    tested."""

    def __init__(self, rarity: "Rarity") -> None:
        self._rarity = rarity
        # value (string-value) -> shape state -> (sure, check) nodes
        self._base: dict[str, dict["State", tuple[dict, dict]]] = {}
        self._selves: dict[str, dict["State", tuple[dict, dict]]] = {}
        self._always: dict = {}  # nodes that need no value
        self._filed: dict = {}  # node -> where it is filed
        self._shapes: dict["State", int] = {}  # shape state -> its nodes here
        self._rekey_at = 64

    def __len__(self) -> int:
        return len(self._filed)

    def has(self, shape: "State") -> bool:
        """Does a node here sit on shape state ``shape``?"""
        return shape in self._shapes

    def add(self, node: "CheckNode") -> None:
        if node in self._filed:
            return
        self._file(node)
        self._shapes[node.shape] = self._shapes.get(node.shape, 0) + 1
        if len(self._filed) >= self._rekey_at:
            self._rekey_at = 2 * len(self._filed)
            for n in list(self._filed):
                self._unfile(n)
                self._file(n)

    def discard(self, node: "CheckNode") -> None:
        if node not in self._filed:
            return
        self._unfile(node)
        k = self._shapes[node.shape] - 1
        if k:
            self._shapes[node.shape] = k
        else:
            del self._shapes[node.shape]

    def _file(self, node: "CheckNode") -> None:
        need = node.need
        table, key = choose_key(need.base, need.selves, self._rarity)
        if table is None:
            self._always[node] = None
            self._filed[node] = None
            return
        groups = self._base if table == "base" else self._selves
        by_shape = groups.get(key)
        if by_shape is None:
            by_shape = groups[key] = {}
        g = by_shape.get(node.shape)
        if g is None:
            g = by_shape[node.shape] = ({}, {}, {}, {})
        # Sure: nothing else it needs is rare (element names are in most messages,
        # and the check that follows tests them anyway).
        rarity = self._rarity
        sure = not any(v != key and rarity.of(v) for v in need.base) and \
            not any(v != key for v in need.selves)
        g[(0 if sure else 1) + (2 if rooted(node) else 0)][node] = None
        self._filed[node] = (groups, key)

    def _unfile(self, node: "CheckNode") -> None:
        where = self._filed.pop(node)
        if where is None:
            del self._always[node]
            return
        groups, key = where
        by_shape = groups[key]
        g = by_shape[node.shape]
        for part in g:
            part.pop(node, None)
        if not any(g):
            del by_shape[node.shape]
            if not by_shape:
                del groups[key]

    def select(self, values, shapes: set["State"]) -> tuple[dict, list]:
        """The nodes on ``shapes`` whose key the :class:`~yfilter.document.Contents`
        hold, and the rest of their need if it is rare: by shape state, and apart,
        the :func:`rooted` ones."""
        out: dict = {}
        roots: list = []
        for c in self._always:
            if c.shape in shapes:
                if rooted(c):
                    roots.append(c)
                else:
                    out.setdefault(c.shape, []).append(c)
        for groups, present in ((self._base, values.base),
                                (self._selves, values.selves() if self._selves else ())):
            if not groups:
                continue
            for k in (groups.keys() & present):
                by_shape = groups[k]
                for s in (by_shape.keys() & shapes):
                    sure, check, rsure, rcheck = by_shape[s]
                    if sure or check:
                        lst = out.get(s)
                        if lst is None:
                            lst = out[s] = []
                        lst.extend(sure)
                        for c in check:
                            if c.need.met(values):
                                lst.append(c)
                    roots.extend(rsure)
                    for c in rcheck:
                        if c.need.met(values):
                            roots.append(c)
        return out, roots


def rooted(node: "CheckNode") -> bool:
    """Is the node decided at the root element? It has no guard of its own and its
    prior binds the root (``/a[...]`` then unguarded steps), so it holds at every
    element its shape reaches exactly when the prior's guard holds at the root."""
    return node.guard is None and node.prior is not None and node.prior.depth == 1
