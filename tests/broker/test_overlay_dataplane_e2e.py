"""The overlay's data plane for real (ONYX 4.2-4.3): links carry projections when every
profile below reads only parts of a message, a budgeted routing table generalizes
without losing a delivery, and a broker writes a message's link rows before its own
deliveries of it. Six Spark streaming brokers on a Kafka of their own (the overlay's
topic names are fixed, so it cannot share the session's Kafka with another overlay).

Filters (which deliver the whole message) are hosted on b3 only; transformation
profiles on b2, b4, b5 and b6: in b1's tree (b1 -> b2 -> b4 -> b5, b6) every link but
b1 -> b3 may carry a projection. Generated transformation profiles (which often copy whole
subtrees) are on b5; b2, b4 and b6 host small ones, so the link to b6 carries a
fraction of each message. b2 routes within a small budget."""

import os
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition

from broker.packets import profile_ids
from broker import topics
from broker.clients import api
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.devcluster import KafkaDevCluster
from routing.budget import Budget
from routing.overlay import Overlay, builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BUDGET = "atoms=6,states=40,predicates=3"


@pytest.fixture(scope="module")
def cluster(spark):
    kafka = KafkaDevCluster(name=f"dataplane-{os.getpid()}")
    kafka.start()
    config = builtin("figure4").to_dict()
    config["brokers"] = [{"id": b, "budget": BUDGET} if b == "b2" else b for b in config["brokers"]]
    c = LocalOverlay(Overlay.from_dict(config),
                     OverlaySettings(name="dataplane", bootstrap_servers=kafka.bootstrap_servers), spark=spark)
    c.start()
    yield c
    c.stop()
    kafka.stop()


@pytest.fixture(scope="module")
def registered(cluster):
    """profile id -> (text, host broker)."""
    schema = Schema.nitf()
    subscriber = api("POST", f"{cluster.api_url}/subscribers")
    flwr = FlwrGenerator(schema, seed=7)
    texts = [(flwr.spec().text(), "b5") for _ in range(8)]
    texts += [("for $h in $msg/nitf/head return <t>{$h/title/text()}</t>", "b6"),
              ("for $d in $msg/nitf/head/docdata where $d/doc-id return <id>{$d/doc-id/@id-string}</id>", "b6"),
              ("for $h in $msg/nitf/head where $h/title return <t>{$h/title/text()}</t>", "b4"),
              ("for $p in $msg/nitf/head/pubdata return <p>{$p/@edition.area}</p>", "b2")]
    texts += [(t, "b3") for t in ProfileGenerator(schema, n_preds=(0, 1), seed=7).batch(20)]
    profiles = {}
    for text, host in texts:
        body = api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": host},
                   subscriber_token=subscriber["token"])
        assert body["host_broker"] == host
        profiles[body["profile_id"]] = (text, host)
    cluster.wait_idle(timeout=300)
    return profiles, subscriber["delivery_topic"]


def _read(bootstrap: str, names: list[str], until: float) -> list:
    """Every record of ``names`` (all partitions, from the start), polled until ``until``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{time.time_ns()}",
                         "enable.auto.commit": False})
    meta = consumer.list_topics(timeout=10)
    consumer.assign([TopicPartition(t, p, 0) for t in names if t in meta.topics
                     for p in meta.topics[t].partitions])
    out = []
    try:
        while time.monotonic() < until:
            out += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    return out


def test_links_carry_projections_and_every_result_is_the_centralized_engines(cluster, registered):
    profiles, delivery_topic = registered
    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=300 + i).generate() for i in range(30)]
    docs.append(b"<nitf><head><title>Tide</title></head><body><p>" + b"long " * 500 + b"</p></body></nitf>")
    engine = Engine()
    for pid, (text, _) in profiles.items():
        engine.add(pid, text)
    expected = {f"dp-{i}": Counter((pid, r) for pid, rs in engine.run(d, xml=d).items() for r in rs)
                for i, d in enumerate(docs)}
    assert sum(len(c) for c in expected.values()) > 30
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i, doc in enumerate(docs):
        producer.produce(topics.source_topic("news"), doc, f"dp{i}".encode(),
                         headers=[("onyx-message-id", f"dp-{i}".encode())])
    assert producer.flush(60) == 0
    cluster.wait_idle(timeout=300)
    got = defaultdict(Counter)
    records = _read(cluster.bootstrap_servers, [delivery_topic, topics.DEAD_LETTER], time.monotonic() + 5)
    assert not [r for r in records if r.topic() == topics.DEAD_LETTER]
    for r in records:
        for pid in profile_ids(r.key(), r.headers()):  # one record for every profile of the topic it matched
            got[dict(r.headers())["onyx-message-id"].decode()][(pid, r.value())] += 1
    assert {m: c for m, c in got.items() if m.startswith("dp-")} == {m: c for m, c in expected.items() if c}

    # The link to b6 carried projections, a fraction of each message (the links above it
    # carry a projection too where that leaves enough out); onyx status counts them.
    size = {f"dp-{i}": len(d) for i, d in enumerate(docs)}
    links = [r for r in _read(cluster.bootstrap_servers, [topics.broker_topic(b) for b in ("b2", "b4", "b5", "b6")],
                              time.monotonic() + 5)
             if dict(r.headers() or ()).get("onyx-message-id", b"").decode() in size]
    # (A message whose projection leaves too little out goes whole, and so do the next
    # ones for a while: routing.node.PROJECT_AT_MOST, RETRY_AFTER.)
    to_b6 = [r for r in links if r.topic() == topics.broker_topic("b6")
             and dict(r.headers()).get("onyx-transform") == b"projected"]
    assert to_b6, "the link to b6 carried no projection"
    assert all(len(r.value()) < size[dict(r.headers())["onyx-message-id"].decode()] / 2 for r in to_b6)
    status = {b["broker"]: b for b in cluster.status()["brokers"]}
    assert status["b4"]["projected"] >= len(to_b6)


def test_a_budgeted_table_stays_within_its_budget_and_misses_nothing(cluster, registered):
    """b2's table holds b4's summary (ONYX 4.2.1 Aggregate(), generalized to b2's
    budget): the deliveries were exact above (0 false negatives), and onyx status
    reports b2's table within the budget, b4's summary smaller than the exact queries
    below it, and the false positives it cost."""
    status = {b["broker"]: b for b in cluster.status()["brokers"]}
    b2 = status["b2"]
    assert b2["budget"] == str(Budget.parse(BUDGET))
    table = b2["routing"]["b1"]
    assert Budget.parse(BUDGET).fits(table), table
    sent = status["b4"]["routing"]["b1"]["summary"]
    assert sent["budget"] == str(Budget.parse(BUDGET)) and sent["plans"] >= 1
    assert sent["exact_atoms"] > sent["atoms"], "b4's summary should not fit the budget exactly"
    assert all(n >= 0 for n in status["b4"]["false_positives"].values())


def test_a_brokers_link_rows_for_a_message_go_out_before_its_deliveries(cluster, registered):
    """b4 forwards to b5 and b6 and hosts profiles itself: per message, the Kafka
    timestamps of b4's link records are not after those of b4's deliveries (ONYX 4.3.1's
    priority: the executor hands a message's link rows to the producer before it matches
    the message locally). The timestamps are the producer's (CreateTime, set when a
    record is handed over), not the log's."""
    profiles, delivery_topic = registered
    at_b4 = {pid for pid, (_, host) in profiles.items() if host == "b4"}
    records = _read(cluster.bootstrap_servers, [delivery_topic, topics.broker_topic("b5"), topics.broker_topic("b6")],
                    time.monotonic() + 5)
    assert {r.timestamp()[0] for r in records} == {TIMESTAMP_CREATE_TIME}
    links, delivered = defaultdict(list), defaultdict(list)
    for r in records:
        mid = dict(r.headers() or ()).get("onyx-message-id", b"").decode()
        if r.topic() == delivery_topic:
            if set(profile_ids(r.key(), r.headers())) & set(at_b4):
                delivered[mid].append(r.timestamp()[1])
        elif dict(r.headers()).get("onyx-flow") == b"xml":
            links[mid].append(r.timestamp()[1])
    both = [m for m in delivered if m in links]
    assert both, "no message was both forwarded and delivered by b4"
    assert all(max(links[m]) <= min(delivered[m]) for m in both), \
        {m: (links[m], delivered[m]) for m in both if max(links[m]) > min(delivered[m])}
