"""yfilter.cheaper: the choice between two ways of doing the same work."""

import doctest

import pytest

from yfilter import cheaper
from yfilter.cheaper import Cheaper


def test_module_example():
    assert doctest.testmod(cheaper).failed == 0


def _warmed(cost0: float, cost1: float, **kw) -> Cheaper:
    pick = Cheaper(**kw)
    while min(pick.samples) < pick.warm:
        way = pick.choose()
        pick.record(way, cost0 if way == 0 else cost1, units=1)
    return pick


def test_warm_up_alternates_until_each_way_has_its_samples():
    pick = Cheaper(warm=3)
    ways = []
    for _ in range(6):
        ways.append(pick.choose())
        pick.record(ways[-1], 1.0, units=1)
    assert sorted(ways) == [0, 0, 0, 1, 1, 1]


def test_takes_the_cheaper_way_and_probes_the_other_once_patience_is_spent():
    pick = _warmed(5.0, 1.0, patience=10)  # way 1 costs 1 s a time, way 0 5 s
    ways = []
    for _ in range(120):
        ways.append(pick.choose())
        pick.record(ways[-1], 5.0 if ways[-1] == 0 else 1.0, units=1)
    probes = [k for k, way in enumerate(ways) if way == 0]
    # 50 s on way 1 (10 x way 0's last 5 s) between probes: 50 calls, then a probe.
    assert [b - a for a, b in zip(probes, probes[1:])] == [51] * (len(probes) - 1)
    assert len(probes) == 2


def test_cost_is_per_unit_of_work():
    pick = Cheaper(warm=1)
    pick.record(0, 10.0, units=100)   # 0.1 per unit
    pick.record(1, 1.0, units=2)      # 0.5 per unit
    assert pick.choose() == 0


def test_follows_a_change_in_the_workload():
    pick = _warmed(1.0, 2.0, patience=4)
    assert pick.choose() == 0
    for _ in range(40):  # way 0 gets dearer: its own samples say so
        way = pick.choose()
        pick.record(way, 10.0 if way == 0 else 2.0, units=1)
    assert pick.cost[1] < pick.cost[0] and pick.choose() == 1


@pytest.mark.parametrize("kw", [{"warm": 0}, {"patience": 0}, {"weight": 0.0}, {"weight": 1.5}])
def test_rejects_settings_that_cannot_work(kw):
    with pytest.raises(ValueError, match="need warm"):
        Cheaper(**kw)
