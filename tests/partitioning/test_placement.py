"""Partitions on brokers (capacity, distance), hosts, moves; PEP as a host chooser
(the placement strategies that use it: tests/routing/test_placement.py)."""

from collections import Counter

import pytest

from partitioning import BrokerSite, PartitioningError, PepHosts, PepPartitioner, place_partitions
from partitioning.placement import assign_hosts, moves
from partitioning.predicates import equalities
from routing.overlay import builtin


def test_capacity_sets_each_brokers_share():
    sites = [BrokerSite("big", capacity=3.0), BrokerSite("small")]
    owner = place_partitions([10] * 40, sites)
    assert Counter(owner) == {"big": 30, "small": 10}


def test_distance_breaks_ties_towards_brokers_near_the_sources():
    sites = [BrokerSite("far", cost=9.0), BrokerSite("near", cost=1.0)]
    assert place_partitions([5], sites) == ["near"]
    assert Counter(place_partitions([5] * 10, sites)) == {"far": 5, "near": 5}  # capacity still rules


def test_current_hosts_keep_partitions_in_place_when_there_is_room():
    sites = [BrokerSite("a"), BrokerSite("b")]
    current = [{"b": 9}, {"a": 9}, {}, {}]
    assert place_partitions([10, 10, 10, 10], sites, current=current)[:2] == ["b", "a"]


def test_bad_brokers_are_refused():
    with pytest.raises(PartitioningError, match="no brokers"):
        place_partitions([1], [])
    with pytest.raises(PartitioningError, match="capacit"):
        place_partitions([1], [BrokerSite("a", capacity=0)])


def test_hosts_follow_partitions_and_dont_care_spreads_by_load():
    pop = {f"p{i}": equalities(f"/m[a/@v = {i % 10}]") for i in range(100)}
    pop.update({f"d{i}": equalities("/m/b") for i in range(30)})
    part = PepPartitioner.fit(pop, 4).partitioning()
    sites = [BrokerSite("b1"), BrokerSite("b2"), BrokerSite("b3", capacity=2.0)]
    owner = place_partitions(part.loads, sites)
    hosts = assign_hosts(part, owner, sites)
    assert all(hosts[pid] == owner[part.assignment[pid]] for pid in pop if pid.startswith("p"))
    load = Counter(hosts.values())
    assert sum(load.values()) == 130
    assert load["b3"] / 2 - 26 <= min(load["b1"], load["b2"])  # don't care filled the light brokers first


def test_moves_list_only_profiles_that_change_host():
    assert moves({"a": "b1", "b": "b2", "gone": "b1"}, {"a": "b1", "b": "b3", "new": "b2"}) == [("b", "b2", "b3")]


def test_pep_hosts_incremental_then_rebalance_applies_moves_as_deltas():
    hosts = PepHosts.from_graph(builtin().graph, builtin().sources.values(), partitions_per_broker=2, growth=10.0,
                                 tolerance=1.0)  # room enough that nobody spills
    texts = {f"p{i}": f"/nitf[head/docdata/doc-id/@id-string = 'AP.{i % 40}'][@version = 'v{i % 3}']"
             for i in range(400)}
    for pid, text in texts.items():
        assert hosts.place(pid, text) in builtin().brokers
    assert sum(hosts.counts.values()) == 400
    before = dict(hosts.hosts)
    deltas = hosts.rebalance()
    applied = dict(before)
    for pid, old, new in deltas:
        assert applied[pid] == old
        applied[pid] = new
    assert applied == hosts.hosts and deltas
    assert hosts.rebalance() == []
    hosts.remove("p0")
    assert "p0" not in hosts.hosts and sum(hosts.counts.values()) == 399
    # Same values, same broker: a new profile joins the profiles it cannot be told apart from.
    same = {hosts.place(f"n{i}", "/nitf[head/docdata/doc-id/@id-string = 'AP.7']") for i in range(3)}
    assert len(same) == 1
