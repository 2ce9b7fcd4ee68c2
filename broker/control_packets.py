"""Query-flow and catalog-flow packets, and the producer that sends them.

A profile change becomes a ``query`` packet on its host broker's inbound topic and a
record on the compacted ``onyx.profiles`` topic (a tombstone on delete), keyed by
profile id; a source registration becomes a ``catalog`` packet on its root broker's
inbound topic and a record on the compacted ``onyx.catalog`` topic. Payloads are JSON.

>>> key, value, headers = query_packet("add", ProfileRecord("p1", "/a", "b5", "onyx.deliver.s1", 1))
>>> key, json.loads(value)["op"], headers
(b'p1', 'add', [('onyx-flow', b'query')])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from broker import topics
from broker.store import ProfileRecord, SourceRecord
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
    return profile.id.encode(), json.dumps(body).encode(), PacketHeader("query").to_kafka()


def source_dictionary(source: SourceRecord) -> Dictionary | None:
    """Version 1 of the source's name dictionary, from the names its schema declares
    (``None`` without a schema); :class:`formats.FormatError` for a schema that is
    neither a DTD nor an XML Schema document."""
    if not source.schema:
        return None
    return learn_dictionary(source.id, [], schema=source.schema, train_zstd=False)


def catalog_packet(source: SourceRecord) -> Packet:
    """The ``catalog`` packet announcing a source (and its dictionary, which travels
    with the catalog, never inside messages) to its root broker."""
    dictionary = source_dictionary(source)
    body = {"op": "add", "source_id": source.id, "name": source.name, "root_broker": source.root_broker,
            "schema": source.schema, "rate": source.rate, "size": source.size,
            "dictionary": dictionary.to_json() if dictionary else None}
    return source.id.encode(), json.dumps(body).encode(), PacketHeader("catalog", source_id=source.id).to_kafka()


class PacketSendError(RuntimeError):
    """A control packet could not be written to Kafka (the change is not registered)."""


class Sender(Protocol):
    """Where control packets go; :class:`KafkaSender` in production. A sender may also
    have ``send_batch(items)`` (``(topic, packet)`` pairs, sent together and acknowledged
    at once); :func:`send_all` uses it when there is one."""

    def send(self, topic: str, packet: Packet) -> None: ...


class KafkaSender:
    """Sends packets synchronously (acks=all), so a failure surfaces before the
    registration is committed and nothing is left half-registered."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 15.0) -> None:
        from kafka import KafkaProducer

        from broker.kafka_auth import client_options

        self.timeout_s = timeout_s
        self.producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", retries=3,
                                      max_block_ms=int(timeout_s * 1000), **client_options())

    def send(self, topic: str, packet: Packet) -> None:
        from kafka.errors import KafkaError

        key, value, headers = packet
        try:
            self.producer.send(topic, key=key, value=value, headers=headers).get(timeout=self.timeout_s)
        except KafkaError as exc:
            raise PacketSendError(f"could not write to Kafka topic {topic}: {exc}") from exc

    def send_batch(self, items: Sequence[tuple[str, Packet]]) -> None:
        """Send every ``(topic, packet)``, then wait for all their acknowledgements at once
        (one flush); :class:`PacketSendError` if any was not written."""
        from kafka.errors import KafkaError

        futures = []
        try:
            for topic, (key, value, headers) in items:
                futures.append(self.producer.send(topic, key=key, value=value, headers=headers))
            self.producer.flush(timeout=self.timeout_s)
            for future in futures:
                future.get(timeout=self.timeout_s)
        except KafkaError as exc:
            raise PacketSendError(f"could not write a batch of {len(items)} packets to Kafka: {exc}") from exc

    def close(self) -> None:
        self.producer.close()


def send_all(sender: Sender, items: Sequence[tuple[str, Packet]]) -> None:
    """Send ``(topic, packet)`` pairs as one batch if ``sender`` can, else one by one."""
    batch = getattr(sender, "send_batch", None)
    if batch is not None:
        batch(items)
        return
    for topic, packet in items:
        sender.send(topic, packet)


def announce_profile(sender: Sender, op: str, profile: ProfileRecord) -> None:
    """Send a profile change to its host broker and to the compacted profile log."""
    packet = query_packet(op, profile)
    sender.send(topics.broker_topic(profile.host_broker), packet)
    key, value, headers = packet
    sender.send(topics.PROFILES, (key, None if op == "delete" else value, headers))


def announce_profiles(sender: Sender, op: str, records: Sequence[ProfileRecord]) -> None:
    """:func:`announce_profile` for many profiles, as one batch of packets (one flush of
    a :class:`KafkaSender`): each profile's query packet to its host broker and its record
    on the compacted profile log, in the order of ``records``."""
    items: list[tuple[str, Packet]] = []
    for profile in records:
        packet = query_packet(op, profile)
        key, value, headers = packet
        items.append((topics.broker_topic(profile.host_broker), packet))
        items.append((topics.PROFILES, (key, None if op == "delete" else value, headers)))
    if items:
        send_all(sender, items)


def announce_source(sender: Sender, source: SourceRecord) -> None:
    """Send a new source to its root broker and to the compacted catalog."""
    packet = catalog_packet(source)
    sender.send(topics.broker_topic(source.root_broker), packet)
    sender.send(topics.CATALOG, packet)
