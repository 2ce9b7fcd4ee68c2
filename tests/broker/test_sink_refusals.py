"""What a broker does when Kafka will not take a delivery, on the real Kafka: a record a
topic can never take (larger than the topic allows) becomes a dead letter naming the topic
and Kafka's reason, and the records around it are written as usual; the task goes on. (A
failure that may pass — a leader moving, Kafka away — is retried by the producer, and if
it lasts, fails the batch, which Spark runs again: see test_kafka_outage.py.)"""

import pytest

from broker import topics
from broker.clients import TopicTail
from broker.dataplane.sink import KafkaSink, producer_conf
from broker.packets import ORIGIN, REASON

pytestmark = pytest.mark.kafka


def test_a_record_the_topic_refuses_becomes_a_dead_letter_and_the_rest_is_written(kafka, unique):
    small = f"sub.small.{unique}"
    topics.ensure_topics(kafka.bootstrap_servers, [topics.DEAD_LETTER])
    topics.ensure_topics(kafka.bootstrap_servers, [small], config={"max.message.bytes": "2000"})
    tail = TopicTail(kafka.bootstrap_servers, [small, topics.DEAD_LETTER])
    sink = KafkaSink(producer_conf(kafka.bootstrap_servers, 2, "none"))
    headers = [("onyx-message-id", f"m-{unique}".encode())]
    sink.send([(small, b"p1", b"<a>small</a>", headers),
               (small, b"p2", b"<a>" + b"x" * 10_000 + b"</a>", headers),  # over the topic's limit
               (small, b"p3", b"<a>also small</a>", headers)])
    sink.flush()  # no SinkError: nothing is lost, nothing to run again
    del sink  # its producer with it (it would try to reach the session's Kafka after it stopped)
    records = []
    for _ in range(20):
        records += list(tail)
        if any(r.topic == topics.DEAD_LETTER and dict(r.headers).get(ORIGIN) == small.encode() for r in records):
            break
    tail.close()
    assert sorted(r.key for r in records if r.topic == small) == [b"p1", b"p3"]
    [letter] = [r for r in records if r.topic == topics.DEAD_LETTER and dict(r.headers).get(ORIGIN) == small.encode()]
    meta = dict(letter.headers)
    assert letter.key == b"p2" and meta[ORIGIN] == small.encode()
    assert meta[REASON].startswith(f"Kafka refused a record for {small}:".encode())
    assert b"too large" in meta[REASON].lower() or b"size" in meta[REASON].lower()
