"""The overlay for real: six Spark streaming brokers over real Kafka, profiles
registered over HTTP, deliveries checked against a centralized engine."""

import shutil
import subprocess
import time
from collections import defaultdict

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker import config, demo, topics
from broker.clients import api
from broker.cluster import LocalOverlay, OverlaySettings
from broker.job import BrokerJob
from routing.overlay import builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

N_PROFILES = 1500


class Deliveries:
    """Reads every delivery topic; de-duplicates by (profile id, message id)."""

    def __init__(self, bootstrap, brokers):
        self.consumer = KafkaConsumer(*[topics.delivery_topic(b) for b in brokers], topics.DEAD_LETTER,
                                      bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                      consumer_timeout_ms=500)
        self.got = defaultdict(set)  # message id -> profile ids
        self.dead = []

    def drain(self):
        for r in self.consumer:
            if r.topic == topics.DEAD_LETTER:
                self.dead.append(r)
            else:
                self.got[dict(r.headers)["onyx-message-id"].decode()].add(r.key.decode())

    def wait_for(self, expected: dict, cluster, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.drain()
            if all(self.got.get(mid, set()) >= pids for mid, pids in expected.items()):
                cluster.wait_idle(timeout=60)
                self.drain()
                return
        raise AssertionError(f"missing deliveries: { {m: sorted(p - self.got.get(m, set()))[:5] for m, p in expected.items() if not p <= self.got.get(m, set())} }")


@pytest.fixture(scope="module")
def cluster(kafka, spark):
    overlay = builtin("figure4")
    c = LocalOverlay(overlay, OverlaySettings(name="e2e", bootstrap_servers=kafka.bootstrap_servers), spark=spark)
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def registered(cluster):
    schema = Schema.nitf()
    texts = ProfileGenerator(schema, n_preds=(0, 1), n_nested=0, p_star=0.1, p_desc=0.3, seed=11).batch(N_PROFILES)
    texts += ["/nitf[head/pubdata/@edition.area='SF']", "/nitf//tobject.subject[@tobject.subject.type='Stock']",
              "/nitf//hl1", "/nitf/head/title", "/newsMessage", "/rss/channel/item"]
    profiles = {}
    for i, text in enumerate(texts):
        body = api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": cluster.overlay.brokers[i % 6]})
        profiles[body["profile_id"]] = (text, body["token"])
    cluster.wait_idle(timeout=300)
    return profiles


def _publish(bootstrap, docs, source="news", key_prefix="m"):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 1024 * 1024)
    for i, doc in enumerate(docs):
        producer.send(topics.source_topic(source), key=f"{key_prefix}{i}".encode(), value=doc,
                      headers=[("onyx-message-id", f"{key_prefix}-{i}".encode())])
    producer.flush()
    producer.close()


def _expected(profiles, docs, key_prefix):
    engine = Engine()
    for pid, (text, _) in profiles.items():
        engine.add(pid, text)
    return {f"{key_prefix}-{i}": set(engine.match(doc)) for i, doc in enumerate(docs)}


def test_every_subscriber_gets_exactly_what_the_centralized_engine_says(cluster, registered):
    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=500 + i).generate() for i in range(40)]
    corpus = [p.read_bytes() for p in sorted(config.CORPUS_DIR.glob("*.xml"))]  # the news corpus, when present
    docs += corpus
    expected = _expected(registered, docs, "exact")
    assert sum(len(v) for v in expected.values()) > 100, "the workload should produce many deliveries"
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    _publish(cluster.bootstrap_servers, docs, key_prefix="exact")
    deliveries.wait_for(expected, cluster)
    for mid, pids in expected.items():
        assert deliveries.got.get(mid, set()) == pids, f"{mid}: extra {sorted(deliveries.got[mid] - pids)[:5]}"
    if corpus:  # generated NITF interests every broker here; the corpus's NewsML and RSS mostly none
        status = cluster.status()["brokers"]
        assert sum(b["forwarded"] for b in status) < len(docs) * 5, "content-based routing should not flood"


def test_update_and_delete_take_effect_for_the_next_messages(cluster, registered):
    pid_upd, (_, tok_upd) = next((p, v) for p, v in registered.items() if v[0] == "/nitf/head/title")
    pid_del, (_, tok_del) = next((p, v) for p, v in registered.items() if v[0] == "/nitf//hl1")
    api("PUT", f"{cluster.api_url}/profiles/{pid_upd}", {"text": "/nitf/body"}, tok_upd)
    api("DELETE", f"{cluster.api_url}/profiles/{pid_del}", token=tok_del)
    cluster.wait_idle()
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    docs = [b"<nitf><head><title>t</title></head><body><hl1>h</hl1></body></nitf>"]
    _publish(cluster.bootstrap_servers, docs, key_prefix="upd")
    current = {p: v for p, v in registered.items() if p != pid_del}
    current[pid_upd] = ("/nitf/body", tok_upd)
    expected = _expected(current, docs, "upd")
    assert pid_upd in expected["upd-0"]
    deliveries.wait_for(expected, cluster)
    assert deliveries.got["upd-0"] == expected["upd-0"]
    assert pid_del not in deliveries.got["upd-0"]
    registered.pop(pid_del)
    registered[pid_upd] = current[pid_upd]


def test_malformed_message_is_dead_lettered_and_the_next_one_delivered(cluster, registered):
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    docs = [b"<nitf><head><title>unclosed</head></nitf>",
            b'<!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><nitf>&b;</nitf>',
            b"<nitf><body><hl1>after</hl1></body></nitf>"]
    _publish(cluster.bootstrap_servers, docs, key_prefix="bad")
    expected = _expected(registered, docs[2:], "good")
    deliveries.wait_for({"bad-2": expected["good-0"]}, cluster)
    assert deliveries.got["bad-2"] == expected["good-0"] != set()
    reasons = {r.key: dict(r.headers)["onyx-reason"].decode() for r in deliveries.dead}
    assert "malformed XML" in reasons[b"bad0"] and "entity" in reasons[b"bad1"]


def test_unknown_source_is_dead_lettered(cluster):
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    topics.ensure_topics(cluster.bootstrap_servers, [topics.source_topic("nobody")])
    _publish(cluster.bootstrap_servers, [b"<nitf/>"], source="nobody", key_prefix="ghost")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(r.key == b"ghost0" for r in deliveries.dead):
        deliveries.drain()
    reason = next(dict(r.headers)["onyx-reason"] for r in deliveries.dead if r.key == b"ghost0")
    assert b"unknown source id 'nobody'" in reason


def test_a_broker_stopped_and_restarted_mid_stream_loses_nothing(cluster, registered):
    job = cluster.jobs["b4"]
    job.stop()
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=900 + i).generate() for i in range(15)]
    expected = _expected(registered, docs, "restart")
    _publish(cluster.bootstrap_servers, docs, key_prefix="restart")
    time.sleep(3)
    restarted = BrokerJob(cluster.spark, job.settings)  # same checkpoint: offsets and state snapshot
    assert restarted.state.version == job.state.version
    restarted.start()
    cluster.jobs["b4"] = restarted
    deliveries.wait_for(expected, cluster)
    for mid, pids in expected.items():
        assert deliveries.got.get(mid, set()) == pids


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make test installs it from Debian)")
def test_a_message_published_with_kcat_is_delivered(cluster, registered):
    deliveries = Deliveries(cluster.bootstrap_servers, cluster.overlay.brokers)
    doc = b"<nitf><head><pubdata edition.area='SF'/><title>from kcat</title></head></nitf>"
    subprocess.run(["kcat", "-P", "-b", cluster.bootstrap_servers, "-t", topics.source_topic("news"),
                    "-k", "kcat-1", "-H", "onyx-message-id=kcat-1"], input=doc, check=True, timeout=60)
    expected = _expected(registered, [doc], "kcat")
    assert expected["kcat-0"]
    deliveries.wait_for({"kcat-1": expected["kcat-0"]}, cluster)
    assert deliveries.got["kcat-1"] == expected["kcat-0"]


def test_the_demo_reports_exact_deliveries_for_its_subscribers(cluster, tmp_path):
    """`make run` on a small scale: its subscribers' deliveries equal the reference."""
    lines = []
    result = demo.run_on(cluster, lines.append, profiles=150, messages=15, corpus=tmp_path, progress=False)
    assert result.ok, "\n".join(lines)
    assert sum(map(len, result.expected.values())) > 0 and result.refused == {"malformed"}
    assert len(result.expected_docs) >= 2  # Q1 and Q2 construct documents from the stock stories
    assert any(line.strip().startswith("Q1 result: <stock_news>") for line in lines)
    assert any(line.strip().startswith("Q1 ") for line in lines)
    assert lines[-1].strip() == "ok: every subscriber received exactly what the centralized engine says"
