"""Node failures of the distributed overlay (issue 34), on the real thing: a 3-node KRaft
Kafka cluster (replication factor 3, min.insync.replicas 2, producers acks=all and
idempotent), a Spark standalone master with 2 workers, and every broker of a three-broker
chain (b1 -> b2 -> b3) a Spark application of its own (``distributed_overlay``). While
quotes flow, one thing is killed with SIGKILL:

* a Kafka node, the leader of the source topic, started again on its data 30 s later;
* the Spark worker running most executors (the master moves them to the other one);
* the root broker's driver (its spark-submit JVM and Python process), submitted again: it
  resumes from its checkpoint and rebuilds its state from its state log.

Each time every subscriber must receive every delivery the centralized engine
(``yfilter.Engine`` over all profiles, message by message) says it should: 0 lost, 0
wrong; duplicates are allowed (at-least-once) and counted (de-duplicable by
``onyx-message-id``). The figures (messages, expected/received deliveries, duplicates,
recovery time: from the kill until the first delivery of a message published after it)
are printed. The default run has the worker's loss; ``-m slow`` runs the other two."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from broker.packets import profile_ids
from broker.clients import TopicTail, api, publish
from routing.overlay import Overlay
from tests.broker.test_crash_restart import converge, profiles, quote
from yfilter import Engine

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

OVERLAY = Overlay.from_dict({"name": "chain3", "brokers": ["b1", "b2", "b3"], "links": [["b1", "b2"], ["b2", "b3"]],
                             "sources": [{"id": "news", "root": "b1"}]})
MESSAGES, RATE, BEFORE_S = 1200, 20.0, 15.0  # a minute of quotes; the fault 15 s in
KAFKA_OUTAGE_S = 30.0


class Deliveries(threading.Thread):
    """Reads a delivery topic from its start while the test runs: (profile, message id,
    arrival time) of every record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.tail = TopicTail(bootstrap, [topic], from_start=True)
        self.got: list[tuple[str, str, float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.monotonic()
            self.got += [(p, dict(r.headers)["onyx-message-id"].decode(), now)
                         for r in self.tail for p in profile_ids(r.key, r.headers)]
            time.sleep(0.2)

    def stop(self) -> None:
        self.done.set()
        self.join(30)
        self.tail.close()


def survive(cluster, fault, seed: int) -> dict:
    """Register 200 quote profiles as a new subscriber, stream :data:`MESSAGES` quotes at
    :data:`RATE`, call ``fault()`` :data:`BEFORE_S` seconds in, and check what arrived
    against the centralized engine."""
    rng = random.Random(seed)
    api_url, bootstrap = cluster.api_url, cluster.bootstrap_servers
    sub = api("POST", f"{api_url}/subscribers")
    texts = profiles(rng, 200)
    body = api("POST", f"{api_url}/profiles:batch", {"profiles": [{"text": t} for t in texts]},
               subscriber_token=sub["token"])
    ids = {r["profile"]["profile_id"]: t for r, t in zip(body["results"], texts)}
    converge({"bootstrap_servers": bootstrap}, api_url, sub["token"], sub["delivery_topic"])

    reader = Deliveries(bootstrap, sub["delivery_topic"])
    reader.start()
    docs = [(f"q{i}", quote(rng)) for i in range(MESSAGES)]
    sent: list[str] = []
    t0 = time.monotonic()
    publisher = threading.Thread(target=lambda: sent.extend(
        publish(bootstrap, "onyx.src.news", docs, rate=RATE, progress=False)), daemon=True)
    publisher.start()
    time.sleep(BEFORE_S)
    t_fault = time.monotonic()
    what = fault()
    publisher.join(900)
    assert len(sent) == MESSAGES, "the publisher gave up"

    engine = Engine()
    engine.add_many(ids.items())
    expected = {(pid, mid) for mid, (_, doc) in zip(sent, docs) for pid in engine.match(doc)}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and not expected <= {(p, m) for p, m, _ in reader.got}:
        time.sleep(1)
    cluster.wait_idle(timeout=600)
    reader.stop()
    received = [(p, m) for p, m, _ in reader.got if p in ids]
    got = set(received)
    # Messages scheduled after the fault (the publisher sends message i at t0 + i / RATE, or later).
    after = set(sent[int((t_fault - t0) * RATE) + 1:])
    first_after = min((t for p, m, t in reader.got if m in after), default=None)
    result = {"fault": what, "messages": len(sent), "expected": len(expected), "received": len(received),
              "distinct": len(got), "lost": len(expected - got), "wrong": len(got - expected),
              "duplicates": len(received) - len(got),
              "recovery_s": None if first_after is None else round(first_after - t_fault, 1)}
    print("distributed failure:", json.dumps(result))
    return result


def _check(result: dict) -> None:
    assert result["lost"] == 0, result
    assert result["wrong"] == 0, result
    assert result["expected"] > 500, result  # the stream really exercised the profiles
    assert result["recovery_s"] is not None, result


def test_losing_a_spark_worker_loses_no_delivery(distributed_overlay):
    spark = distributed_overlay.standalone

    def fault() -> str:
        busiest = max(range(len(spark.workers)), key=lambda i: _cores_used(spark, i))
        spark.kill_worker(busiest + 1)
        return f"SIGKILL of Spark worker {busiest + 1} of {len(spark.workers)}"
    _check(survive(distributed_overlay, fault, seed=11))
    spark.start_worker(1)
    spark.start_worker(2)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_losing_a_kafka_node_for_30s_loses_no_delivery(distributed_overlay):
    kafka = distributed_overlay.kafka

    def fault() -> str:
        leader = _leader(distributed_overlay.bootstrap_servers, "onyx.src.news")
        kafka.kill_node(leader)
        time.sleep(KAFKA_OUTAGE_S)  # the quotes keep flowing meanwhile
        kafka.start_node(leader)
        return f"SIGKILL of Kafka node {leader} (the source topic's leader), restarted after {KAFKA_OUTAGE_S:.0f} s"
    _check(survive(distributed_overlay, fault, seed=12))
    assert kafka.running


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_losing_a_brokers_driver_loses_no_delivery(distributed_overlay):
    apps = distributed_overlay.job

    def fault() -> str:
        apps.kill_driver("b1")
        apps.submit("b1")
        return "SIGKILL of broker b1's driver (the root), submitted again"
    _check(survive(distributed_overlay, fault, seed=13))


def _cores_used(spark, index: int) -> int:
    """Cores the master says worker ``index`` (0-based) gives executors now."""
    port = spark.workers[index].port
    return next((w["coresused"] for w in spark.state()["workers"]
                 if w["state"] == "ALIVE" and w["port"] == port), 0)


def _leader(bootstrap: str, topic: str) -> int:
    """The node id leading partition 0 of ``topic``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_topics([topic])[0]["partitions"][0]["leader_id"]
    finally:
        admin.close()
