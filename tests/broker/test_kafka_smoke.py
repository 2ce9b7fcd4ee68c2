"""kafka-python against the real broker: XML with packet headers goes in and comes back."""

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker import topics

pytestmark = pytest.mark.kafka


def test_xml_with_headers_round_trips(kafka, unique):
    topic = topics.source_topic(f"smoke-{unique}")
    topics.ensure_topics(kafka.bootstrap_servers, [topic])
    sent = [
        (f"m{i}".encode(), f"<nitf><head><title>story {i}</title></head></nitf>".encode(),
         [("onyx-flow", b"xml"), ("onyx-msg-id", f"id-{i}".encode())])
        for i in range(5)
    ]
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    for key, value, headers in sent:
        producer.send(topic, key=key, value=value, headers=headers)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = []
    for record in consumer:
        got.append((record.key, record.value, list(record.headers)))
        if len(got) == len(sent):
            break
    consumer.close()
    assert got == sent


def test_ensure_topics_creates_only_missing_ones(kafka, unique):
    names = [f"onyx.t.{unique}.a", f"onyx.t.{unique}.b"]
    assert topics.ensure_topics(kafka.bootstrap_servers, names) == names
    assert topics.ensure_topics(kafka.bootstrap_servers, names + [f"onyx.t.{unique}.c"]) == [f"onyx.t.{unique}.c"]
