"""After a crash of the registration service: make the brokers and the database agree.

A change is stored in one database transaction, and its query packets (to the host broker
and to the compacted profile log ``onyx.profiles``) are written to Kafka *inside* it, before
the commit, so that a failed send leaves nothing stored. A process killed between the send
and the commit leaves the opposite: brokers that were told of a change the database does
not have (a profile live at its host that nobody registered, an update or a deletion the
subscriber was never told was made). At start the service reads the profile log to its end
(the last record per profile: what the brokers were last told) and, where the database
disagrees, tells the brokers again what the database holds, at a newer version, so every
host applies it:

* told *live* but not stored: the registration never committed: a deletion;
* told of a newer version than the stored one: the update (or move) never committed: the
  stored version again (a deletion at the old host first when the host differs);
* told *deleted* (a tombstone) but still stored: the deletion never committed: the stored
  profile again.

Afterwards a profile is either fully registered (stored, and live at its host) or absent.

>>> told = {"p1": ProfileRecord("p1", "/a", "b2", "t", 1)}          # stored: nothing
>>> [(op, r.id, r.version) for op, r in repairs(told, {})]
[('delete', 'p1', 2)]
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from broker import topics
from broker.registry.control_packets import ORIGIN, Sender, announce_changes
from broker.registry.store import ProfileRecord, Store

log = logging.getLogger("onyx.service.recovery")

Repair = tuple[str, ProfileRecord]  # (op, record) as announce_changes takes them


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


def announced(bootstrap_servers: str, origin: str, timeout_s: float = 60.0) -> dict[str, ProfileRecord | None]:
    """The last record per profile on the profile log (``None``: a tombstone) written by
    the service of database ``origin`` (its :data:`~broker.registry.control_packets.ORIGIN`
    header): other services' profiles on the same Kafka are theirs to recover."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from broker.kafka_auth import librdkafka_options

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "onyx-recovery",
                         "enable.auto.commit": False, "enable.partition.eof": True, **librdkafka_options()})
    out: dict[str, ProfileRecord | None] = {}
    mine = origin.encode()
    try:
        meta = consumer.list_topics(topics.PROFILES, timeout=timeout_s).topics.get(topics.PROFILES)
        parts = [TopicPartition(topics.PROFILES, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)] if meta else []
        ends = {tp.partition: _end_offset(consumer, tp, time.monotonic() + timeout_s) for tp in parts}
        live = [tp for tp in parts if ends[tp.partition] > 0]
        if not live:
            return out
        consumer.assign(live)
        left = {tp.partition for tp in live}
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not read {topics.PROFILES} to its end in {timeout_s:.0f} s")
            # consume() waits until it has as many records as asked, or the timeout: short waits
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        left.discard(msg.partition())
                        continue
                    raise RuntimeError(f"reading {topics.PROFILES}: {msg.error()}")
                if msg.offset() + 1 >= ends[msg.partition()]:
                    left.discard(msg.partition())
                if (ORIGIN, mine) not in (msg.headers() or ()):
                    continue  # another service's (or written before records said whose they were)
                pid = msg.key().decode()
                out[pid] = None if msg.value() is None else _record(json.loads(msg.value()))
    finally:
        consumer.close()
    return out


def _record(body: dict) -> ProfileRecord | None:
    if body.get("op") == "delete":
        return None
    return ProfileRecord(body["profile_id"], body["text"], body["host_broker"], body["delivery_topic"],
                         int(body["version"]))


def repairs(told: Mapping[str, ProfileRecord | None], stored: Mapping[str, ProfileRecord]) -> list[Repair]:
    """What to tell the brokers so that they hold what the database holds (see the module
    docstring); the stored records of the last two kinds come back at their new version."""
    out: list[Repair] = []
    for pid, last in sorted(told.items()):
        mine = stored.get(pid)
        if last is not None and mine is None:
            out.append(("delete", _at(last, last.version + 1)))
        elif last is not None and mine.version < last.version:
            version = last.version + 1
            if last.host_broker != mine.host_broker:
                out.append(("delete", _at(last, version)))
                version += 1
            out.append(("update", _at(mine, version)))
        elif last is None and mine is not None:
            # The tombstone does not say the deleted version: past any the hosts may have seen.
            out.append(("add", _at(mine, mine.version + 2)))
    return out


def _at(record: ProfileRecord, version: int) -> ProfileRecord:
    return ProfileRecord(record.id, record.text, record.host_broker, record.delivery_topic, version,
                         record.subscriber_id)


def recover(store: Store, sender: Sender, told: Mapping[str, ProfileRecord | None]) -> list[Repair]:
    """Apply :func:`repairs`: the stored profiles that come back get their new version in
    the database, in one transaction around the packets (as any change). Returns them."""
    stored = {p.id: p for p in store.list_profiles()}
    fixes = repairs(told, stored)
    if not fixes:
        return []
    with store.transaction() as tx:
        for op, record in fixes:
            if op != "delete":
                tx.update_profile(record)
        announce_changes(sender, fixes)
    for op, record in fixes:
        log.warning("recovered profile %s: the brokers were told of a change the database never committed; "
                    "sent %s at version %d", record.id, op, record.version)
    return fixes
