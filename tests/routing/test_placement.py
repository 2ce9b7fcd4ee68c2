"""The one registry of placement strategies: names, requests and errors shared by the
registration service and the routing simulator; each strategy's host choice and state."""

import subprocess
import sys
from collections import Counter

import pytest

from broker import cli
from routing.overlay import Overlay, builtin
from routing.placement import STRATEGIES, PlacementError, PlacementOptions, PlacementRequest, make_strategy
from routing.simulate import Config, Simulation, SimulationError

AREAS = ["SF", "NY", "LA", "Paris", "Oslo", "Lima"]


def _area(pid: str, area: str) -> PlacementRequest:
    return PlacementRequest(pid, f"/nitf[head/pubdata/@edition.area = '{area}']")


def test_one_name_table_for_the_service_and_the_simulator():
    assert set(STRATEGIES) == {"nearest", "round-robin", "random", "pep"}
    for name in STRATEGIES:
        for command in (["serve", "--bootstrap-servers", "k:9092"], ["up"]):
            assert cli.build_parser().parse_args([*command, "--placement", name]).placement == name
        report = Simulation(Config(brokers=4, profiles=20, messages=2, sources=1, placement=name)).run()
        assert report["config"]["placement"] == name and report["false_negatives"] == 0
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["up", "--placement", "nope"])
    with pytest.raises(SimulationError, match="unknown --placement"):
        Config(brokers=4, placement="nope").check()


def test_unknown_strategy_is_a_placement_error():
    with pytest.raises(PlacementError, match="unknown placement strategy 'nope'"):
        make_strategy("nope", builtin())
    assert issubclass(PlacementError, ValueError)


def test_the_registry_lives_below_broker():
    code = "import sys, routing.placement; print(sorted(m for m in sys.modules if m.split('.')[0] == 'broker'))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


def test_round_robin_follows_the_callers_counts_else_its_own_tally():
    overlay = builtin()
    rr = make_strategy("round-robin", overlay)
    assert rr.choose(PlacementRequest("x", "/nitf", counts={b: 5 for b in overlay.brokers} | {"b4": 1})) == "b4"
    rr = make_strategy("round-robin", overlay)
    assert [rr.choose(PlacementRequest(f"p{i}", "/nitf")) for i in range(8)] == overlay.brokers + ["b1", "b2"]
    rr.forget("p3")  # b4 lost its profile: it is the lightest now
    assert rr.choose(PlacementRequest("q", "/nitf")) == "b4"
    rr = make_strategy("round-robin", overlay)
    rr.restore([("a", "/nitf", "b1"), ("b", "/nitf", "b2"), ("c", "/nitf", "b2")])
    assert [rr.choose(PlacementRequest(f"p{i}", "/nitf")) for i in range(4)] == ["b3", "b4", "b5", "b6"]


def test_nearest_takes_the_named_broker_else_the_nearest_location_else_round_robin():
    overlay = Overlay.from_dict({"brokers": [{"id": "a", "location": [0, 0]}, {"id": "b", "location": [10, 0]},
                                             "c"], "links": [["a", "b"], ["b", "c"]]})
    near = make_strategy("nearest", overlay)
    assert near.choose(PlacementRequest("p1", "/m", near="c")) == "c"
    assert near.choose(PlacementRequest("p2", "/m", location=(7.0, 1.0))) == "b"
    assert near.choose(PlacementRequest("p3", "/m", counts={"a": 1, "b": 1})) == "c"
    assert near.choose(PlacementRequest("p4", "/m")) == "a"  # own tally: c, b and a hosted one each
    with pytest.raises(PlacementError, match="unknown broker 'zz'"):
        near.choose(PlacementRequest("p5", "/m", near="zz"))


def test_random_is_seeded():
    overlay = builtin()

    def draw(seed):
        rnd = make_strategy("random", overlay, PlacementOptions(seed=seed))
        return [rnd.choose(PlacementRequest(f"p{i}", "/nitf")) for i in range(30)]

    assert draw(1) == draw(1) != draw(2)
    assert set(draw(1)) == set(overlay.brokers)


def test_pep_keeps_equal_values_together_and_takes_its_tuning_from_the_caller():
    overlay = builtin()
    pep = make_strategy("pep", overlay, PlacementOptions(partitions_per_broker=3, tolerance=0.5))
    assert pep.hosts.partitioner.k == 3 * len(overlay.brokers) and pep.hosts.tolerance == 0.5
    hosts = {}
    for n in range(4):
        for area in AREAS:
            hosts.setdefault(area, []).append(pep.choose(_area(f"{area}{n}", area)))
    assert all(len(set(h[1:])) == 1 for h in hosts.values()), hosts
    assert len({h[-1] for h in hosts.values()}) >= 3


def test_pep_restores_forgets_and_rebalances():
    overlay = builtin()
    first = make_strategy("pep", overlay)
    placed = [(f"{a}{n}", _area("", a).text, first.choose(_area(f"{a}{n}", a))) for n in range(3) for a in AREAS]
    again = make_strategy("pep", overlay)
    again.restore(placed)
    last = {a: host for a, (_, _, host) in zip(AREAS, placed[-len(AREAS):])}
    assert {a: again.choose(_area(f"{a}-new", a)) for a in AREAS} == last  # each area joins its profiles
    again.forget("SF0")
    assert "SF0" not in again.hosts.hosts
    moved = dict(again.hosts.hosts)
    for pid, old, new in again.rebalance():
        assert moved[pid] == old
        moved[pid] = new
    assert moved == again.hosts.hosts
    assert make_strategy("nearest", overlay).rebalance() == []


def test_the_simulator_routes_exactly_under_pep_and_round_robin():
    for name in ("pep", "round-robin"):
        sim = Simulation(Config(brokers=8, profiles=300, messages=30, placement=name, overlay="tree", sources=2))
        report = sim.run()
        assert report["false_negatives"] == 0 and report["delivery_mismatches"] == 0
        assert report["table_mismatches"] == 0 and report["config"]["placement"] == name
        load = Counter(p.host for p in sim.profiles.values())
        assert len(load) == 8
        if name == "round-robin":
            assert max(load.values()) - min(load.values()) <= 1
