"""The overlay for real: six Spark streaming brokers over real Kafka, profiles
registered over HTTP, deliveries checked against a centralized engine."""

import json
import shutil
import subprocess
import time
from collections import defaultdict

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.packets import profile_ids
from broker import config, topics
from broker.clients import api
from broker.job import BrokerJob
from broker.local import demo
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.registry.control_packets import query_packet
from broker.registry.store import ProfileRecord
from routing.overlay import builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

N_PROFILES = 1500


class Deliveries:
    """Reads the delivery topics given and the dead letters; de-duplicates by (profile
    id, message id)."""

    def __init__(self, bootstrap, delivery_topics):
        self.consumer = KafkaConsumer(*delivery_topics, topics.DEAD_LETTER,
                                      bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                      consumer_timeout_ms=500)
        self.got = defaultdict(set)  # message id -> profile ids
        self.dead = []

    def drain(self):
        for r in self.consumer:
            if r.topic == topics.DEAD_LETTER:
                self.dead.append(r)
            else:
                self.got[dict(r.headers)["onyx-message-id"].decode()].update(profile_ids(r.key, r.headers))

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
def subscriber(cluster):
    """The one subscriber all the generated profiles belong to (one delivery topic)."""
    return api("POST", f"{cluster.api_url}/subscribers")


@pytest.fixture(scope="module")
def registered(cluster, subscriber):
    schema = Schema.nitf()
    texts = ProfileGenerator(schema, n_preds=(0, 1), n_nested=0, p_star=0.1, p_desc=0.3, seed=11).batch(N_PROFILES)
    texts += ["/nitf[head/pubdata/@edition.area='SF']", "/nitf//tobject.subject[@tobject.subject.type='Stock']",
              "/nitf//hl1", "/nitf/head/title", "/newsMessage", "/rss/channel/item"]
    profiles = {}
    for i, text in enumerate(texts):
        body = api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": cluster.overlay.brokers[i % 6]},
                   subscriber_token=subscriber["token"])
        assert body["delivery_topic"] == subscriber["delivery_topic"]
        profiles[body["profile_id"]] = (text, body["token"])
    cluster.wait_idle(timeout=300)
    return profiles


@pytest.fixture
def deliveries(cluster, subscriber):
    return Deliveries(cluster.bootstrap_servers, [subscriber["delivery_topic"]])


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


def test_every_subscriber_gets_exactly_what_the_centralized_engine_says(cluster, registered, deliveries):
    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=500 + i).generate() for i in range(40)]
    corpus = [p.read_bytes() for p in sorted(config.CORPUS_DIR.glob("*.xml"))]  # the news corpus, when present
    docs += corpus
    expected = _expected(registered, docs, "exact")
    assert sum(len(v) for v in expected.values()) > 100, "the workload should produce many deliveries"
    _publish(cluster.bootstrap_servers, docs, key_prefix="exact")
    deliveries.wait_for(expected, cluster)
    for mid, pids in expected.items():
        assert deliveries.got.get(mid, set()) == pids, f"{mid}: extra {sorted(deliveries.got[mid] - pids)[:5]}"
    if corpus:  # generated NITF interests every broker here; the corpus's NewsML and RSS mostly none
        status = cluster.status()["brokers"]
        assert sum(b["forwarded"] for b in status) < len(docs) * 5, "content-based routing should not flood"


def test_update_and_delete_take_effect_for_the_next_messages(cluster, registered, deliveries):
    pid_upd, (_, tok_upd) = next((p, v) for p, v in registered.items() if v[0] == "/nitf/head/title")
    pid_del, (_, tok_del) = next((p, v) for p, v in registered.items() if v[0] == "/nitf//hl1")
    api("PUT", f"{cluster.api_url}/profiles/{pid_upd}", {"text": "/nitf/body"}, tok_upd)
    api("DELETE", f"{cluster.api_url}/profiles/{pid_del}", token=tok_del)
    cluster.wait_idle()
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


def test_malformed_message_is_dead_lettered_and_the_next_one_delivered(cluster, registered, deliveries):
    docs = [b"<nitf><head><title>unclosed</head></nitf>",
            b'<!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><nitf>&b;</nitf>',
            b"<nitf><body><hl1>after</hl1></body></nitf>"]
    _publish(cluster.bootstrap_servers, docs, key_prefix="bad")
    expected = _expected(registered, docs[2:], "good")
    deliveries.wait_for({"bad-2": expected["good-0"]}, cluster)
    assert deliveries.got["bad-2"] == expected["good-0"] != set()
    reasons = {r.key: dict(r.headers)["onyx-reason"].decode() for r in deliveries.dead}
    assert "malformed XML" in reasons[b"bad0"] and "entity" in reasons[b"bad1"]


def test_unknown_source_is_dead_lettered(cluster, deliveries):
    topics.ensure_topics(cluster.bootstrap_servers, [topics.source_topic("nobody")])
    _publish(cluster.bootstrap_servers, [b"<nitf/>"], source="nobody", key_prefix="ghost")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(r.key == b"ghost0" for r in deliveries.dead):
        deliveries.drain()
    reason = next(dict(r.headers)["onyx-reason"] for r in deliveries.dead if r.key == b"ghost0")
    assert b"unknown source id 'nobody'" in reason


def test_the_brokers_stopped_and_restarted_mid_stream_lose_nothing(cluster, registered, deliveries):
    """The query serving every broker stops; messages keep coming; a new job on the same
    checkpoint rebuilds each broker's state from its state log in Kafka and resumes."""
    job = cluster.job
    job.close()
    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=900 + i).generate() for i in range(15)]
    expected = _expected(registered, docs, "restart")
    _publish(cluster.bootstrap_servers, docs, key_prefix="restart")
    time.sleep(3)
    restarted = BrokerJob(cluster.spark, job.settings)  # same checkpoint (offsets); state from the logs
    restarted.start()
    assert {b: s.version for b, s in restarted.states.items()} == {b: s.version for b, s in job.states.items()}
    cluster.job = restarted
    deliveries.wait_for(expected, cluster)
    for mid, pids in expected.items():
        assert deliveries.got.get(mid, set()) == pids


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make test installs it from Debian)")
def test_a_message_published_with_kcat_is_delivered(cluster, registered, deliveries):
    doc = b"<nitf><head><pubdata edition.area='SF'/><title>from kcat</title></head></nitf>"
    subprocess.run(["kcat", "-P", "-b", cluster.bootstrap_servers, "-t", topics.source_topic("news"),
                    "-k", "kcat-1", "-H", "onyx-message-id=kcat-1"], input=doc, check=True, timeout=60)
    expected = _expected(registered, [doc], "kcat")
    assert expected["kcat-0"]
    deliveries.wait_for({"kcat-1": expected["kcat-0"]}, cluster)
    assert deliveries.got["kcat-1"] == expected["kcat-0"]


def _internal_offsets(bootstrap) -> dict:
    """End offset of every partition of every topic the overlay reads or writes for itself."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        parts = [TopicPartition(t, p) for t in consumer.topics() if topics.internal_reason(t)
                 for p in consumer.partitions_for_topic(t) or ()]
        return consumer.end_offsets(parts)
    finally:
        consumer.close()


def _written_since(bootstrap, before: dict) -> list:
    """The records written to the overlay's own topics since the offsets ``before``."""
    after = _internal_offsets(bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        consumer.assign(list(after))
        for tp in after:
            consumer.seek(tp, before.get(tp, 0))
        wanted = sum(end - before.get(tp, 0) for tp, end in after.items())
        records = []
        for r in consumer:
            records.append(r)
            if len(records) >= wanted:
                break
        return records
    finally:
        consumer.close()


def test_a_profile_delivering_into_the_overlays_own_topics_is_dead_lettered_not_looped(cluster, deliveries):
    """Issue 24 on the real overlay: profiles whose delivery topic some broker reads,
    injected straight into their host brokers' inbound topics (bypassing the service, as
    an older store could), get dead letters; the source topic holds exactly what was
    published and no broker topic carries a delivery."""
    evil = {"loop-src": ("b6", topics.source_topic("news")), "loop-b2": ("b5", topics.broker_topic("b2"))}
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for pid, (host, topic) in evil.items():
        key, value, headers = query_packet("add", ProfileRecord(pid, "/nitf/head/title[contains(., 'LOOP')]",
                                                                host, topic, 1))
        producer.send(topics.broker_topic(host), key=key, value=value, headers=headers)
    producer.flush()
    cluster.wait_idle(timeout=120)  # the profiles' routing queries have reached the root
    before = _internal_offsets(cluster.bootstrap_servers)
    _publish(cluster.bootstrap_servers, [b"<nitf><head><title>LOOP once</title></head></nitf>"], key_prefix="loop")
    def dead():  # the message's dead letters, wherever on its way they were written
        return [r for r in deliveries.dead if dict(r.headers).get("onyx-message-id") == b"loop-0"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(dead()) < len(evil):
        deliveries.drain()
    cluster.wait_idle(timeout=60, settle=3.0)
    deliveries.drain()
    reasons = sorted(dict(r.headers)["onyx-reason"].decode() for r in dead())
    assert len(reasons) == len(evil)
    for reason, (pid, (_, topic)) in zip(reasons, sorted(evil.items())):
        assert reason.startswith(f"not delivered to profile {pid}: its delivery topic {topic} is the overlay's own")
    written = _written_since(cluster.bootstrap_servers, before)
    on_sources = [r for r in written if r.topic.startswith(topics.SOURCE_PREFIX)]
    assert len(on_sources) == 1, "the source topics hold exactly what was published"
    assert not [r for r in written if set(profile_ids(r.key, r.headers)) & set(evil)], \
        "no delivery reached a broker's topic"
    producer.close()


def test_each_subscriber_reads_only_its_own_deliveries(cluster):
    """Two subscribers (one registered first, one created with its profile) whose
    profiles match the same message: each one's default topic carries its own deliveries
    only."""
    alice = api("POST", f"{cluster.api_url}/subscribers")
    mine = [api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": near}, subscriber_token=alice["token"])
            for text, near in [("/nitf/head/title[. = 'two subscribers']", "b5"), ("/nitf//hl1", "b3")]]
    bob = api("POST", f"{cluster.api_url}/profiles", {"text": "/nitf/head/title[starts-with(., 'two')]", "near": "b6"})
    assert {p["delivery_topic"] for p in mine} == {alice["delivery_topic"]} != {bob["delivery_topic"]}
    cluster.wait_idle(timeout=120)
    got = {alice["delivery_topic"]: Deliveries(cluster.bootstrap_servers, [alice["delivery_topic"]]),
           bob["delivery_topic"]: Deliveries(cluster.bootstrap_servers, [bob["delivery_topic"]])}
    _publish(cluster.bootstrap_servers, [b"<nitf><head><title>two subscribers</title></head><body><hl1>h</hl1>"
                                         b"</body></nitf>"], key_prefix="two")
    got[alice["delivery_topic"]].wait_for({"two-0": {p["profile_id"] for p in mine}}, cluster, timeout=120)
    got[bob["delivery_topic"]].wait_for({"two-0": {bob["profile_id"]}}, cluster, timeout=120)
    assert dict(got[alice["delivery_topic"]].got) == {"two-0": {p["profile_id"] for p in mine}}
    assert dict(got[bob["delivery_topic"]].got) == {"two-0": {bob["profile_id"]}}


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


def _changes(bootstrap, topic, key, want, timeout=120):
    """The change records of metadata subscription ``key`` on ``topic`` until ``want(records)``."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=500)
    records, deadline = [], time.monotonic() + timeout
    try:
        while not want(records) and time.monotonic() < deadline:
            records += [json.loads(r.value) for r in consumer if r.key == key]
    finally:
        consumer.close()
    return records


def test_brokers_learn_a_new_source_from_their_metadata_repositories_and_a_metadata_subscriber_hears_of_it(
        cluster, registered, deliveries):
    """Issue 32: the catalog is MDV's publish & subscribe. A user's rule over HTTP gets the
    registration of a matching source (and not of one that does not match); the brokers learn
    the source from their repositories and route its messages exactly; each broker's
    repository holds the profiles it hosts."""
    from broker.metadata import client
    from broker.metadata.onyx_schema import profile_uri, source_uri

    sub = api("POST", f"{cluster.api_url}/metadata/subscriptions",
              {"rule": "search Source s register s where s.schema.declares? = 'nitf' and s.rate > 100"})
    key = f"metadata:{sub['subscription_id']}".encode()
    dtd = "<!ELEMENT nitf (head, body)> <!ELEMENT head (title)> <!ELEMENT title (#PCDATA)> <!ELEMENT body ANY>"
    # Public: a subscriber sees only the sources it may read (a private one's registration is its publisher's).
    fast = api("POST", f"{cluster.api_url}/sources", {"name": "wire fast", "rate": 500, "schema": dtd,
                                                      "root_broker": "b3", "public": True})
    slow = api("POST", f"{cluster.api_url}/sources", {"name": "wire slow", "rate": 5, "schema": dtd, "public": True})
    seen = _changes(cluster.bootstrap_servers, sub["topic"], key,
                    lambda rs: any(source_uri(fast["source_id"]) in r["matched"] for r in rs))
    assert any(source_uri(fast["source_id"]) in r["matched"] for r in seen), seen
    assert not any(source_uri(slow["source_id"]) in r["upserts"] for r in seen)

    docs = [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=900 + i).generate() for i in range(20)]
    _publish(cluster.bootstrap_servers, docs, source=fast["source_id"], key_prefix="meta")
    expected = _expected(registered, docs, "meta")
    deliveries.wait_for(expected, cluster)
    assert {m: deliveries.got.get(m, set()) & set(registered) for m in expected} == expected
    assert not [r for r in deliveries.dead if r.key and r.key.startswith(b"meta")]

    hosted: dict[str, set[str]] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        repos = {b: client.repository(cluster.bootstrap_servers, b) for b in cluster.overlay.brokers}
        hosted = {b: r.query(f"search Profile p register p where p.hostBroker.brokerId = '{b}'")
                  for b, r in repos.items()}
        if set().union(*hosted.values()) >= {profile_uri(p) for p in registered}:
            break
        time.sleep(1)
    assert sum(len(h) for h in hosted.values()) == len(set().union(*hosted.values()))  # each on one broker
    assert set().union(*hosted.values()) >= {profile_uri(p) for p in registered}
    for b, repo in repos.items():  # every broker holds the new source, its schema and dictionary
        assert source_uri(fast["source_id"]) in repo.query("search Source s register s where s.rate > 100")
        assert repo.resources()[source_uri(fast["source_id"])]["rootBroker"] == ["urn:onyx:brokers:b3#broker"]
