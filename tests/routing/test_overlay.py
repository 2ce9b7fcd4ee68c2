"""Overlay configs, generators and broadcast trees."""

import doctest
import json

import networkx as nx
import pytest

import routing.generators
import routing.overlay
import routing.trees
from routing.generators import random_geometric, ring, transit_stub, tree
from routing.overlay import Overlay, OverlayError, builtin
from routing.trees import minimum_spanning_tree


@pytest.mark.parametrize("module", [routing.overlay, routing.trees, routing.generators])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def test_figure4_tree_summarises_b5_and_b6_at_b4_then_b2_then_b1():
    ov = builtin("figure4")
    t = ov.tree(ov.root_of("news"))
    assert t.root == "b1"
    assert t.children == {"b1": ["b2", "b3"], "b2": ["b4"], "b3": [], "b4": ["b5", "b6"], "b5": [], "b6": []}
    assert t.path_to_root("b5") == ["b5", "b4", "b2", "b1"]
    assert t.downstream()[("b2", "b4")] == {"b4", "b5", "b6"}


@pytest.mark.parametrize("make", [
    lambda: random_geometric(120, seed=3),
    lambda: transit_stub(seed=4),
    lambda: tree(40, branching=3),
    lambda: ring(9),
])
def test_generated_overlays_are_connected_and_every_tree_spans_them(make):
    ov = make()
    assert nx.is_connected(ov.graph)
    for root in ov.brokers[:5]:
        t = ov.tree(root)
        assert set(t.parent) == set(ov.brokers)
        assert len(t.links()) == len(ov.brokers) - 1
        assert all(ov.graph.has_edge(p, c) for p, c in t.links())


def test_shortest_path_tree_gives_shortest_distances():
    ov = random_geometric(60, seed=9)
    t = ov.tree("b1")
    lengths = nx.single_source_dijkstra_path_length(ov.graph, "b1", weight="weight")
    for b in ov.brokers:
        path = t.path_to_root(b)
        cost = sum(ov.graph.edges[path[i], path[i + 1]]["weight"] for i in range(len(path) - 1))
        assert cost == pytest.approx(lengths[b])


def test_generators_are_deterministic():
    assert random_geometric(50, seed=5).to_dict() == random_geometric(50, seed=5).to_dict()
    assert random_geometric(50, seed=5).to_dict() != random_geometric(50, seed=6).to_dict()


def test_pluggable_tree_builder():
    ov = Overlay.from_dict(builtin().to_dict(), tree_builder=minimum_spanning_tree)
    assert len(ov.tree("b1").links()) == 5


def test_config_round_trips_through_yaml_and_json(tmp_path):
    ov = random_geometric(15, seed=2, sources=2)
    for name in ("o.yaml", "o.json"):
        ov.dump(tmp_path / name)
        again = Overlay.load(tmp_path / name)
        assert again.to_dict() == ov.to_dict()
    assert json.loads((tmp_path / "o.json").read_text())["sources"][1]["id"] == "s2"


@pytest.mark.parametrize("config, message", [
    ({"brokers": ["a", "b"], "links": [["a", "c"]]}, "unknown broker 'c'"),
    ({"brokers": ["a", "b", "c"], "links": [["a", "b"]]}, "not connected"),
    ({"brokers": ["a", "a"], "links": []}, "listed twice"),
    ({"brokers": ["a b"], "links": []}, "broker id 'a b' is not valid"),
    ({"brokers": ["a", "b"], "links": [["a", "b", -1]]}, "weights must be positive"),
    ({"brokers": ["a"], "links": [], "sources": [{"id": "s", "root": "z"}]}, "root broker 'z'"),
    ({"brokers": ["a"], "links": [], "extra": 1}, "unknown overlay config keys"),
    ({"brokers": [], "links": []}, "at least one broker"),
])
def test_bad_configs_are_rejected_with_the_reason(config, message):
    with pytest.raises(OverlayError, match=message):
        Overlay.from_dict(config)


def test_bad_yaml_names_the_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("brokers: [a, b\nlinks: []\n")
    with pytest.raises(OverlayError, match=r"invalid YAML at line \d+, column \d+"):
        Overlay.load(path)


def test_adding_a_broker_rebuilds_only_the_entries_on_its_path():
    ov = builtin()
    change = ov.add_broker("b7", [("b6", 1.0)])
    assert change.rebuild["b1"] == {("b1", "b2"), ("b2", "b4"), ("b4", "b6"), ("b6", "b7")}
    assert change.removed["b1"] == set()
    assert ov.tree("b1").parent["b7"] == "b6"


def test_removing_a_leaf_broker_drops_its_link_and_nothing_else():
    ov = builtin()
    change = ov.remove_broker("b3")
    assert change.removed["b1"] == {("b1", "b3")}
    assert change.rebuild["b1"] == set()


def test_removing_a_broker_that_would_split_the_overlay_is_refused_and_changes_nothing():
    ov = builtin()
    before = ov.to_dict()
    with pytest.raises(OverlayError, match="not connected"):
        ov.remove_broker("b4")
    assert ov.to_dict() == before


def test_removing_a_root_is_refused():
    with pytest.raises(OverlayError, match="root of sources"):
        builtin().remove_broker("b1")
