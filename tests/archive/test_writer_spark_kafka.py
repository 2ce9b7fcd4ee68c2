"""The archive writer on real Kafka and Spark: every record of a source topic's two
partitions lands once in its partition archive, and replay over the archive equals a
centralized engine over what was published."""

from __future__ import annotations

import re

import pytest
from kafka import KafkaProducer

from archive.directory import Archive
from archive.writer import start
from broker import topics
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_writer_archives_each_partition_once(kafka, spark, tmp_path, unique):
    source = f"arch-{unique}"
    topic = topics.source_topic(source)
    topics.ensure_topics(kafka.bootstrap_servers, [topic], partitions=2)
    gen = DocGenerator(Schema.nitf(), doc_depth=5, max_repeats=2, seed=6)
    docs = [gen.generate() for _ in range(60)]
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    for i, d in enumerate(docs):
        producer.send(topic, value=d, partition=i % 2, headers=[("onyx-message-id", f"m{i}".encode())])
    producer.flush()
    producer.close()

    for _ in range(2):   # a second run over the same offsets (new checkpoint) archives nothing twice
        q = start(spark, kafka.bootstrap_servers, tmp_path / "archive", tmp_path / f"ckpt{_}",
                  pattern=re.escape(topic), available_now=True)
        q.awaitTermination(300)
        assert q.exception() is None

    a = Archive(tmp_path / "archive")
    parts = a.partitions(source)
    assert sorted((p.partition, p.meta["tick"]) for p in parts) == [(0, 30), (1, 30)]
    assert a.find("m7")[1].offset == 3 and a.find("m7")[0].message("m7") == docs[7]
    profile = "/nitf/head[title]"
    engine = Engine()
    engine.add("p", profile)
    want = {f"m{i}" for i, d in enumerate(docs) if engine.match(d)}
    got = [r.record.message_id for r in a.replay(profile, 0, 2**62)]
    assert len(got) == len(set(got)) and set(got) == want and want
