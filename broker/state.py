"""A broker's control state and the control flows that change it.

Everything a broker knows besides the messages themselves: the overlay, the catalog
of sources, the profiles it hosts, and one routing table per broadcast tree. The
``query`` and ``catalog`` flows of its inbound topic change it (in offset order,
before the data of the same micro-batch); every change bumps :attr:`version`, which
names the compiled data plan that executors cache.

Query packets come in two kinds (JSON, field ``kind``):

* ``profile`` (from the registration service): ``op`` add/update/delete of a profile
  hosted here. The profile's routing query (``Map()``) goes up every broadcast tree
  as a routing delta.
* ``route`` (from a child broker): a routing delta for the tree of ``root`` received
  on the link from ``from``. It is applied (``Collect()``) and, if it changed
  anything, forwarded to this broker's parent in that tree (``Aggregate()``).

Catalog packets announce a source, with the name dictionary of its schema if it has
one; the packet travels down the source's tree (so every broker can decode the
dictionary-encoded formats), and a new root broker means a new tree, so every
broker sends its profiles' routing queries up it.

Every packet applied, whether it changed anything or not, counts in :attr:`seq`. A
packet read from Kafka is applied with its place (``at``: topic, partition, offset); the
state keeps the last place applied per topic partition and skips a packet at or before
it, so a replayed batch, or a copy catching up from the broker's state log
(:mod:`broker.state_log`) that meets packets it already applied, changes nothing.

>>> s = BrokerState("b4", __import__("routing.overlay").overlay.builtin("figure4"))
>>> body = {"op": "add", "profile_id": "p1", "version": 1, "text": "/nitf//hl1", "delivery_topic": "t"}
>>> rows = s.apply("query", b"p1", json.dumps(body).encode(), [], "onyx.broker.b4")
>>> [r[0] for r in rows], s.seq, s.version, sorted(s.profiles)
(['onyx.broker.b2'], 1, 1, ['p1'])
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from typing import Callable

from broker import topics
from broker.packets import Row, dead_letter
from formats.dictionary import Dictionary
from formats.header import PacketHeader
from routing.dnf import map_profile
from routing.overlay import Overlay
from routing.table import Delta, RoutingTable


class ControlError(ValueError):
    """A control packet that cannot be applied (bad JSON, unknown kind or broker)."""


@dataclass
class LocalProfile:
    version: int
    text: str
    delivery_topic: str


@dataclass
class BrokerState:
    """The control state of broker ``broker`` in ``overlay`` (see module docstring)."""

    broker: str
    overlay: Overlay
    profiles: dict[str, LocalProfile] = field(default_factory=dict)
    tombstones: dict[str, int] = field(default_factory=dict)  # deleted profile -> version
    tables: dict[str, RoutingTable] = field(default_factory=dict)  # root -> table
    dictionaries: dict[str, dict] = field(default_factory=dict)  # source -> newest Dictionary.to_json()
    version: int = 0  # changes made (names the state in status and snapshots)
    seq: int = 0  # packets applied, changes or not
    applied: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) -> last offset
    on_profile: Callable[[str, LocalProfile | None], None] | None = field(default=None, repr=False, compare=False)
    """Told of every change of a hosted profile (``None``: deleted); the data plane keeps
    its engine of local profiles in step with it."""

    def table(self, root: str) -> RoutingTable:
        if root not in self.tables:
            self.tables[root] = RoutingTable(self.broker)
        return self.tables[root]

    # -- control flows -------------------------------------------------------

    def is_applied(self, at: tuple[str, int, int]) -> bool:
        """Whether the packet at ``at`` (topic, partition, offset) was applied already."""
        return self.applied.get(at[:2], -1) >= at[2]

    def apply(self, flow: str, key: bytes | None, value: bytes | None,
              headers: list[tuple[str, bytes]], origin: str,
              at: tuple[str, int, int] | None = None) -> list[Row]:
        """Apply one control packet; returns the rows it causes (deltas to the parent,
        catalog packets to children, or a dead letter if the packet is bad). A packet
        ``at`` a place already applied is skipped (no rows)."""
        if at is not None:
            if self.is_applied(at):
                return []
            self.applied[at[:2]] = at[2]
        self.seq += 1
        try:
            body = json.loads(value or b"")
            if not isinstance(body, dict):
                raise ControlError("a control packet's payload must be a JSON object")
            if flow == "query":
                kind = body.get("kind", "profile")
                if kind == "profile":
                    return self._profile(body)
                if kind == "route":
                    return self._route(body)
                raise ControlError(f"unknown query packet kind {kind!r}")
            if flow == "catalog":
                return self._catalog(body)
            if flow == "control":
                return []
            raise ControlError(f"flow {flow!r} is not a control flow")
        except (ValueError, KeyError, TypeError) as exc:
            reason = exc if isinstance(exc, ControlError) else f"bad {flow} packet: {exc!r}"
            return [dead_letter(str(reason), origin, key, value, headers)]

    def _profile(self, body: dict) -> list[Row]:
        pid, version, op = str(body["profile_id"]), int(body["version"]), body["op"]
        current = self.profiles.get(pid)
        known = current.version if current else self.tombstones.get(pid, 0)
        if version <= known:
            return []  # replayed or reordered packet: already applied something newer
        if op == "delete":
            self.profiles.pop(pid, None)
            self.tombstones[pid] = version
            query, profile = None, None
        elif op in ("add", "update"):
            text = str(body["text"])
            query = map_profile(text)  # raises ProfileError (a ValueError) for a bad text
            profile = self.profiles[pid] = LocalProfile(version, text, str(body["delivery_topic"]))
            self.tombstones.pop(pid, None)
        else:
            raise ControlError(f"unknown profile op {op!r}")
        self.version += 1
        if self.on_profile is not None:
            self.on_profile(pid, profile)
        delta = Delta(pid, version, query)
        return [row for root in self.overlay.roots for row in self._up(root, delta)]

    def _route(self, body: dict) -> list[Row]:
        root, child = str(body["root"]), str(body["from"])
        if root not in self.overlay.graph or child not in self.overlay.graph:
            raise ControlError(f"route delta names unknown broker (root {root!r}, from {child!r})")
        delta = Delta.from_json(body["delta"])
        if not self.table(root).apply(child, delta):
            return []
        self.version += 1
        return self._up(root, delta)

    def _up(self, root: str, delta: Delta) -> list[Row]:
        """The routing delta for ``root``'s tree, sent to this broker's parent in it."""
        parent = self.overlay.tree(root).parent[self.broker]
        if parent is None:
            return []
        body = {"kind": "route", "root": root, "from": self.broker, "delta": delta.to_json()}
        return [(topics.broker_topic(parent), delta.profile_id.encode(), json.dumps(body).encode(),
                 PacketHeader("query", root_broker=root).to_kafka())]

    def _catalog(self, body: dict) -> list[Row]:
        source, root = str(body["source_id"]), str(body["root_broker"])
        if root not in self.overlay.graph:
            raise ControlError(f"source {source!r} names unknown root broker {root!r}")
        dictionary = body.get("dictionary")
        if dictionary is not None:
            dictionary = Dictionary.from_json(dictionary).to_json()  # FormatError (a ValueError) if bad
        known = self.dictionaries.get(source)
        new_dictionary = dictionary is not None and (known is None or dictionary["version"] > known["version"])
        if self.overlay.sources.get(source) == root and not new_dictionary:
            return []
        new_tree = root not in set(self.overlay.sources.values())
        self.overlay.sources[source] = root
        if new_dictionary:
            self.dictionaries[source] = dictionary
        self.version += 1
        rows: list[Row] = []
        packet = json.dumps(body).encode()
        for child in self.overlay.tree(root).children[self.broker]:
            rows.append((topics.broker_topic(child), source.encode(), packet,
                         PacketHeader("catalog", source_id=source, root_broker=root).to_kafka()))
        if new_tree:
            for pid, p in sorted(self.profiles.items()):
                rows += self._up(root, Delta(pid, p.version, map_profile(p.text)))
        return rows

    # -- snapshots -----------------------------------------------------------

    def snapshot(self) -> bytes:
        """Plain data for :meth:`restore` (written next to the checkpoint)."""
        return pickle.dumps({
            "broker": self.broker, "version": self.version, "seq": self.seq, "applied": dict(self.applied),
            "sources": dict(self.overlay.sources),
            "profiles": {pid: (p.version, p.text, p.delivery_topic) for pid, p in self.profiles.items()},
            "tombstones": dict(self.tombstones),
            "tables": {root: t.contributions() for root, t in self.tables.items()},
            "dictionaries": dict(self.dictionaries),
        })

    @classmethod
    def restore(cls, blob: bytes, overlay: Overlay) -> "BrokerState":
        data = pickle.loads(blob)
        overlay.sources.update(data["sources"])
        state = cls(data["broker"], overlay, version=data["version"], seq=data.get("seq", 0),
                    applied=data.get("applied", {}))
        state.profiles = {pid: LocalProfile(*p) for pid, p in data["profiles"].items()}
        state.tombstones = data["tombstones"]
        state.dictionaries = data.get("dictionaries", {})
        for root, links in data["tables"].items():
            table = state.table(root)
            for link, held in links.items():
                for pid, (version, query) in held.items():
                    table.apply(link, Delta(pid, version, query))
        return state
