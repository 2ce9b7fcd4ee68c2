"""Reading Kafka from the registration service: the dead-letter topic's last records (for the
console) and one delivery topic's records of one profile from an offset on (a profile's
deliveries, for its event stream: the records :func:`broker.packets.delivers_to` it).

Both are librdkafka consumers without a group (``assign``, no commits): the reader says where
to start, so a reconnecting client starts where it left off.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, NamedTuple

from broker.packets import delivers_to


def _consumer(bootstrap: str):
    from confluent_kafka import Consumer

    from broker.kafka_auth import librdkafka_options

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "onyx-service-reads", "enable.auto.commit": False,
                     "enable.partition.eof": False, **librdkafka_options()})


class KafkaRecord(NamedTuple):
    """One record, as the service shows or forwards it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def _record(m) -> KafkaRecord:
    return KafkaRecord(m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                       list(m.headers() or ()))


def last_records(bootstrap: str, topic: str, n: int, timeout: float = 5.0) -> list[KafkaRecord]:
    """The last ``n`` records of every partition of ``topic`` (newest first, at most ``n``);
    none if the topic does not exist."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap)
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        parts, ends = [], {}
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
            if high > low:
                parts.append(TopicPartition(topic, p, max(low, high - n)))
                ends[p] = high
        if not parts:
            return []
        consumer.assign(parts)
        out: list[KafkaRecord] = []
        deadline = time.monotonic() + timeout
        while ends and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is None:
                    out.append(_record(m))
                    if m.offset() + 1 >= ends.get(m.partition(), 0):
                        ends.pop(m.partition(), None)
        return sorted(out, key=lambda r: r.timestamp_ms, reverse=True)[:n]
    finally:
        consumer.close()


EVENT_ID = r"^(|\d{1,18}|\d{1,9}:(-1|\d{1,18})(,\d{1,9}:(-1|\d{1,18}))*)$"
"""What an event id of :class:`Position` looks like (a Kafka offset is an int64), or nothing."""


class Position(dict):
    """Where a reader of one topic is: partition -> the next offset to read. Written as an SSE
    event id it is the offset of the last record read (``"17"``; ``"0:17,1:4"`` for a topic
    with several partitions), so ``Last-Event-ID`` resumes right after it.

    >>> p = Position.parse("17"); p, p.event_id()
    ({0: 18}, '17')
    >>> Position.parse("0:17,1:-1").event_id()
    '0:17,1:-1'
    """

    @classmethod
    def parse(cls, text: str) -> "Position":
        """The position after the record an event id (matching :data:`EVENT_ID`) names."""
        if ":" not in text:
            return cls({0: int(text) + 1})
        return cls({int(p): int(o) + 1 for p, _, o in (part.partition(":") for part in text.split(","))})

    def event_id(self) -> str:
        """The SSE event id of this position."""
        if set(self) == {0}:
            return str(self[0] - 1)
        return ",".join(f"{p}:{o - 1}" for p, o in sorted(self.items()))


def follow(bootstrap: str, topic: str, profile_id: str, start: Position | None, stop: Any,
           idle: float = 1.0) -> Iterator[tuple[KafkaRecord | None, Position]]:
    """Records of ``topic`` for ``profile_id`` (keyed by it, or listing it in their
    ``onyx-profiles`` header: :func:`broker.packets.delivers_to`), from ``start`` on (``None``: from the end,
    only what arrives from now on), each with the position after it; ``(None, position)``
    after ``idle`` seconds without one (so the caller may send a keep-alive or stop). Ends
    when ``stop()`` is true."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        partitions = sorted(meta.partitions) if meta is not None and meta.error is None else [0]
        position = Position()
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            position[p] = high if start is None else max(low, start.get(p, low))
        consumer.assign([TopicPartition(topic, p, o) for p, o in position.items()])
        quiet_since = time.monotonic()
        while not stop():
            got = False
            for m in consumer.consume(200, timeout=0.2):
                if m.error() is not None:
                    continue
                position[m.partition()] = m.offset() + 1
                if delivers_to(profile_id, m.key(), m.headers()):
                    got = True
                    yield _record(m), Position(position)
            if got:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= idle:
                quiet_since = time.monotonic()
                yield None, Position(position)
    finally:
        consumer.close()
