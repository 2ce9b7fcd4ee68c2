"""A broker's state log: the control packets it applied, in order, on ``onyx.state.<broker>``.

A broker's control state (:class:`~broker.control.state.BrokerState`: its profiles, routing
tables, catalog) is what the control packets of its inbound topic made of it. The data
plane runs on executors, in whichever Python worker a task lands, so every worker keeps
its own copy of the brokers it serves, and the copies must agree. The task that meets a
control packet applies it at once (it takes effect before the messages after it in the
partition) and, once the packet's own output is in Kafka, appends a copy of the packet to
the broker's state log — the same record, plus the header :data:`APPLIED_AT` saying
where it came from. Before a task uses its copy it reads the log from where the copy
stopped (:class:`LogReader`), so a packet applied in one worker reaches every other
worker before their next task for that broker. A packet is applied by place (topic,
partition, offset): meeting it again — in the log, or in a replayed batch — changes
nothing. The driver follows the logs the same way for ``onyx status``
(:class:`Follower`), and a restarted broker rebuilds its state from its log: Kafka holds
it, so nothing but Kafka has to survive a crash.

>>> rec = log_record("b4", Packet("onyx.broker.b4", 0, 17, "query", b"p1", b"{}", [("onyx-flow", b"query")]))
>>> rec[0], dict(rec[3])[APPLIED_AT]
('onyx.state.b4', b'onyx.broker.b4:0:17')
>>> packet_of(rec[1], rec[2], rec[3]).coordinates
('onyx.broker.b4', 0, 17)
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, Callable, Iterator, NamedTuple

from broker import topics
from broker.packets import Row

APPLIED_AT = "onyx-applied-at"
"""Header of a state-log record: ``topic:partition:offset`` of the packet it copies
(topic names cannot hold ``:``)."""


class Packet(NamedTuple):
    """One control packet as it was read: where from (its identity), and its record."""

    topic: str
    partition: int
    offset: int
    flow: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]

    @property
    def coordinates(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.offset


def log_record(broker: str, packet: Packet) -> Row:
    """The state-log record of a packet ``broker`` applied."""
    at = f"{packet.topic}:{packet.partition}:{packet.offset}".encode()
    headers = [(k, v) for k, v in packet.headers if k != APPLIED_AT] + [(APPLIED_AT, at)]
    return topics.state_topic(broker), packet.key, packet.value, headers


def packet_of(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> Packet:
    """The packet a state-log record copies."""
    at = dict(headers).get(APPLIED_AT, b"").decode()
    topic, partition, offset = at.rsplit(":", 2)
    flow = dict(headers).get("onyx-flow", b"").decode()
    return Packet(topic, int(partition), int(offset), flow, key, value,
                  [(k, v) for k, v in headers if k != APPLIED_AT])


def _transient(error) -> bool:
    """An error that goes away by itself: a leader being elected or moved, a timeout, or
    (``_UNKNOWN_PARTITION``) a topic another broker has just created whose partition this
    client's metadata does not hold yet (seen on a 3-node Kafka: a broker application
    starting beside the others ended with it)."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in (KafkaError.NOT_LEADER_FOR_PARTITION,
                                                 KafkaError.LEADER_NOT_AVAILABLE,
                                                 KafkaError._UNKNOWN_PARTITION)


class LogReader:
    """Reads brokers' state logs (one librdkafka consumer, no consumer group)."""

    def __init__(self, conf: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({**conf, "group.id": "onyx-state-reader", "enable.auto.commit": False,
                                  "enable.partition.eof": True, "fetch.wait.max.ms": 5})

    def ends(self, brokers: list[str]) -> dict[str, int]:
        """Per broker, the offset the next record of its log will get (0: empty or
        missing), in one request to Kafka (ListOffsets for "latest", timestamp -1)."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        deadline = time.monotonic() + 30
        while True:
            try:
                asked = [TopicPartition(topics.state_topic(b), 0, -1) for b in brokers]
                got = self.consumer.offsets_for_times(asked, timeout=10)
            except KafkaException as exc:
                if not _transient(exc.args[0]) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # a new topic's leader is being elected, or Kafka is moving it
                continue
            out, retry = {}, False
            for broker, tp in zip(brokers, got):
                if tp.error is None:
                    out[broker] = max(tp.offset, 0)
                elif tp.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    out[broker] = 0
                elif _transient(tp.error):
                    retry = True
                else:
                    raise KafkaException(tp.error)
            if not retry:
                return out
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "state logs have no leader"))
            time.sleep(0.1)

    def read(self, broker: str, start: int, end: int) -> Iterator[Packet]:
        """The packets of ``broker``'s log from offset ``start`` up to (not including) ``end``."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if start >= end:
            return
        self.consumer.assign([TopicPartition(topics.state_topic(broker), 0, start)])
        try:
            at = start
            while at < end:
                # consume() waits for as many records as asked (or the timeout): ask for what is left.
                for msg in self.consumer.consume(min(1000, end - at), timeout=10):
                    if msg.error() is not None:
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaException(msg.error())
                    if msg.offset() >= end:
                        return
                    at = msg.offset() + 1
                    yield packet_of(msg.key(), msg.value(), list(msg.headers() or ()))
        finally:
            self.consumer.unassign()

    def close(self) -> None:
        self.consumer.close()


class Follower:
    """Keeps copies of brokers' states in step with their logs, in a background thread
    (the driver's view for ``onyx status``). ``apply(broker, packet)`` applies one packet
    to the copy; reads and status happen under :attr:`lock`."""

    def __init__(self, reader: LogReader, brokers: list[str], apply: Callable[[str, Packet], None],
                 every_s: float = 0.5) -> None:
        self.reader = reader
        self.position = dict.fromkeys(brokers, 0)
        self.apply = apply
        self.every_s = every_s
        self.lock = threading.Lock()
        self.error: Exception | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="onyx-state-follower", daemon=True)

    def start(self) -> "Follower":
        self.catch_up()
        self.thread.start()
        return self

    def catch_up(self) -> None:
        grown = False
        for broker, end in self.reader.ends(list(self.position)).items():
            at = self.position[broker]
            for packet in self.reader.read(broker, at, end):
                with self.lock:
                    self.apply(broker, packet)
                grown = True
            self.position[broker] = max(at, end)
        if grown:  # the states' objects need no more garbage collection passes (see broker.dataplane.executor)
            gc.freeze()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.catch_up()
                self.error = None
            except Exception as exc:  # Kafka away for a while: the view is stale, said in status
                self.error = exc

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(15)
        self.reader.close()
