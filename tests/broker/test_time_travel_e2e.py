"""Time travel on the real overlay: six Spark brokers and the archive writer over a real
Kafka of their own, the registration service over HTTP. Replay over a window equals the
centralized engine over the messages published in it; a backfilled subscriber gets every
match exactly once after de-duplication by message id, with messages flowing across the
seam; profile history and "who received M" follow the profile log; ``onyx query`` over a
window equals the engine too, and asked again comes wholly from the semantic cache."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.packets import delivers_to
from broker import cli, config, topics
from broker.clients import ApiError, api
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.devcluster import KafkaDevCluster
from broker.registry.backfill import BACKFILL_HEADER
from routing.overlay import builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SOURCE = topics.source_topic("news")


ADMIN = "time-travel-operator"


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory):
    """The overlay, with an operator token the test's clients use (as the ``onyx`` commands use
    ``onyx up``'s): the archive of ``news`` (the operator's source) is the operator's to read."""
    kafka = KafkaDevCluster(name="timetravel", run_dir=tmp_path_factory.mktemp("tt-kafka")).start()
    c = LocalOverlay(builtin("figure4"), OverlaySettings(name="timetravel", bootstrap_servers=kafka.bootstrap_servers,
                                                         archive=True, admin_token=ADMIN), spark=spark)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "ADMIN_TOKEN", ADMIN)
        c.start()
        yield c
        c.stop()
    kafka.stop()


def _docs(seed: int, n: int) -> list[bytes]:
    return [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=seed + i).generate() for i in range(n)]


def _publish(bootstrap: str, docs: list[bytes], prefix: str, rate: float = 0.0) -> dict[str, int]:
    """Publish; message id -> the record's Kafka timestamp (what the archive keeps)."""
    stamps: dict[str, int] = {}
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def done(err, msg):
        if err is not None:
            errors.append(err.str())
        else:
            stamps[msg.key().decode()] = msg.timestamp()[1]   # (a delivery report has no headers)

    for i, doc in enumerate(docs):
        mid = f"{prefix}-{i}".encode()
        producer.produce(SOURCE, doc, mid, headers=[("onyx-message-id", mid)], on_delivery=done)
        producer.poll(0)
        if rate:
            time.sleep(1 / rate)
    assert producer.flush(60) == 0 and not errors, errors[:3]
    return stamps


def _archived(cluster, ids, timeout=120):
    """Wait until the archive holds every message of ``ids``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = api("GET", f"{cluster.api_url}/archive/messages?at={int(time.time() * 1000) + 60_000}")
        if set(ids) <= {m["message_id"] for m in got["messages"]}:
            return
        time.sleep(1)
    raise AssertionError("the archive writer did not archive the messages")


def _replay(cluster, body) -> dict[str, list[str]]:
    from broker.time_travel_client import stream_replay

    out = {}
    for line in stream_replay(cluster.api_url, body):
        if "match" in line:
            m = line["match"]
            out[m["message_id"]] = m.get("results") or [m["xml"]]
    return out


def test_replay_equals_the_centralized_engine_over_the_window(cluster, capsys):
    docs = _docs(900, 60)
    stamps = _publish(cluster.bootstrap_servers, docs, "rp")
    _archived(cluster, stamps)
    times = [stamps[f"rp-{i}"] for i in range(60)]
    lo, hi = times[10], times[49]
    inside = [i for i, t in enumerate(times) if lo <= t <= hi]
    profiles = ["/nitf/head/pubdata[@edition.area = 'SF']", "/nitf//p", "/nitf[head/title]//hl1",
                "for $t in $msg/nitf/head/title return <t>{$t/text()}</t>"]
    for text in profiles:
        engine = Engine()
        engine.add("p", text)
        want = {}
        for i in inside:
            res = engine.run(docs[i]).get("p") if text.startswith("for") else (
                [docs[i].decode()] if engine.match(docs[i]) else None)
            if res:
                want[f"rp-{i}"] = [r.decode() if isinstance(r, bytes) else r for r in res]
        got = _replay(cluster, {"text": text, "from": lo, "to": hi})
        assert set(got) == set(want), text
        if text.startswith("for"):
            assert got == want
    # The command line, against the running service: same answer, a summary line.
    text = profiles[0]
    assert cli.main(["replay", text, "--from", str(lo), "--to", str(hi), "--api", cluster.api_url]) == 0
    out = capsys.readouterr().out
    engine = Engine()
    engine.add("p", text)
    n = sum(1 for i in inside if engine.match(docs[i]))
    assert f"{n} matched of" in out and "through the archive's index" in out


def _deliveries(bootstrap: str, topic: str, key: str, until: float) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tt-{time.time_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while time.monotonic() < until:
            out += [m for m in consumer.consume(500, timeout=0.5)
                    if m.error() is None and delivers_to(key, m.key(), m.headers())]
    finally:
        consumer.close()
    return out


def test_a_backfilled_subscriber_misses_nothing_at_the_seam(cluster):
    text = "/nitf/head/pubdata[@edition.area = 'SF']"
    engine = Engine()
    engine.add("p", text)
    since = int(time.time() * 1000)
    before = _docs(1200, 40)
    _publish(cluster.bootstrap_servers, before, "bf-a")             # before the profile exists
    during = _docs(1300, 60)
    flowing = threading.Thread(target=_publish, args=(cluster.bootstrap_servers, during, "bf-b", 15.0))
    flowing.start()                                                  # across registration, backfill and seam
    time.sleep(1)
    profile = api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": "b6"})
    # Its subscriber may read news's archive once the operator grants it (without: nothing to backfill).
    api("PUT", f"{cluster.api_url}/sources/news/grants/{profile['subscriber_id']}")
    done = api("POST", f"{cluster.api_url}/profiles/{profile['profile_id']}/backfill", {"since": since},
               token=profile["token"], timeout=200)
    flowing.join()
    after = _docs(1400, 20)
    _publish(cluster.bootstrap_servers, after, "bf-c")
    cluster.wait_idle(timeout=300)
    want = {f"{p}-{i}" for p, docs in (("bf-a", before), ("bf-b", during), ("bf-c", after))
            for i, d in enumerate(docs) if engine.match(d)}
    records = _deliveries(cluster.bootstrap_servers, profile["delivery_topic"], profile["profile_id"],
                          time.monotonic() + 5)
    ids = [dict(r.headers())["onyx-message-id"].decode() for r in records]
    backfilled = {i for r, i in zip(records, ids) if dict(r.headers()).get(BACKFILL_HEADER) == b"1"}
    assert set(ids) == want                                          # nothing missed, nothing extra
    assert backfilled and done["delivered"] == len(backfilled) == done["matched"]
    assert {f"bf-a-{i}" for i, d in enumerate(before) if engine.match(d)} <= backfilled
    assert set(done["seam"]) == {"news:0"}


def test_a_subscribers_matching_filters_share_one_record_and_a_reference_is_fetched_from_the_archive(cluster):
    """Issue 41's result volume on the real overlay: the filters of one subscriber hosted at one
    broker (b5) that match a message make one record on its topic, keyed by the first id and
    listing all; a transformation profile there has a record of its own; the by-reference
    profiles make one small record whose href serves the message from the archive to this
    subscriber (granted nothing: it was delivered the message); a filter at another host (b6)
    makes a record of its own. The event stream gives a listed profile the shared record."""
    from broker import packets
    from broker.clients import fetch_reference, stream_deliveries

    url = cluster.api_url
    sub = api("POST", f"{url}/subscribers")
    token = sub["token"]

    def register(text: str, near: str, by: str | None = None) -> dict:
        body = {"text": text, "near": near, **({"delivery": {"by": by}} if by else {})}
        made = api("POST", f"{url}/profiles", body, subscriber_token=token)
        assert made["host_broker"] == near
        return made

    copies = [register(t, "b5") for t in ("/nitf", "/nitf/head/title", "//hl1")]
    flwr = register("for $n in $msg/nitf return <t>{$n/head/title}</t>", "b5")
    refs = [register(t, "b5", "reference") for t in ("/nitf", "/nitf//hl1")]
    elsewhere = register("/nitf/head", "b6")
    unmatched = register("/rss", "b5", "reference")
    cluster.wait_idle(timeout=120)
    doc = b"<nitf><head><title>vol</title></head><body><hl1>h</hl1></body></nitf>"
    stamps = _publish(cluster.bootstrap_servers, [doc], "vol")
    deadline = time.monotonic() + 120
    records = _all(cluster.bootstrap_servers, sub["delivery_topic"])
    while len(records) < 4 and time.monotonic() < deadline:
        time.sleep(1)
        records = _all(cluster.bootstrap_servers, sub["delivery_topic"])
    cluster.wait_idle(timeout=60)
    records = _all(cluster.bootstrap_servers, sub["delivery_topic"])  # and nothing more came
    got = {m.key().decode(): (dict(m.headers()), m.value()) for m in records
           if dict(m.headers()).get("onyx-message-id") == b"vol-0"}
    ids = sorted(p["profile_id"] for p in copies)
    refs_ids = sorted(p["profile_id"] for p in refs)
    assert set(got) == {ids[0], flwr["profile_id"], refs_ids[0], elsewhere["profile_id"]}, got
    headers, value = got[ids[0]]
    assert headers[packets.PROFILES] == ",".join(ids).encode() and value == doc
    assert got[flwr["profile_id"]][0][packets.PROFILES] == flwr["profile_id"].encode()
    assert got[flwr["profile_id"]][1] == b"<t><title>vol</title></t>"
    headers, value = got[refs_ids[0]]
    assert headers[packets.DELIVERY] == packets.REFERENCE and headers[packets.PROFILES] == ",".join(refs_ids).encode()
    _archived(cluster, stamps)
    assert fetch_reference(url, value, subscriber_token=token) == doc
    other = packets.for_profile(refs_ids[1], value, list(headers.items()))
    assert fetch_reference(url, other, subscriber_token=token) == doc
    not_delivered = packets.for_profile(unmatched["profile_id"], value, list(headers.items()))
    with pytest.raises(ApiError, match="404"):
        fetch_reference(url, not_delivered, subscriber_token=token, wait=0)
    # Every listed profile's event stream has the shared record, as a delivery of its own.
    for profile in copies:
        stream = stream_deliveries(url, profile["profile_id"], profile["token"], from_start=True, timeout=30)
        try:
            event = next(e for e in stream if e is not None and e["message_id"] == "vol-0")
        finally:
            stream.close()
        assert event["profile_id"] == profile["profile_id"] and event["value"] == doc.decode()


def _all(bootstrap: str, topic: str) -> list:
    """Every record of ``topic`` so far."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tt-{time.time_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while batch := [m for m in consumer.consume(500, timeout=1.0) if m.error() is None]:
            out += batch
    finally:
        consumer.close()
    return out


def test_profile_history_and_who_received_a_message(cluster):
    a = api("POST", f"{cluster.api_url}/profiles", {"text": "/nitf/head/title"})
    cluster.wait_idle(timeout=120)
    stamps = _publish(cluster.bootstrap_servers, [b"<nitf><head><title>x</title></head></nitf>"], "who")
    api("PUT", f"{cluster.api_url}/profiles/{a['profile_id']}", {"text": "/nitf/body"}, token=a["token"])
    deadline = time.monotonic() + 120
    while len(api("GET", f"{cluster.api_url}/profiles/{a['profile_id']}/history")["versions"]) < 2:
        assert time.monotonic() < deadline, "the archive writer did not record the update"
        time.sleep(1)
    _archived(cluster, stamps)
    versions = api("GET", f"{cluster.api_url}/profiles/{a['profile_id']}/history")["versions"]
    assert [v["text"] for v in versions] == ["/nitf/head/title", "/nitf/body"] and versions[1]["to"] is None
    assert versions[0]["to"] == versions[1]["from"]
    got = api("GET", f"{cluster.api_url}/archive/messages/who-0/recipients")
    assert a["profile_id"] in got["profiles"]
    active = api("GET", f"{cluster.api_url}/archive/profiles?at={versions[0]['from']}")
    assert {"profile_id": a["profile_id"], "text": "/nitf/head/title"} in active["profiles"]


def test_onyx_query_equals_the_engine_over_the_window_and_the_second_time_comes_from_the_cache(cluster, capsys):
    text = "/nitf/head/pubdata[@edition.area = 'SF']"
    docs = _docs(1500, 60)
    stamps = _publish(cluster.bootstrap_servers, docs, "q", rate=300.0)   # a few ms apart
    time.sleep(0.05)
    stamps.update(_publish(cluster.bootstrap_servers, [docs[0]], "q-after"))  # archived later: the window settles
    _archived(cluster, stamps)
    times = [stamps[f"q-{i}"] for i in range(60)]
    lo, hi = times[5], times[54]
    assert stamps["q-after-0"] > hi > lo
    engine = Engine()
    engine.add("p", text)
    want = {f"q-{i}" for i, t in enumerate(times) if lo <= t <= hi and engine.match(docs[i])}
    argv = ["query", "news", text, "--from", str(lo), "--to", str(hi), "--api", cluster.api_url]
    runs = []
    for _ in range(2):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out.splitlines()
        with capsys.disabled():
            print(f"\n$ onyx query news \"{text}\" --from {lo} --to {hi}\n{out[-1]}")   # shown with -s
        assert {line.split()[0] for line in out[:-1]} == want and len(out) == len(want) + 1
        runs.append(out[-1])
    assert want and runs[0].startswith(f"{len(want)} items: 0 from the cache, {len(want)} from the source;")
    assert runs[1].startswith(f"{len(want)} items: {len(want)} from the cache, 0 from the source; remainder: none")
    (news,) = api("GET", f"{cluster.api_url}/cache")["sources"]
    assert news["stats"]["queries"] == 2 and news["stats"]["items_from_cache"] == len(want)
