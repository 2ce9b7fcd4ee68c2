"""Broadcast trees over the overlay: one per root broker.

Messages flow down a tree from its root; profiles and routing-table updates flow up
it along the reverse path (child to parent). A tree builder is any function
``(graph, root) -> BroadcastTree``; :func:`shortest_path_tree` (Dijkstra on link
weights) is the default and :func:`minimum_spanning_tree` an alternative.

>>> import networkx as nx
>>> g = nx.Graph([("a", "b", {"weight": 1}), ("b", "c", {"weight": 1}), ("a", "c", {"weight": 5})])
>>> t = shortest_path_tree(g, "a")
>>> t.parent["c"], t.path_to_root("c"), t.links_up("c")
('b', ['c', 'b', 'a'], [('b', 'c'), ('a', 'b')])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import networkx as nx


@dataclass(frozen=True)
class BroadcastTree:
    """A rooted spanning tree: ``parent[b]`` (``None`` for the root) and ``children[b]``."""

    root: str
    parent: dict[str, str | None]
    children: dict[str, list[str]]

    @classmethod
    def from_parents(cls, root: str, parent: dict[str, str | None]) -> "BroadcastTree":
        children: dict[str, list[str]] = {b: [] for b in parent}
        for b, p in parent.items():
            if p is not None:
                children[p].append(b)
        return cls(root, parent, {b: sorted(c) for b, c in children.items()})

    def links(self) -> list[tuple[str, str]]:
        """Every ``(parent, child)`` output link of the tree, top-down."""
        return [(p, c) for p in self.topdown() for c in self.children[p]]

    def topdown(self) -> list[str]:
        """Brokers in breadth-first order from the root."""
        order, frontier = [], [self.root]
        while frontier:
            order.extend(frontier)
            frontier = [c for b in frontier for c in self.children[b]]
        return order

    def path_to_root(self, broker: str) -> list[str]:
        """The reverse path a query takes from its host broker up to the root."""
        path = [broker]
        while self.parent[path[-1]] is not None:
            path.append(self.parent[path[-1]])
        return path

    def links_up(self, broker: str) -> list[tuple[str, str]]:
        """The ``(parent, child)`` links of :meth:`path_to_root`, from ``broker`` up:
        every link whose routing entry a profile hosted at ``broker`` is part of."""
        path = self.path_to_root(broker)
        return list(zip(path[1:], path))

    def subtree(self, broker: str) -> frozenset[str]:
        """``broker`` and every broker below it."""
        out, frontier = [], [broker]
        while frontier:
            out.extend(frontier)
            frontier = [c for b in frontier for c in self.children[b]]
        return frozenset(out)

    def downstream(self) -> dict[tuple[str, str], frozenset[str]]:
        """For each output link, the brokers a message sent down it can reach."""
        return {(p, c): self.subtree(c) for p, c in self.links()}

    def depth(self) -> int:
        return max(len(self.path_to_root(b)) for b in self.parent) - 1


TreeBuilder = Callable[[nx.Graph, str], BroadcastTree]


def shortest_path_tree(graph: nx.Graph, root: str) -> BroadcastTree:
    """Dijkstra shortest-path tree on link weights; ties broken by broker id so the
    tree does not depend on the order links were added."""
    dist = {root: 0.0}
    parent: dict[str, str | None] = {root: None}
    done: set[str] = set()
    import heapq

    heap = [(0.0, root)]
    while heap:
        d, b = heapq.heappop(heap)
        if b in done:
            continue
        done.add(b)
        for n in sorted(graph.neighbors(b)):
            nd = d + float(graph.edges[b, n].get("weight", 1.0))
            if n not in dist or nd < dist[n] or (nd == dist[n] and n not in done and b < parent[n]):
                dist[n], parent[n] = nd, b
                heapq.heappush(heap, (nd, n))
    return BroadcastTree.from_parents(root, parent)


def minimum_spanning_tree(graph: nx.Graph, root: str) -> BroadcastTree:
    """The minimum spanning tree of the overlay, rooted at ``root`` (one tree shared
    by all roots: fewer distinct links, longer paths)."""
    mst = nx.minimum_spanning_tree(graph, weight="weight")
    parent: dict[str, str | None] = {root: None}
    for a, b in nx.bfs_edges(mst, root, sort_neighbors=sorted):
        parent[b] = a
    return BroadcastTree.from_parents(root, parent)
