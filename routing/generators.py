"""Overlay generators for simulations and deployments larger than a hand-written config.

Every generator is deterministic for a given ``seed``, names brokers ``b1 ... bN``,
weights links by distance (or a fixed cost) and declares ``sources`` data sources
rooted at brokers spread over the overlay.

>>> ov = ring(5, sources=1)
>>> ov.brokers, ov.links[0], ov.sources
(['b1', 'b2', 'b3', 'b4', 'b5'], ('b1', 'b2', 1.0), {'s1': 'b1'})
"""

from __future__ import annotations

import math
import random

import networkx as nx

from routing.overlay import Overlay, OverlayError


def _name(i: int) -> str:
    return f"b{i + 1}"


def _finish(graph: nx.Graph, sources: int, name: str, rng: random.Random) -> Overlay:
    brokers = sorted(graph.nodes, key=lambda b: int(b[1:]))
    if sources > len(brokers):
        raise OverlayError(f"{sources} sources need at least as many brokers, not {len(brokers)}")
    step = len(brokers) / max(sources, 1)
    roots = {f"s{i + 1}": brokers[int(i * step)] for i in range(sources)}
    return Overlay(graph, roots, name)


def ring(n: int, sources: int = 1, seed: int = 0) -> Overlay:
    """``n`` brokers in a cycle, unit weights."""
    if n < 1:
        raise OverlayError("a ring needs at least one broker")
    g = nx.Graph()
    g.add_nodes_from(_name(i) for i in range(n))
    for i in range(n if n > 2 else n - 1):
        g.add_edge(_name(i), _name((i + 1) % n), weight=1.0)
    return _finish(g, sources, f"ring-{n}", random.Random(seed))


def tree(n: int, branching: int = 3, sources: int = 1, seed: int = 0) -> Overlay:
    """A complete ``branching``-ary tree of ``n`` brokers, unit weights."""
    if n < 1 or branching < 1:
        raise OverlayError("a tree needs at least one broker and a branching factor of at least 1")
    g = nx.Graph()
    g.add_node(_name(0))
    for i in range(1, n):
        g.add_edge(_name((i - 1) // branching), _name(i), weight=1.0)
    return _finish(g, sources, f"tree-{n}", random.Random(seed))


def random_geometric(n: int, radius: float | None = None, sources: int = 1, seed: int = 0) -> Overlay:
    """Brokers at random points of the unit square, linked when closer than ``radius``
    (default: just above the connectivity threshold), weights = distances. Brokers keep
    their ``location`` so interests can be made geographically skewed."""
    if n < 1:
        raise OverlayError("an overlay needs at least one broker")
    rng = random.Random(seed)
    radius = radius or min(1.5, 1.2 * math.sqrt(math.log(max(n, 2)) / (math.pi * n)))
    pos = {_name(i): (rng.random(), rng.random()) for i in range(n)}
    g = nx.random_geometric_graph(n, radius, pos={i: pos[_name(i)] for i in range(n)}, seed=seed)
    g = nx.relabel_nodes(g, {i: _name(i) for i in range(n)})
    for b, xy in pos.items():
        g.nodes[b].clear()
        g.nodes[b]["location"] = [round(xy[0], 4), round(xy[1], 4)]
    for a, b in g.edges:
        g.edges[a, b]["weight"] = round(max(math.dist(pos[a], pos[b]), 1e-4), 4)
    # Join stray components to their nearest neighbour so every broker is reachable.
    parts = sorted(nx.connected_components(g), key=lambda c: min(int(b[1:]) for b in c))
    for part in parts[1:]:
        main = nx.node_connected_component(g, _name(0))
        a, b = min(((x, y) for x in part for y in main), key=lambda e: math.dist(pos[e[0]], pos[e[1]]))
        g.add_edge(a, b, weight=round(max(math.dist(pos[a], pos[b]), 1e-4), 4))
    return _finish(g, sources, f"geometric-{n}", rng)


def transit_stub(transits: int = 4, stubs_per_transit: int = 3, stub_size: int = 4,
                 sources: int = 1, seed: int = 0) -> Overlay:
    """GT-ITM-like two-level topology: a ring-plus-chords core of transit brokers
    (cost 5 per link) and stub domains hanging off them (cost 1 inside a stub, 2 to
    the transit)."""
    if transits < 1 or stubs_per_transit < 0 or stub_size < 1:
        raise OverlayError("transit_stub needs transits >= 1, stubs_per_transit >= 0, stub_size >= 1")
    rng = random.Random(seed)
    g = nx.Graph()
    count = 0

    def new() -> str:
        nonlocal count
        count += 1
        g.add_node(f"b{count}")
        return f"b{count}"

    core = [new() for _ in range(transits)]
    for i in range(transits - 1):
        g.add_edge(core[i], core[i + 1], weight=5.0)
    if transits > 2:
        g.add_edge(core[-1], core[0], weight=5.0)
        for _ in range(transits // 2):
            a, b = rng.sample(core, 2)
            g.add_edge(a, b, weight=5.0)
    for t in core:
        for _ in range(stubs_per_transit):
            stub = [new() for _ in range(stub_size)]
            g.add_edge(t, stub[0], weight=2.0)
            for i in range(1, stub_size):
                g.add_edge(stub[i], stub[rng.randrange(i)], weight=1.0)
    return _finish(g, sources, f"transit-stub-{count}", rng)
