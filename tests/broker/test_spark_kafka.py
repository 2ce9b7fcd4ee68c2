"""Spark Structured Streaming with the official Kafka connector, on the real broker."""

from collections import defaultdict

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker import topics

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
