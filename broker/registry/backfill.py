"""Backfill: a profile's matches among the archived messages before its live deliveries
start, delivered on its delivery topic, with no gap at the seam.

The seam is where live deliveries are certain. A profile is live for a source once its
routing delta has reached the root of the source's tree (every broker below on the way
applied it first, and its host holds the profile): from then on, a message published to
the source is routed to the host and matched there. So the service waits until the
state log of each source's root (:mod:`broker.control.state_log`: the control packets a
broker applied, in order) shows this profile at its current version, and only then
reads the source topics' end offsets: that is the seam. Every record below it comes from
the archive (once the archive writer has archived up to it), every record at or after it
is delivered live; records below the seam that were also delivered live arrive twice,
with the same ``onyx-message-id``, as the at-least-once guarantee allows. Backfilled
records carry the header :data:`BACKFILL_HEADER`.

>>> mentions({"kind": "route", "root": "b1", "deltas": [], "covered": [["p1", 2]]}, "b1", "p1", 2)
True
>>> mentions({"op": "add", "profile_id": "p1", "version": 1}, "b1", "p1", 2)
False
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker import packets, topics
from broker.kafka_auth import librdkafka_options
from broker.registry.store import ProfileRecord
from formats.header import PacketHeader
from yfilter.flwr import is_flwr

BACKFILL_HEADER = "onyx-backfill"
"""Header of a record delivered from the archive (value ``1``)."""


class BackfillError(RuntimeError):
    """The seam could not be found in time (the brokers or the archive writer lag)."""


@dataclass(frozen=True)
class Seam:
    """Per ``(source, partition)``: the first offset delivered live."""

    offsets: dict[tuple[str, int], int]

    def to_json(self) -> dict[str, int]:
        return {f"{s}:{p}": o for (s, p), o in sorted(self.offsets.items())}


def mentions(packet: Mapping, root: str, profile_id: str, version: int) -> bool:
    """Does a state-log packet of ``root`` show ``profile_id`` at ``version`` or newer: a
    route packet of ``root``'s tree that says the profile is covered (its ``covered``
    list: summaries carry conjunctions, not profiles, so every broker on the way says
    which profiles the deltas it sends, or sent before, stand for), or (at its host)
    its query packet."""
    if packet.get("kind") == "route":
        return packet.get("root") == root and any(
            c[0] == profile_id and int(c[1]) >= version for c in packet.get("covered", ()))
    return packet.get("profile_id") == profile_id and int(packet.get("version", -1)) >= version


class SeamFinder:
    """Kafka reads and writes of a backfill, with one consumer and one producer."""

    def __init__(self, bootstrap_servers: str) -> None:
        from confluent_kafka import Consumer, Producer

        options = librdkafka_options()
        self.consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "onyx-backfill",
                                  "enable.auto.commit": False, "enable.partition.eof": True, **options})
        self.producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, **options})

    def close(self) -> None:
        self.producer.flush(10)
        self.consumer.close()

    def wait_live(self, profile: ProfileRecord, roots: Iterable[str], since_ms: int, timeout_s: float) -> None:
        """Return once the state log of every broker in ``roots`` shows ``profile`` (read
        from its records at or after ``since_ms``); :class:`BackfillError` after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for root in sorted(set(roots)):
            while not self._logged(root, profile, since_ms):
                if time.monotonic() > deadline:
                    raise BackfillError(f"broker {root} has not applied profile {profile.id} (version "
                                        f"{profile.version}) within {timeout_s:.0f} s: the brokers lag; try again")
                time.sleep(0.5)

    def _logged(self, root: str, profile: ProfileRecord, since_ms: int) -> bool:
        from confluent_kafka import KafkaError, TopicPartition

        topic = topics.state_topic(root)
        (start,) = self.consumer.offsets_for_times([TopicPartition(topic, 0, max(since_ms, 0))], timeout=10)
        low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        first = start.offset if start.offset >= 0 else high
        if first >= high:
            return False
        self.consumer.assign([TopicPartition(topic, 0, max(first, low))])
        try:
            while True:
                msg = self.consumer.poll(5)
                if msg is None:
                    return False
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return False
                    raise BackfillError(f"reading {topic}: {msg.error()}")
                try:
                    packet = json.loads(msg.value() or b"null")
                except ValueError:
                    continue
                if isinstance(packet, dict) and mentions(packet, root, profile.id, profile.version):
                    return True
                if msg.offset() + 1 >= high:
                    return False
        finally:
            self.consumer.unassign()

    def seam(self, sources: Iterable[str]) -> Seam:
        """The end offsets of the sources' topics now."""
        from confluent_kafka import TopicPartition

        names = [topics.source_topic(s) for s in sorted(set(sources))]
        meta = self.consumer.list_topics(timeout=10).topics
        out = {}
        for source, name in zip(sorted(set(sources)), names):
            if name not in meta:
                continue
            for p in sorted(meta[name].partitions):
                out[(source, p)] = self.consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
        return Seam(out)

    def deliver(self, profile: ProfileRecord, found) -> int:
        """Produce each replayed match (:class:`archive.replay.Replayed`) to the profile's
        delivery topic as a live delivery would be (FLWR: one record per result; by reference:
        the reference); returns the records written."""
        n = 0
        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(err.str())

        by_reference = profile.delivery_by == "reference" and not is_flwr(profile.text)
        for r in found:
            rec = r.record
            headers = PacketHeader("xml", format="text", source_id=rec.source, message_id=rec.message_id).to_kafka()
            headers.append((BACKFILL_HEADER, b"1"))
            headers.append((packets.PROFILES, profile.id.encode()))  # the profile's alone, as a live record may be
            docs = r.results or (r.data,)
            if by_reference:
                headers.append((packets.DELIVERY, packets.REFERENCE))
                docs = (packets.reference(rec.message_id, rec.source, profile.id),)
            for doc in docs:
                self.producer.produce(profile.delivery_topic, doc, profile.id.encode(), headers=headers,
                                      on_delivery=delivered)
                self.producer.poll(0)
                n += 1
        left = self.producer.flush(30)
        if left or errors:
            raise BackfillError(f"Kafka did not take {left + len(errors)} backfilled records "
                                f"({'; '.join(errors[:3]) or 'timeout'}): ask again (duplicates are de-duplicated "
                                "by onyx-message-id)")
        return n

