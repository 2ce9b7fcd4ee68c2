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

import dataclasses
import json
import logging
from collections.abc import Mapping

from broker import topics
from broker.compacted import read_to_end
from broker.registry.control_packets import ORIGIN, Sender, announce_changes
from broker.registry.store import ProfileRecord, Store

log = logging.getLogger("onyx.service.recovery")

Repair = tuple[str, ProfileRecord]  # (op, record) as announce_changes takes them


def announced(bootstrap_servers: str, origin: str, timeout_s: float = 60.0) -> dict[str, ProfileRecord | None]:
    """The last record per profile on the profile log (``None``: a tombstone) written by
    the service of database ``origin`` (its :data:`~broker.registry.control_packets.ORIGIN`
    header): other services' profiles on the same Kafka are theirs to recover."""
    out: dict[str, ProfileRecord | None] = {}
    mine = origin.encode()
    for msg in read_to_end(bootstrap_servers, topics.PROFILES, timeout_s):
        if (ORIGIN, mine) not in (msg.headers() or ()):
            continue  # another service's (or written before records said whose they were)
        pid = msg.key().decode()
        out[pid] = None if msg.value() is None else _record(json.loads(msg.value()))
    return out


def _record(body: dict) -> ProfileRecord | None:
    if body.get("op") == "delete":
        return None
    return ProfileRecord(body["profile_id"], body["text"], body["host_broker"], body["delivery_topic"],
                         int(body["version"]), delivery_by=str(body.get("delivery_by", "copy")))


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
    return dataclasses.replace(record, version=version)


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
