"""The parts of bench.overlay that run without an overlay (the runs themselves live in
bench/ and are not tests), and the centralized peer on a real Kafka."""

import re
import time

import pytest

from bench import overlay
from routing.overlay import builtin
from yfilter import Engine, validate


def test_corpus_mix_messages_are_marked_and_profiles_match_several_percent():
    docs = overlay.corpus_plain_documents()
    assert len(docs) >= 10
    probe = Engine()
    probe.add("probe", overlay.MIXES["corpus"].probe)
    assert all(probe.match(overlay._mark_root(d)) for d in docs)  # comments and DOCTYPEs before the root too
    assert not any(probe.match(d) for d in docs)
    texts = overlay.MIXES["corpus"].profiles(2000, 1)
    assert not any(re.search(r"\bns\d+:", t) for t in texts)  # the overlay binds no namespace prefix
    for t in texts[:200]:
        validate(t)
    share = overlay._selectivity(texts, docs)
    assert 0.01 < share["match_share_mean"] < 0.3
    assert share["messages_matching_any"] == 1.0
    msgs = overlay.MIXES["corpus"].messages(50, 1)
    assert len(msgs) == 50 and set(msgs) <= set(docs)


def test_delivery_topics_per_layout():
    assert {overlay.delivery_topic(i, 1) for i in range(10)} == {overlay.BENCH_TOPIC}
    spread = {overlay.delivery_topic(i, 1000) for i in range(2500)}
    assert len(spread) == 1000 and all(t.startswith("onyx.deliver.bench-s") for t in spread)


def test_link_truth_counts_false_positives_and_negatives():
    ov = builtin("figure4")  # news: b1 -> {b2, b3}, b2 -> b4, b4 -> {b5, b6}
    texts = ["/a", "/b"]
    hosts = {0: "b6", 1: "b3"}.__getitem__
    docs = {"m1": b"<a/>", "m2": b"<b/>", "m3": b"<c/>"}
    sent = {"m1": {"b2", "b4", "b6", "b5"}, "m2": set(), "m3": {"b2"}}
    out = overlay.link_truth(ov, texts, hosts, docs, sent)
    # m1 needs b2, b4, b6 (sent one more: b5); m2 needs b3 (not sent); m3 needs nothing (sent b2)
    assert out["links_needed_per_message"] == pytest.approx(4 / 3)
    assert out["false_positives_per_message"] == pytest.approx(2 / 3)
    assert out["false_negatives"] == 1


@pytest.mark.kafka
def test_peer_writes_one_record_per_topic_with_the_matching_profiles(kafka, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    from bench.peer import Peer
    from broker import topics

    source = f"peer-test-{time.time_ns()}"
    topics.ensure_topics(kafka.bootstrap_servers, [source, "peer.t1", "peer.t2"])
    peer = Peer(kafka.bootstrap_servers, source,
                [("p1", "/a", "peer.t1"), ("p2", "//b", "peer.t1"), ("p3", "/a/b", "peer.t2")], tmp_path)
    try:
        assert peer.ready["profiles"] == 3
        peer.expect("m", 3)
        overlay.send(kafka.bootstrap_servers, source, [b"<a><b/></a>", b"<c/>", b"<a/>"], 0.0, "m")
        done = peer.wait_done()
    finally:
        peer.stop()
    assert done["stats"]["messages"] == 3 and done["stats"]["records"] == 3
    got = {}
    for topic in ("peer.t1", "peer.t2"):
        c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"t-{time.time_ns()}"})
        c.assign([TopicPartition(topic, 0, 0)])
        want, deadline = (2 if topic == "peer.t1" else 1), time.monotonic() + 30
        seen = 0
        while seen < want and time.monotonic() < deadline:
            for m in c.consume(10, timeout=1):
                if m.error() is None:
                    h = dict(m.headers())
                    got[(topic, h["onyx-message-id"].decode())] = h["onyx-profiles"].decode()
                    seen += 1
        c.close()
    assert got == {("peer.t1", "m-0"): "p1,p2", ("peer.t2", "m-0"): "p3", ("peer.t1", "m-2"): "p1"}
