"""Query-flow and catalog-flow packets, and the producer that sends them.

A profile change becomes a ``query`` packet on its host broker's inbound topic and a
record on the compacted ``onyx.profiles`` topic (a tombstone on delete), keyed by
profile id; a source registration becomes a record on the compacted ``onyx.catalog`` topic
(brokers learn of sources from the metadata provider's ``catalog`` packets,
:mod:`broker.metadata.packets`). Payloads are JSON.

>>> key, value, headers = query_packet("add", ProfileRecord("p1", "/a", "b5", "onyx.deliver.s1", 1))
>>> key, json.loads(value)["op"], headers
(b'p1', 'add', [('onyx-flow', b'query')])
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from broker import topics
from broker.packets import send_all
from broker.registry.store import ProfileRecord, SourceRecord
from formats.dictionary import Dictionary
from formats.header import PacketHeader
from formats.learn import learn_dictionary

OPS = ("add", "update", "delete")

Packet = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


def query_packet(op: str, profile: ProfileRecord) -> Packet:
    """The ``query`` packet for adding, updating or deleting one profile."""
    if op not in OPS:
        raise ValueError(f"unknown query op {op!r}; one of {OPS}")
    body = {"op": op, "profile_id": profile.id, "version": profile.version, "host_broker": profile.host_broker}
    if op != "delete":
        body |= {"text": profile.text, "delivery_topic": profile.delivery_topic}
        if profile.delivery_by != "copy":  # absent: copies (what every broker did before the choice)
            body["delivery_by"] = profile.delivery_by
    return profile.id.encode(), json.dumps(body).encode(), PacketHeader("query").to_kafka()


def source_dictionary(source: SourceRecord) -> Dictionary | None:
    """Version 1 of the source's name dictionary, from the names its schema declares
    (``None`` without a schema); :class:`formats.FormatError` for a schema that is
    neither a DTD nor an XML Schema document."""
    if not source.schema:
        return None
    return learn_dictionary(source.id, [], schema=source.schema, train_zstd=False)


def catalog_packet(source: SourceRecord) -> Packet:
    """The catalog log's record of a source (and its dictionary)."""
    dictionary = source_dictionary(source)
    body = {"op": "add", "source_id": source.id, "name": source.name, "root_broker": source.root_broker,
            "schema": source.schema, "rate": source.rate, "size": source.size,
            "dictionary": dictionary.to_json() if dictionary else None}
    return source.id.encode(), json.dumps(body).encode(), PacketHeader("catalog", source_id=source.id).to_kafka()


_LOG = logging.getLogger("onyx.service.kafka")
_LOG.addHandler(logging.NullHandler())


ORIGIN = "onyx-registry"
"""Header of a profile-log record: the id of the database of the service that wrote it
(:meth:`broker.registry.store.Store.identity`)."""


class PacketSendError(RuntimeError):
    """A control packet could not be written to Kafka (the change is not registered)."""


class Sender(Protocol):
    """Where control packets go; :class:`KafkaSender` in production. A sender may also
    have ``send_batch(items)`` (``(topic, packet)`` pairs, sent together and acknowledged
    at once); :func:`send_all` uses it when there is one."""

    def send(self, topic: str, packet: Packet) -> None: ...


class KafkaSender:
    """Sends packets synchronously (acks=all), so a failure surfaces before the
    registration is committed and nothing is left half-registered.

    librdkafka's producer (confluent-kafka): a registration waits for one acknowledgement
    round trip for both its packets (about 0.5 ms on a local broker, against 1-2 ms with
    kafka-python's producer, 2-6 ms when it sent them one after the other), and a batch of
    20,000 packets is written in C threads (kafka-python's producer encoded them in Python:
    2-3 s, most of a 10,000-profile batch registration). Thread-safe: each call waits for
    the delivery reports of its own packets, whichever thread serves them."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 15.0, origin: str | None = None) -> None:
        from confluent_kafka import Producer

        from broker.kafka_auth import librdkafka_options

        self.timeout_s = timeout_s
        # Header ORIGIN on the profile log's records: whose database they come from.
        self.origin = [(ORIGIN, origin.encode())] if origin else []
        self.producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0,
                                  "socket.nagle.disable": True,
                                  # Java's (and kafka-python's) partition for a key: a profile's records
                                  # land where the ones written before this producer did (compaction)
                                  "partitioner": "murmur2_random",
                                  # a packet not acknowledged in time fails the request (PacketSendError)
                                  "message.timeout.ms": int(timeout_s * 1000),
                                  "message.max.bytes": 16 * 1024 * 1024,
                                  # librdkafka's own log (say, reconnecting) through logging, not stderr
                                  "logger": _LOG, **librdkafka_options()})

    def send(self, topic: str, packet: Packet) -> None:
        self.send_batch([(topic, packet)])

    def send_batch(self, items: Sequence[tuple[str, Packet]]) -> None:
        """Send every ``(topic, packet)``, then wait for all their acknowledgements at once
        (one flush); :class:`PacketSendError` if any was not written."""
        from confluent_kafka import KafkaException

        errors: list[str] = []
        reported: list[None] = []  # list.append is atomic: reports may be served by other threads

        def delivered(err, msg) -> None:
            if err is not None:
                errors.append(f"topic {msg.topic()}: {err.str()}")
            reported.append(None)

        deadline = time.monotonic() + self.timeout_s
        try:
            for topic, (key, value, headers) in items:
                if topic in (topics.PROFILES, topics.METADATA):
                    headers = [*headers, *self.origin]
                while True:
                    try:
                        self.producer.produce(topic, value, key, headers=headers, on_delivery=delivered)
                        break
                    except BufferError:  # the local queue is full: let some go first
                        if time.monotonic() > deadline:
                            raise PacketSendError(f"could not write a batch of {len(items)} packets to Kafka: "
                                                  f"its local queue stayed full for {self.timeout_s:.0f} s") from None
                        self.producer.poll(0.05)
            self.producer.flush(max(0.0, deadline - time.monotonic()))
            while len(reported) < len(items) and time.monotonic() < deadline:  # served by another thread
                self.producer.poll(0.01)
        except KafkaException as exc:
            raise PacketSendError(f"could not write to Kafka: {exc}") from exc
        if errors or len(reported) < len(items):
            where = f"Kafka topic {items[0][0]}" if len(items) == 1 else f"Kafka ({len(items)} packets)"
            raise PacketSendError(f"could not write to {where}: "
                                  f"{errors[0] if errors else f'no acknowledgement in {self.timeout_s:.0f} s'}")

    def close(self) -> None:
        """Wait for what is in flight, then let the producer go (its connections with it)."""
        if self.producer is not None:
            self.producer.flush(self.timeout_s)
            self.producer = None


def announce_profile(sender: Sender, op: str, profile: ProfileRecord) -> None:
    """Send a profile change to its host broker and to the compacted profile log (both
    packets at once: one wait for Kafka's acknowledgements, not two)."""
    announce_profiles(sender, op, [profile])


def announce_profiles(sender: Sender, op: str, records: Sequence[ProfileRecord]) -> None:
    """:func:`announce_profile` for many profiles, as one batch of packets (one flush of
    a :class:`KafkaSender`): each profile's query packet to its host broker and its record
    on the compacted profile log, in the order of ``records``."""
    announce_changes(sender, [(op, profile) for profile in records])


def announce_changes(sender: Sender, changes: Sequence[tuple[str, ProfileRecord]]) -> None:
    """:func:`announce_profiles` for changes of any ops (``(op, record)`` pairs, in order)."""
    items: list[tuple[str, Packet]] = []
    for op, profile in changes:
        packet = query_packet(op, profile)
        key, value, headers = packet
        items.append((topics.broker_topic(profile.host_broker), packet))
        items.append((topics.PROFILES, (key, None if op == "delete" else value, headers)))
    if items:
        send_all(sender, items)


def announce_source(sender: Sender, source: SourceRecord) -> None:
    """Write a new source to the compacted catalog log (the archive keeps its history; brokers
    learn of it from the metadata provider, :mod:`broker.metadata`)."""
    sender.send(topics.CATALOG, catalog_packet(source))
