"""broker.deploy.topology: every topic a broker touches, from the overlay and broker.topics."""

from __future__ import annotations

import doctest

import pytest

from broker import topics
from broker.deploy import acls
from broker.deploy import render as deploy_render
from broker.deploy import topology as deploy_topology
from broker.deploy.topology import k8s_key, topology
from routing.overlay import Overlay


@pytest.mark.parametrize("module", [deploy_topology, deploy_render, acls])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def expected_reads_writes(overlay: Overlay, broker: str) -> tuple[set[str], set[str]]:
    """The oracle, straight from the design: inbound + rooted sources + catalog/profiles in;
    children and parents in every broadcast tree, own delivery topic and dead letter out;
    its own state log both ways."""
    reads = {topics.broker_topic(broker), topics.state_topic(broker), topics.CATALOG, topics.PROFILES}
    reads |= {topics.source_topic(s) for s, root in overlay.sources.items() if root == broker}
    writes = {topics.delivery_topic(broker), topics.DEAD_LETTER, topics.state_topic(broker)}
    for root in overlay.roots:
        tree = overlay.tree(root)
        writes |= {topics.broker_topic(c) for c in tree.children[broker]}
        if tree.parent[broker] is not None:
            writes.add(topics.broker_topic(tree.parent[broker]))
    return reads, writes


def test_each_broker_reads_and_writes_what_the_overlay_says(overlay):
    plan = topology(overlay)
    assert [b.id for b in plan.brokers] == overlay.brokers
    for b in plan.brokers:
        assert (set(b.reads), set(b.writes)) == expected_reads_writes(overlay, b.id)


def test_every_topic_read_or_written_is_declared_once(overlay):
    plan = topology(overlay)
    names = [t.name for t in plan.topics]
    assert len(names) == len(set(names))
    touched = {t for b in plan.brokers for t in (*b.reads, *b.writes)}
    assert touched <= set(names)
    assert {topics.source_topic(s) for s in overlay.sources} <= set(names)
    assert {t.kind for t in plan.topics} == set(deploy_topology.TOPIC_KINDS)


def test_kubernetes_keys_are_dns_labels_and_never_collide():
    ids = ["b1", "B1", "a_b", "a-b", "x-", "Z", "0"]
    keys = [k8s_key(i) for i in ids]
    assert len(set(keys)) == len(ids)
    assert k8s_key("b1") == "b1" and k8s_key("a-b") == "a-b"
    for key in keys:
        assert deploy_topology._DNS_LABEL.match(key), key


def test_keys_of_awkward_ids_reach_the_topic_names_unchanged():
    ov = Overlay.from_dict({"brokers": ["Edge_1", "core"], "links": [["Edge_1", "core"]],
                            "sources": [{"id": "News_EU", "root": "Edge_1"}]})
    plan = topology(ov)
    assert plan.broker("Edge_1").reads[:2] == ("onyx.broker.Edge_1", "onyx.src.News_EU")
    assert {t.key for t in plan.topics} >= {f"broker-{k8s_key('Edge_1')}", f"src-{k8s_key('News_EU')}"}


def test_what_brokers_never_write_comes_from_the_one_list_of_internal_topics(overlay):
    """What brokers are denied writing is every internal topic family (broker.topics.INTERNAL)
    none of whose topics a broker writes: the sources and the compacted state they rebuild from."""
    never = acls.brokers_never_write(overlay)
    assert never == [topics.SOURCE_PREFIX, topics.CATALOG, topics.METADATA, topics.PROFILES]
    written = {t for b in topology(overlay).brokers for t in b.writes}
    for entry in topics.INTERNAL:
        assert (entry.prefix in never) != any(t.startswith(entry.prefix) for t in written), entry
    assert not any(topics.internal_reason(t) for t in written if t.startswith(topics.DELIVER_PREFIX))
    for b in overlay.brokers:
        denied = [r for r in acls.broker_rules(overlay, b) if r.effect == "deny"]
        assert [(r.name, r.pattern, r.operations) for r in denied] == [(p, "prefix", ("Write",)) for p in never]


def test_every_broker_may_do_what_its_topology_says_and_no_more_on_the_overlays_own_topics(overlay):
    for plan in topology(overlay).brokers:
        rules = acls.broker_rules(overlay, plan.id)
        assert all(acls.allowed(rules, "topic", t, "Read") for t in plan.reads)
        assert all(acls.allowed(rules, "topic", t, "Write") for t in plan.writes)
        assert not any(acls.allowed(rules, "topic", t, "Write") for t in
                       (topics.source_topic("x"), topics.CATALOG, topics.PROFILES, topics.METADATA))
        assert not acls.allowed(rules, "topic", "onyx.deliver.s1", "Read")
