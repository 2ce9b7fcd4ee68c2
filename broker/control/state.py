"""A broker's control state and the control flows that change it.

Everything a broker knows besides the messages themselves: the overlay, the catalog
of sources, and its :class:`~routing.node.Node` (the profiles it hosts, one routing
table per broadcast tree, the engine of its local profiles). The ``query`` and
``catalog`` flows of its inbound topic change it (in offset order, before the data of
the same micro-batch); every change bumps :attr:`version`. This module reads the
packets and writes the rows; what a packet does is the node's (``Map()``,
``Collect()``, ``Aggregate()``: the simulator runs the same code).

Query packets come in three kinds (JSON, field ``kind``):

* ``profile`` (from the registration service): ``op`` add/update/delete of a profile
  hosted here. The profile's routing query and what it reads of a message
  (``Map()``) join the broker's summary of every broadcast tree
  (:mod:`routing.summary`); what that changes goes up as routing deltas.
* ``route`` (from a child broker): routing deltas (``deltas``, a list) of the child's
  summary for the tree of ``root``, received on the link from ``from``. They are
  applied (``Collect()``) and what they change in this broker's own summary goes on to
  its parent in that tree (``Aggregate()``).
* ``generalize`` (from this broker itself): a generalization ``plan``
  (:meth:`routing.planner.Plan.to_json`) for its summary of ``root``'s tree, made on
  the data path where the messages that measure it are (:meth:`generalize_packet`)
  and adopted here, in the log's order, so that every copy of the broker sends its
  parent the same deltas.

The routing deltas a packet causes wait in :attr:`BrokerState.outbox` until
:meth:`BrokerState.routes` takes them (``apply`` does, unless told to ``defer``): a
broker applying a run of packets (a micro-batch) sends one route packet per parent and
tree for all of them, with each pseudo-profile's newest delta only, so a burst of
registrations climbs the trees in a few packets rather than one per profile and hop.

Catalog packets carry the metadata deltas of the broker's repository
(:mod:`broker.metadata.broker_lmr`): every broker subscribes to the sources whose trees
reach it, so each learns a source, with the name dictionary of its schema if it has
one (every broker can decode the dictionary-encoded formats), straight from the
metadata provider; a new root broker means a new tree, so every broker sends its
profiles' routing queries up it.

Every packet applied, whether it changed anything or not, counts in :attr:`seq`. A
packet read from Kafka is applied with its place (``at``: topic, partition, offset); the
state keeps the last place applied per topic partition and skips a packet at or before
it, so a replayed batch, or a copy catching up from the broker's state log
(:mod:`broker.control.state_log`) that meets packets it already applied, changes nothing.

>>> s = BrokerState("b4", __import__("routing.overlay").overlay.builtin("figure4"))
>>> body = {"op": "add", "profile_id": "p1", "version": 1, "text": "/nitf//hl1", "delivery_topic": "t"}
>>> rows = s.apply("query", b"p1", json.dumps(body).encode(), [], "onyx.broker.b4")
>>> [r[0] for r in rows], s.seq, s.version, sorted(s.profiles)
(['onyx.broker.b2'], 1, 1, ['p1'])
>>> for i in (2, 3):
...     body = {"op": "add", "profile_id": f"p{i}", "version": 1, "text": "/a", "delivery_topic": "t"}
...     s.apply("query", f"p{i}".encode(), json.dumps(body).encode(), [], "onyx.broker.b4", defer=True)
[]
[]
>>> [(topic, len(json.loads(value)["deltas"])) for topic, _, value, _ in s.routes()]   # one "/a" for both
[('onyx.broker.b2', 1)]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

ROUTE_PACKET_BYTES = 256 * 1024
"""A route packet carries deltas up to about this many bytes of JSON (Kafka's default
limit for a record is 1 MB)."""

from broker import topics
from broker.metadata.broker_lmr import BrokerRepository
from broker.packets import Row, dead_letter
from formats.dictionary import Dictionary
from formats.header import PacketHeader
from routing.budget import Budget
from routing.node import Hosted, Node, Up
from routing.overlay import Overlay
from routing.planner import Plan
from routing.table import Delta, RoutingTable


class ControlError(ValueError):
    """A control packet that cannot be applied (bad JSON, unknown kind or broker)."""


@dataclass
class BrokerState:
    """The control state of broker ``broker`` in ``overlay`` (see module docstring);
    with a ``budget``, its routing tables route with views generalized to fit it."""

    broker: str
    overlay: Overlay
    budget: Budget | None = None
    dictionaries: dict[str, dict] = field(default_factory=dict)  # source -> newest Dictionary.to_json()
    seq: int = 0  # packets applied, changes or not
    applied: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) -> last offset
    catalog_changes: int = 0

    outbox: dict[tuple[str, str], dict[str, Delta]] = field(default_factory=dict)
    """Routing deltas not yet sent: (parent, root) -> pseudo-profile id -> its newest delta."""

    covered: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    """Profiles whose queries the deltas sent (now or before) stand for, not yet said to
    the parent: (parent, root) -> profile id -> version. A route packet carries them
    (``covered``) up to the root, where a backfill reads when the root began routing a
    new profile's messages (:mod:`broker.registry.backfill`)."""

    by_reference: set[str] = field(default_factory=set)
    """Hosted profiles delivering by reference (query packet field ``delivery_by``): their records
    carry a reference to the message, not the message (:mod:`broker.dataplane.plan`)."""

    def __post_init__(self) -> None:
        self.node = Node(self.broker, self.overlay, self.budget)
        self.metadata = BrokerRepository(self.broker)

    @property
    def version(self) -> int:
        """Changes made (of hosted profiles, routing tables and the catalog)."""
        return self.node.version + self.catalog_changes

    @property
    def profiles(self) -> dict[str, Hosted]:
        """The profiles hosted here (their ``target`` is the delivery topic)."""
        return self.node.profiles

    @property
    def tables(self) -> dict[str, RoutingTable]:
        """One routing table per broadcast tree (by root)."""
        return self.node.tables

    # -- control flows -------------------------------------------------------

    def is_applied(self, at: tuple[str, int, int]) -> bool:
        """Whether the packet at ``at`` (topic, partition, offset) was applied already."""
        return self.applied.get(at[:2], -1) >= at[2]

    def apply(self, flow: str, key: bytes | None, value: bytes | None,
              headers: list[tuple[str, bytes]], origin: str,
              at: tuple[str, int, int] | None = None, *, defer: bool = False) -> list[Row]:
        """Apply one control packet; returns the rows it causes (deltas to the parent,
        or a dead letter if the packet is bad). A packet
        ``at`` a place already applied is skipped (no rows). With ``defer``, its routing
        deltas stay in :attr:`outbox` for :meth:`routes`."""
        rows = self._apply(flow, key, value, headers, origin, at)
        return rows if defer else rows + self.routes()

    def replay(self, flow: str, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes]], origin: str, at: tuple[str, int, int]) -> None:
        """Apply a packet that another copy of this broker applied (read from the state
        log): the rows it causes were sent then, so none are made now."""
        self._apply(flow, key, value, headers, origin, at)
        self.outbox.clear()
        self.covered.clear()

    def _apply(self, flow: str, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes]], origin: str, at: tuple[str, int, int] | None) -> list[Row]:
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
                if kind == "generalize":
                    root = str(body["root"])
                    if root not in self.overlay.graph:
                        raise ControlError(f"generalize packet names unknown root broker {root!r}")
                    return self._queue(self.node.generalize(root, Plan.from_json(body["plan"])))
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
        if op == "delete":
            rows = self._queue(self.node.drop(pid, version))
        elif op in ("add", "update"):
            # a bad text raises ProfileError (a ValueError): a dead letter, nothing changed
            rows = self._queue(self.node.host(pid, version, str(body["text"]), str(body["delivery_topic"])))
            self._cover([(pid, version)], None)
        else:
            raise ControlError(f"unknown profile op {op!r}")
        hosted = self.node.profiles.get(pid)
        if hosted is None:
            self.by_reference.discard(pid)
        elif hosted.version == version:  # this packet's version is the one hosted (not an older one)
            if body.get("delivery_by") == "reference":
                self.by_reference.add(pid)
            else:
                self.by_reference.discard(pid)
        return rows

    def _cover(self, profiles: list, root: str | None) -> None:
        """Say ``profiles`` (id, version) to the parent in ``root``'s tree (every tree: None)."""
        for r in [root] if root is not None else self.overlay.roots:
            parent = self.node.parent(r)
            if parent is not None and profiles:
                held = self.covered.setdefault((parent, r), {})
                for pid, version in profiles:
                    held[str(pid)] = max(int(version), held.get(str(pid), 0))

    def _route(self, body: dict) -> list[Row]:
        root, child = str(body["root"]), str(body["from"])
        if root not in self.overlay.graph or child not in self.overlay.graph:
            raise ControlError(f"route delta names unknown broker (root {root!r}, from {child!r})")
        deltas = body["deltas"] if "deltas" in body else [body["delta"]]
        if not isinstance(deltas, list):
            raise ControlError("a route packet's deltas must be a list")
        parsed = [Delta.from_json(d) for d in deltas]  # all read before any is applied
        rows = self._queue([u for delta in parsed for u in self.node.collect(root, child, delta)])
        self._cover(list(body.get("covered", ())), root)
        return rows

    def _queue(self, ups: list[Up]) -> list[Row]:
        """File routing deltas in the outbox (no rows yet: :meth:`routes` makes them)."""
        for u in ups:
            held = self.outbox.setdefault((u.parent, u.root), {})
            old = held.get(u.delta.profile_id)
            if old is None or old.version < u.delta.version:
                held[u.delta.profile_id] = u.delta
        return []

    def routes(self) -> list[Row]:
        """The outbox as route packets, one per parent and tree (more where they would
        exceed :data:`ROUTE_PACKET_BYTES`), and empty it."""
        rows: list[Row] = []
        for parent, root in sorted(self.outbox.keys() | self.covered.keys()):
            held = self.outbox.get((parent, root), {})
            chunk: list[str] = []
            size = 0
            for pid in sorted(held):
                text = json.dumps(held[pid].to_json())
                if chunk and size + len(text) > ROUTE_PACKET_BYTES:
                    rows.append(self._route_packet(parent, root, chunk))
                    chunk, size = [], 0
                chunk.append(text)
                size += len(text) + 1
            # The profiles go with the last chunk: after every delta they caused.
            covered = sorted(self.covered.get((parent, root), {}).items())
            rows.append(self._route_packet(parent, root, chunk, covered))
        self.outbox.clear()
        self.covered.clear()
        return rows

    def _route_packet(self, parent: str, root: str, deltas: list[str], covered: list | None = None) -> Row:
        value = (f'{{"kind": "route", "root": {json.dumps(root)}, "from": {json.dumps(self.broker)}, '
                 f'"deltas": [{", ".join(deltas)}], "covered": {json.dumps(covered or [])}}}').encode()
        return (topics.broker_topic(parent), f"{root}:{self.broker}".encode(), value,
                PacketHeader("query", root_broker=root).to_kafka())

    def generalize_packet(self, root: str, plan: Plan) -> Row:
        """The packet that has this broker adopt ``plan`` for its summary of ``root``'s
        tree, written to its own inbound topic."""
        value = json.dumps({"kind": "generalize", "root": root, "plan": plan.to_json()}).encode()
        return (topics.broker_topic(self.broker), f"{root}:generalize".encode(), value,
                PacketHeader("query", root_broker=root).to_kafka())

    def _catalog(self, body: dict) -> list[Row]:
        rows: list[Row] = []
        for info in self.metadata.apply(body):  # ValueError for a packet that is no metadata delta
            rows += self._source(info.source, info.root, info.dictionary)
        return rows

    def _source(self, source: str, root: str, dictionary: dict | None) -> list[Row]:
        """A source the repository holds: its root's tree and its dictionary."""
        if root not in self.overlay.graph:
            raise ControlError(f"source {source!r} names unknown root broker {root!r}")
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
        self.catalog_changes += 1
        return self._queue(self.node.join(root)) if new_tree else []
