"""Spark Structured Streaming with the official Kafka connector, on the real broker."""

from collections import defaultdict

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker import demo, topics

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _read_all(bootstrap, names, expected, timeout_ms=20000):
    consumer = KafkaConsumer(*names, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=timeout_ms)
    out = defaultdict(list)
    n = 0
    for record in consumer:
        out[record.topic].append(record)
        n += 1
        if n == expected:
            break
    consumer.close()
    return out


def test_rows_are_written_to_the_topic_named_by_the_topic_column(kafka, spark, tmp_path, unique):
    from pyspark.sql import functions as F

    source = f"onyx.src.route-{unique}"
    even, odd = f"onyx.deliver.even-{unique}", f"onyx.deliver.odd-{unique}"
    topics.ensure_topics(kafka.bootstrap_servers, [source, even, odd])
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    for i in range(10):
        producer.send(source, key=str(i).encode(), value=f'<q n="{i}"/>'.encode(), headers=[("onyx-flow", b"xml")])
    producer.flush()
    producer.close()

    rows = (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", source).option("startingOffsets", "earliest")
            .option("includeHeaders", "true").load())
    parity = F.col("key").cast("string").cast("int") % 2
    out = rows.select(F.when(parity == 0, F.lit(even)).otherwise(F.lit(odd)).alias("topic"),
                      "key", "value", "headers")
    query = (out.writeStream.format("kafka")
             .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None

    got = _read_all(kafka.bootstrap_servers, [even, odd], expected=10)
    assert sorted(int(r.key) for r in got[even]) == [0, 2, 4, 6, 8]
    assert sorted(int(r.key) for r in got[odd]) == [1, 3, 5, 7, 9]
    for topic, records in got.items():
        for r in records:
            assert r.value == f'<q n="{int(r.key)}"/>'.encode()
            assert ("onyx-flow", b"xml") in r.headers


def test_demo_delivers_every_message_once_and_dead_letters_the_malformed_one(kafka, spark, tmp_path, capsys):
    # The corpus is optional for the demo; an empty folder keeps this test fast and self-contained.
    empty = tmp_path / "no-corpus"
    code = demo.run_with(spark, kafka.bootstrap_servers, generated=6, corpus=empty, timeout=120)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "published 7 messages" in printed
    assert "onyx.dead-letter" in printed and "dead letter bad-1: malformed XML" in printed
    assert "ok: all 7 published messages came out once" in printed


def test_classify_routes_by_document_type():
    assert demo.classify(b"<nitf/>") == ("onyx.deliver.nitf", "")
    assert demo.classify(b'<newsMessage xmlns="http://iptc.org/std/nar/2006-10-01/"/>') == ("onyx.deliver.newsml", "")
    assert demo.classify(b"<quote/>") == ("onyx.deliver.other", "")
    topic, reason = demo.classify(b"<a><b></a>")
    assert topic == topics.DEAD_LETTER and reason.startswith("malformed XML")
