"""Kafka away for 30 s while messages flow, on the real thing: the test's own Kafka is
killed (SIGKILL) mid-stream and started again on the same data and ports; `onyx up` and its
brokers wait and carry on (the streaming query is started again from its checkpoint if
it gave up), the publisher's client holds its messages meanwhile, and in the end every
delivery the centralized engine expects is there: 0 lost, 0 wrong."""

import random
import threading
import time

import pytest

from broker.packets import profile_ids
from broker.clients import TopicTail, api, publish
from broker.local.devcluster import KafkaDevCluster, free_port
from tests.broker.test_crash_restart import converge, onyx, profiles, quote, start
from yfilter import Engine

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

MESSAGES, RATE, OUTAGE_S = 1200, 40.0, 30.0


def test_brokers_wait_for_kafka_and_lose_nothing(tmp_path):
    import os

    rng = random.Random(3)
    kafka = KafkaDevCluster(name="outage", run_dir=tmp_path, port=free_port(), controller_port=free_port(),
                            keep=True).start()
    env = {**os.environ, "ONYX_RUN_DIR": str(tmp_path / "run"), "PYTHONUNBUFFERED": "1"}
    info = start(env, kafka.bootstrap_servers)
    try:
        sub = api("POST", f"{info['api_url']}/subscribers")
        texts = profiles(rng, 100)
        body = api("POST", f"{info['api_url']}/profiles:batch", {"profiles": [{"text": t} for t in texts]},
                   subscriber_token=sub["token"])
        ids = {r["profile"]["profile_id"]: t for r, t in zip(body["results"], texts)}
        converge(info, info["api_url"], sub["token"], sub["delivery_topic"])

        docs = [(f"q{i}", quote(rng)) for i in range(MESSAGES)]
        sent: list[str] = []
        publisher = threading.Thread(target=lambda: sent.extend(
            publish(kafka.bootstrap_servers, "onyx.src.news", docs, rate=RATE, progress=False)), daemon=True)
        publisher.start()
        time.sleep(10)
        kafka.kill()                      # a crash, not a clean shutdown
        time.sleep(OUTAGE_S)
        kafka.start()
        publisher.join(600)
        assert len(sent) == MESSAGES, "the publisher gave up"

        engine = Engine()
        engine.add_many(ids.items())
        expected = {(pid, mid) for mid, (_, doc) in zip(sent, docs) for pid in engine.match(doc)}
        tail = TopicTail(kafka.bootstrap_servers, [sub["delivery_topic"]], from_start=True)
        got: set[tuple[str, str]] = set()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not expected <= got:
            got |= {(p, dict(r.headers)["onyx-message-id"].decode())
                    for r in tail for p in profile_ids(r.key, r.headers) if p in ids}
            time.sleep(1)
        tail.close()
        print(f"kafka outage: {len(sent)} messages, {len(expected)} deliveries expected, {len(got)} received")
        assert expected - got == set(), f"{len(expected - got)} lost"
        assert got - expected == set(), f"{len(got - expected)} wrong"
        assert api("GET", f"{info['api_url']}/health")["status"] == "ok"
    finally:
        onyx(env, "down")
        kafka.stop()
