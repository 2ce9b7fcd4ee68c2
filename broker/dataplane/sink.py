"""Where a broker's output goes: Kafka, through librdkafka (confluent-kafka), from the executor.

Every row a plan makes — a message forwarded down a link, a delivery, a routing delta,
a dead letter — is a Kafka record ``(topic, key, value, headers)``. The executor writes
them itself instead of handing them back to Spark's Kafka sink: no Arrow batch of
output rows is built in Python and converted again in the JVM, the producer's batching
and compression run in librdkafka's own threads, and a link row leaves as soon as it is
routed, before the local deliveries of the same messages are matched. A task
:meth:`flushes <KafkaSink.flush>` before it returns, so nothing a batch wrote is still
in flight when Spark commits the batch's offsets (at-least-once, as with Spark's sink).
A record Kafka can never take (too large for the topic, not allowed by its ACLs)
becomes a dead letter naming it and Kafka's reason; since Kafka refuses a whole batch of
records for one that is too large, the refused records are first sent again one by one,
so that only the one at fault is a dead letter. Any other failure is retried by the
producer (idempotent: nothing is written twice) and, if it lasts, fails the batch, which
Spark runs again.

One producer per Python worker process and configuration (:func:`sink_for`), reused by
every task that process runs.
"""

from __future__ import annotations

from typing import Iterable

from broker import topics
from broker.packets import Row, dead_letter


class SinkError(RuntimeError):
    """Kafka refused or lost records a broker wrote (the batch fails and is run again)."""


class KafkaSink:
    """A producer with the counts a broker reports (records and bytes written)."""

    def __init__(self, conf: dict[str, object]) -> None:
        from confluent_kafka import Producer

        self.errors: list[str] = []
        self.refused: list[tuple[Row, str]] = []  # records Kafka did not take, and why
        # One delivery callback for the producer, not one per record (only failures call it:
        # delivery.report.only.error).
        self.producer = Producer({**conf, "error_cb": self._error, "on_delivery": self._delivered})
        self.records = 0
        self.bytes = 0

    def _error(self, err) -> None:
        if err.fatal():
            self.errors.append(f"fatal Kafka producer error: {err}")

    def _delivered(self, err, msg) -> None:
        if err is None:
            return
        if err.retriable() or msg.topic() == topics.DEAD_LETTER:
            self.errors.append(f"record to {msg.topic()} not written: {err}")
        else:  # this record (or one in its batch) can never be written: too large, not allowed
            self.refused.append(((msg.topic(), msg.key(), msg.value(), list(msg.headers() or ())), err.str()))

    def send(self, rows: Iterable[Row]) -> None:
        """Queue rows for writing (the producer sends them in the background)."""
        produce = self.producer.produce
        for topic, key, value, headers in rows:
            while True:
                try:
                    produce(topic, value, key, headers=headers)
                    break
                except BufferError:  # the local queue is full: let librdkafka send some first
                    self.producer.poll(0.05)
            self.records += 1
            self.bytes += len(value or b"") + len(key or b"")
        self.producer.poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until everything queued is written; :class:`SinkError` if it was not."""
        left = self.producer.flush(timeout)
        if self.refused and not left:
            left = self._one_by_one(timeout)
        if left:
            self.errors.append(f"{left} records still unwritten after {timeout:.0f} s")
        if self.errors:
            errors, self.errors = self.errors, []
            raise SinkError("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))


    def _one_by_one(self, timeout: float) -> int:
        """Send the refused records again, each in a batch of its own; the ones refused
        again become dead letters (without their value: it is what did not fit). Returns
        how many records are still unwritten."""
        again, self.refused = self.refused, []
        for (topic, key, value, headers), _ in again:
            self.producer.produce(topic, value, key, headers=headers)
            left = self.producer.flush(timeout)
            if left:
                return left
        letters = [dead_letter(f"Kafka refused a record for {topic}: {why}", topic, key, None, headers)
                   for (topic, key, _, headers), why in self.refused]
        self.refused = []
        self.send(letters)
        return self.producer.flush(timeout)


_SINKS: dict[tuple, KafkaSink] = {}


def sink_for(conf: dict[str, object]) -> KafkaSink:
    """The producer of this process for ``conf`` (made on first use)."""
    key = tuple(sorted(conf.items()))
    sink = _SINKS.get(key)
    if sink is None:
        sink = _SINKS[key] = KafkaSink(conf)
    return sink


def close_sink(conf: dict[str, object]) -> None:
    """Flush and drop this process's producer for ``conf``, if it has one."""
    sink = _SINKS.pop(tuple(sorted(conf.items())), None)
    if sink is not None:
        sink.producer.flush(5)


def producer_conf(bootstrap_servers: str, linger_ms: float, compression: str) -> dict[str, object]:
    """librdkafka settings of a broker's producer: every record acknowledged by all
    in-sync replicas, idempotent (a retried send is not written twice), and records up
    to the size a broker accepts.

    >>> producer_conf("k:9092", 2, "lz4")["enable.idempotence"]
    True
    """
    from broker.kafka_auth import librdkafka_options

    return {"bootstrap.servers": bootstrap_servers, "linger.ms": linger_ms, "compression.type": compression,
            "acks": "all", "enable.idempotence": True, "message.max.bytes": 16 * 1024 * 1024,
            "queue.buffering.max.kbytes": 1024 * 1024, "delivery.report.only.error": True,
            **librdkafka_options()}
