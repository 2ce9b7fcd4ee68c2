"""Garbage collection at a local repository (paper section 2.4): a resource shipped along by a
strong reference stays while something holds it. A resource is kept if a subscription's end rule
matches it (a root) or a held resource strongly references it; its reference count is the number
of such references. When a resource loses a match or a reference and its count is zero, it goes,
and what it referenced is checked in turn.

Pure reference counting never frees a cycle of strong references (``a -> b -> a``) once nothing
else holds it (an open point of the paper). So a resource that lost its last match or a
reference but still has a positive count is a suspect: a search backwards along strong
references from it either meets a root (it stays) or does not, and then everything the search
found is unreachable from any root and goes with it.

>>> edges = {"h": {"i"}, "i": {"j"}, "j": {"i"}}     # h -> i, and a cycle i <-> j
>>> g = MemoryGraph(edges, roots={"h"})
>>> collect(g, {"i"}), sorted(g.edges)
(set(), ['h', 'i', 'j'])
>>> g.roots.clear(); sorted(collect(g, {"h"})), sorted(g.edges)
(['h', 'i', 'j'], [])
"""

from __future__ import annotations

from typing import Protocol


class Graph(Protocol):
    """What the collector needs of a repository."""

    def held(self, uri: str) -> bool: ...
    def rooted(self, uri: str) -> bool: ...
    def referrers(self, uri: str) -> set[str]: ...    # held resources strongly referencing uri
    def referenced(self, uri: str) -> set[str]: ...   # what uri strongly references
    def remove(self, uri: str) -> None: ...


def collect(graph: Graph, suspects: set[str]) -> set[str]:
    """Remove every resource of ``suspects`` (and what they lead to) that nothing holds;
    returns the removed URIs."""
    removed: set[str] = set()
    work = sorted(suspects)
    while work:
        uri = work.pop()
        if uri in removed or not graph.held(uri) or graph.rooted(uri):
            continue
        if graph.referrers(uri):
            found, stack, rooted = {uri}, [uri], False
            while stack and not rooted:
                for ref in graph.referrers(stack.pop()):
                    if graph.rooted(ref):
                        rooted = True
                        break
                    if ref not in found:
                        found.add(ref)
                        stack.append(ref)
            if rooted:
                continue
        else:
            found = {uri}
        nexts = set()
        for dead in found:
            nexts |= graph.referenced(dead)
        for dead in found:
            graph.remove(dead)
        removed |= found
        work.extend(sorted(nexts - removed))
    return removed


class MemoryGraph:
    """A graph in dicts (``edges``: uri -> strongly referenced uris), for examples and tests."""

    def __init__(self, edges: dict[str, set[str]], roots: set[str]) -> None:
        self.edges = {k: set(v) for k, v in edges.items()}
        self.roots = set(roots)

    def held(self, uri: str) -> bool:
        return uri in self.edges

    def rooted(self, uri: str) -> bool:
        return uri in self.roots

    def referrers(self, uri: str) -> set[str]:
        return {src for src, dsts in self.edges.items() if uri in dsts}

    def referenced(self, uri: str) -> set[str]:
        return set(self.edges.get(uri, ()))

    def remove(self, uri: str) -> None:
        del self.edges[uri]
