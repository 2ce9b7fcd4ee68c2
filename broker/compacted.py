"""Reading one of the service's compacted logs (``onyx.profiles``, ``onyx.metadata``) from its
beginning to the end it had when reading began: what a service starting up needs to know of
what it (or another instance) wrote before."""

from __future__ import annotations

import time
from collections.abc import Iterator


def _end_offset(consumer, tp, deadline: float) -> int:
    """The end offset of ``tp``; asked again while its leader is not known yet (a topic just
    created: Kafka answers NOT_LEADER_FOR_PARTITION for a moment), until ``deadline``."""
    from confluent_kafka import KafkaError, KafkaException

    settling = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(1.0, deadline - time.monotonic()))[1]
        except KafkaException as exc:
            if exc.args[0].code() not in settling or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_to_end(bootstrap_servers: str, topic: str, timeout_s: float = 60.0) -> Iterator:
    """The records of ``topic`` (confluent-kafka messages), partition by partition in offset
    order, up to the end offsets of the moment it starts; :class:`RuntimeError` if that end is
    not reached in ``timeout_s``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from broker.kafka_auth import librdkafka_options

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "onyx-service-logs",
                         "enable.auto.commit": False, "enable.partition.eof": True, **librdkafka_options()})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)] if meta else []
        ends = {tp.partition: _end_offset(consumer, tp, time.monotonic() + timeout_s) for tp in parts}
        live = [tp for tp in parts if ends[tp.partition] > 0]
        if not live:
            return
        consumer.assign(live)
        left = {tp.partition for tp in live}
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not read {topic} to its end in {timeout_s:.0f} s")
            # consume() waits until it has as many records as asked, or the timeout: short waits
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        left.discard(msg.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {msg.error()}")
                if msg.partition() not in left:
                    continue
                if msg.offset() + 1 >= ends[msg.partition()]:
                    left.discard(msg.partition())
                yield msg
    finally:
        consumer.close()
