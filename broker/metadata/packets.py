"""The ``catalog`` flow as MDV's deltas (DESIGN.md section 5: a broker's inbound topic carries a
``catalog`` flow): the metadata provider sends each broker's repository the
:class:`~catalog.Delta` the filter made for it, as JSON packets of at most
:data:`~broker.config.METADATA_PACKET_DOCS` documents. A resource and what it references strongly
live in one document, so they travel in one packet, and a repository never holds a reference
without its target. ``reset``: the packet starts a full load (the provider started afresh), and
the repository drops what it held before taking it.

>>> from catalog.document import Resource
>>> d = Delta(upserts={f"urn:d{i}#r": Resource(f"urn:d{i}#r", "C", {}) for i in range(5)},
...           matched={(1, 2, f"urn:d{i}#r") for i in range(5)}, subscribed={1: ("search C c register c", "C")})
>>> parts = split(d, 2)
>>> [(len(p.upserts), len(p.matched), len(p.subscribed)) for p in parts]
[(2, 2, 1), (2, 2, 0), (1, 1, 0)]
>>> key, value, headers = packet(parts[0], reset=True)
>>> body = json.loads(value); body["kind"], body["reset"], read(body) == parts[0]
('metadata', True, True)
"""

from __future__ import annotations

import json

from broker import config
from catalog import Delta
from formats.header import PacketHeader

KIND = "metadata"
KEY = b"metadata"

Packet = tuple[bytes, bytes, list[tuple[str, bytes]]]


def split(delta: Delta, docs_per_packet: int = config.METADATA_PACKET_DOCS) -> list[Delta]:
    """``delta`` in parts of at most ``docs_per_packet`` documents' resources each (with the
    matches of those resources); what concerns no resource (schemas, subscriptions, deletions,
    lost matches) goes in the first part."""
    docs: dict[str, list[str]] = {}
    for uri in sorted(delta.upserts):
        docs.setdefault(uri.split("#", 1)[0], []).append(uri)
    groups = list(docs.values())
    first = Delta(deleted=set(delta.deleted), unmatched=set(delta.unmatched), subscribed=dict(delta.subscribed),
                  unsubscribed=set(delta.unsubscribed), schemas=list(delta.schemas),
                  matched={m for m in delta.matched if m[2] not in delta.upserts})
    parts = [first]
    for i in range(0, max(len(groups), 1), docs_per_packet):
        uris = {u for group in groups[i:i + docs_per_packet] for u in group}
        part = first if i == 0 else Delta()
        part.upserts.update({u: delta.upserts[u] for u in sorted(uris)})
        part.matched |= {m for m in delta.matched if m[2] in uris}
        if part is not first:
            parts.append(part)
    return parts


def packet(delta: Delta, reset: bool = False) -> Packet:
    """The ``catalog`` packet carrying ``delta`` to a broker's repository."""
    body = {"kind": KIND, "reset": reset, "delta": json.loads(delta.to_json())}
    return KEY, json.dumps(body).encode(), PacketHeader("catalog").to_kafka()


def read(body: dict) -> Delta:
    """The delta of a ``catalog`` packet's JSON body (:class:`ValueError` if it has none)."""
    if body.get("kind") != KIND or not isinstance(body.get("delta"), dict):
        raise ValueError(f"a catalog packet carries a metadata delta (kind {KIND!r}, a 'delta' object)")
    return Delta.from_json(json.dumps(body["delta"]))
