"""The data plane of one broker: what it does with every record of its inbound topic.

A :class:`Plan` runs over a :class:`~broker.control.state.BrokerState` and stays in step with it:
control packets go through :meth:`Plan.control` (the state applies them to its
:class:`~routing.node.Node`, whose tables and engine of local profiles change one
profile at a time, so a change costs what it changes, not a recompile). A message
record goes through three steps: :meth:`Plan.receive` validates the source (or parses
the packet header) and decodes by format; :meth:`Plan.route` forwards the message down
the links of its tree whose routing queries it matches — re-encoded in the link's
format, or as the link's transformation query makes it (incremental transformation,
:mod:`routing.incremental`: bindings the queries below cannot match dropped, the rest
projected on what they read, their shared first steps run) where that is worth its
cost (:meth:`routing.node.Node.forwards`; the packet then says in ``onyx-transform``
which transformation the message has had);
:meth:`Plan.deliver` runs the profiles hosted here (a delivery to one of the overlay's
own topics becomes a dead letter: it would loop).
What happens to a message is the node's; this module is its Kafka side.
Routing is on the critical path: the executor (:mod:`broker.dataplane.executor`) routes a whole
run of messages and hands those rows to Kafka before it matches local profiles.
Bad input becomes one dead letter with the reason; nothing raises.

Three modes (:data:`MODES`): ``route`` (content-based routing, the system), ``flood``
(every message down every link of its tree: the baseline routing is measured
against) and ``floor`` (flooding without decoding or matching: every message is
forwarded as it came and handed to every local profile, so what is left is the cost
of the streaming job itself, the benchmark's Spark floor).

>>> from routing.overlay import builtin
>>> state = BrokerState("b1", builtin("figure4"))
>>> plan = Plan(state, PlanSettings(guard=True))
>>> body = {"op": "add", "profile_id": "p1", "version": 1, "text": "/a", "delivery_topic": "onyx.deliver.s1"}
>>> up = plan.control("query", b"p1", json.dumps(body).encode(), [], "onyx.broker.b1")
>>> [(t, k, v) for t, k, v, _ in plan.process("onyx.src.news", b"k", b"<a/>", [], 0, 7)]
[('onyx.deliver.s1', b'p1', b'<a/>')]
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import formats
from broker import config, packets, topics
from broker.control.state import BrokerState
from broker.packets import Row, dead_letter
from formats.dictionary import Dictionary, DictionaryStore
from formats.errors import FormatError
from formats.header import PacketHeader
from routing.budget import Budget
from routing.incremental import Need, from_header, to_header
from routing.node import Forward
from yfilter.errors import MessageError
from yfilter.flwr import is_flwr

MODES = ("route", "flood", "floor")

_PLANNER = ThreadPoolExecutor(1, thread_name_prefix="onyx-generalize")
"""Makes summaries' generalization plans in a worker process, beside its tasks."""


@dataclass(frozen=True)
class Limits:
    """What a broker accepts; larger or deeper messages become dead letters."""

    max_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64


@dataclass(frozen=True)
class PlanSettings:
    """How a broker's plan runs: the wire format towards child brokers, whether it is
    the guard (dead-letters messages of unknown sources), its limits, its mode, the
    budget of its routing tables (``None``: exact tables), whether links may carry
    projections, the most bytes of the ``onyx-profiles`` header of a delivery record, and
    the bandwidth of its links in bits/s (what a link's transformation is worth, see
    :class:`routing.node.LinkCost`; ONYX_LINK_BANDWIDTH)."""

    link_format: str = "stream"
    guard: bool = False
    limits: Limits = Limits()
    mode: str = "route"
    budget: Budget | None = None
    projection: bool = True
    profiles_header_bytes: int = config.DELIVERY_PROFILES_HEADER_BYTES
    bandwidth: float = config.LINK_BANDWIDTH

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown plan mode {self.mode!r}; one of {MODES}")
        formats.get(self.link_format)  # FormatError for an unknown format
        if self.profiles_header_bytes < 1:
            raise ValueError(f"profiles_header_bytes must be positive, not {self.profiles_header_bytes} "
                             "(ONYX_DELIVERY_PROFILES_HEADER_BYTES)")
        if not self.bandwidth > 0:
            raise ValueError(f"bandwidth must be positive bits/s, not {self.bandwidth} (ONYX_LINK_BANDWIDTH)")


class Inbound(NamedTuple):
    """A message this broker handles, decoded (``None`` in ``floor`` mode), with the
    record it came in."""

    message: formats.Message | None
    header: PacketHeader
    payload: bytes
    record: tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]  # topic, key, value, headers
    applied: Need | None = None
    """The transformation the message had on its way (its ``onyx-transform``)."""


class Plan:
    """The data plane of ``state``'s broker (see module docstring)."""

    def __init__(self, state: BrokerState, settings: PlanSettings = PlanSettings()) -> None:
        self.state = state
        self.node = state.node
        self.node.bandwidth = settings.bandwidth
        self.settings = settings
        self._refusals: dict[str, str | None] = {}  # delivery topic -> why it is refused
        self._planning: dict[str, Future] = {}  # tree root -> a plan for its summary, being made
        self._kinds: dict[str, tuple[str, bool]] = {}  # profile id -> (its text, a transformation?)
        self._dictionary_stamp = None
        self.dictionaries = self._dictionaries()

    # -- control -------------------------------------------------------------

    def control(self, flow: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], topic: str,
                at: tuple[str, int, int] | None = None, *, defer: bool = False) -> list[Row]:
        """Apply one control packet (see :meth:`BrokerState.apply`; ``defer``: its
        routing deltas wait for :meth:`BrokerState.routes`); the plan follows."""
        rows = self.state.apply(flow, key, value, headers, topic, at, defer=defer)
        if flow == "catalog":
            self.dictionaries = self._dictionaries()
        return rows

    def replay(self, flow: str, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes]], topic: str, at: tuple[str, int, int]) -> None:
        """Apply a packet from the broker's state log (see :meth:`BrokerState.replay`)."""
        self.state.replay(flow, key, value, headers, topic, at)
        if flow == "catalog":
            self.dictionaries = self._dictionaries()

    def refusal(self, topic: str) -> str | None:
        """Why a delivery to ``topic`` is refused, or None. A delivery into a topic the
        overlay reads would be read, matched and delivered again, without end. The
        service refuses such topics; a profile that has one all the same (an older
        store, a packet written by hand) gets dead letters instead."""
        if topic not in self._refusals:
            self._refusals[topic] = topics.unwritable_reason(topic)
        return self._refusals[topic]

    def _dictionaries(self) -> DictionaryStore:
        stamp = tuple((s, d["version"]) for s, d in sorted(self.state.dictionaries.items()))
        if stamp != self._dictionary_stamp:
            self._dictionary_stamp = stamp
            self.dictionaries = DictionaryStore(Dictionary.from_json(d) for d in self.state.dictionaries.values())
        return self.dictionaries

    # -- data ----------------------------------------------------------------

    def process(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], partition: int, offset: int) -> list[Row]:
        """Every row one message record causes: :meth:`receive`, then :meth:`route`, then :meth:`deliver`."""
        inbound, rows = self.receive(topic, key, value, headers, partition, offset)
        if inbound is not None:
            rows = self.route(inbound) + self.deliver(inbound)
        return rows

    def owns_source(self, source: str) -> bool | None:
        """Whether this broker handles messages of ``source``: True if it is its root,
        False if another broker is, ``None`` if the source is unknown here."""
        root = self.state.overlay.sources.get(source)
        return None if root is None else root == self.state.broker

    def receive(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], partition: int, offset: int) -> tuple[Inbound | None, list[Row]]:
        """Validate and decode one record: ``(inbound, [])`` for a message this broker
        handles, ``(None, [dead letter])`` for bad input, ``(None, [])`` for a source
        message another broker is the root of."""
        settings, broker = self.settings, self.state.broker
        record = (topic, key, value, headers)
        try:
            if topic.startswith(topics.SOURCE_PREFIX):
                source = topic[len(topics.SOURCE_PREFIX):]
                owned = self.owns_source(source)
                if owned is None:
                    return None, [dead_letter(f"unknown source id {source!r}: register it with POST /sources first",
                                              *record)] if settings.guard else []
                if not owned:
                    return None, []  # another broker is this source's root and handles it
                given = next((v for k, v in headers if k == "onyx-message-id"), None)
                message_id = given.decode(errors="replace") if given else f"{source}-{partition}-{offset}"
                sample = "1" if settings.mode == "route" and self.node.sample(broker) else None
                header = PacketHeader("xml", format="text", source_id=source, root_broker=broker,
                                      message_id=message_id, sample=sample)
            else:
                header = PacketHeader.from_kafka(headers)
                if header.flow != "xml" or header.root_broker is None or header.message_id is None:
                    raise FormatError("an xml packet between brokers needs onyx-root-broker and onyx-message-id")
            payload = value or b""
            if len(payload) > settings.limits.max_bytes:
                raise FormatError(f"message of {len(payload)} bytes exceeds this broker's limit of "
                                  f"{settings.limits.max_bytes} bytes")
            if settings.mode == "floor":
                return Inbound(None, header, payload, record), []
            try:
                applied = from_header(header.transform)
            except ValueError as exc:
                raise FormatError(str(exc)) from None
            msg = header.decode(payload, self.dictionaries)
            if max(msg.depths, default=0) > settings.limits.max_depth:
                raise FormatError(f"message nesting exceeds this broker's limit of {settings.limits.max_depth}")
            return Inbound(msg, header, payload, record, applied), []
        except (FormatError, MessageError) as exc:
            return None, [dead_letter(str(exc), *record)]
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return None, [dead_letter(f"internal error while receiving: {exc!r}", *record)]

    def _link_format(self, source: str | None) -> tuple[str, Dictionary | None]:
        """The format to forward in, and its dictionary: the configured link format, or
        ``stream`` when that needs a dictionary the source has not registered."""
        fmt = self.settings.link_format
        if not formats.get(fmt).needs_dictionary:
            return fmt, None
        dictionary = self.dictionaries.latest(source) if source else None
        return (fmt, dictionary) if dictionary is not None else ("stream", None)

    def forwards(self, inbound: Inbound) -> list[Forward]:
        """The child brokers ``inbound`` goes to, sorted, each with what it carries:
        routed (and projected where the link allows) in ``route`` mode, the whole
        message to every child of the tree in the baselines."""
        root = inbound.header.root_broker
        if self.settings.mode != "route":
            return [Forward(link, None, inbound.applied) for link in self.node.children(root)]
        return self.node.forwards(root, inbound.message, project=self.settings.projection,
                                  applied=inbound.applied, sample=inbound.header.sample is not None)

    def route(self, inbound: Inbound) -> list[Row]:
        """The rows that forward a message down the links of its tree that want it."""
        header = inbound.header
        try:
            forwards = self.forwards(inbound)
            if not forwards:
                return self._generalize(header.root_broker)
            key, whole = header.message_id.encode(), None
            rows = self._generalize(header.root_broker)
            for link, transformed, effect in forwards:
                if transformed is not None:  # in the link's format, and the packet says what it had
                    blob, out = self._encoded(header, transformed, to_header(effect))
                    rows.append((topics.broker_topic(link), key, blob, out))
                    continue
                if whole is None:
                    whole = self._whole(inbound)
                rows.append((topics.broker_topic(link), key, whole[0], whole[1]))
            return rows
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return [dead_letter(f"internal error while routing: {exc!r}", *inbound.record)]

    def _generalize(self, root: str) -> list[Row]:
        """A ``generalize`` packet once a plan for this broker's summary of ``root``'s
        tree is ready (adopted when the packet comes back, see
        :mod:`broker.control.state`). A due plan is made beside the data path, in the
        worker's planning thread, from copies of what it needs: a plan of a host's
        summary at 100k profiles takes seconds, which messages must not wait for."""
        planning = self._planning.get(root)
        if planning is not None:
            if not planning.done():
                return []
            del self._planning[root]
            try:
                return [self.state.generalize_packet(root, planning.result())]
            except Exception:  # a bug in a plan must not stop the broker: the summary stays as it is
                self.node.summaries[root].pending = False
                return []
        job = self.node.summary_plan_job(root)
        if job is not None:
            self._planning[root] = _PLANNER.submit(job)
        return []

    def planned(self) -> list[Row]:
        """The ``generalize`` packets of every plan made since (a task ends with them,
        so that a plan made while its last messages were routed is not left waiting for
        the next message)."""
        return [row for root in list(self._planning) if self._planning[root].done()
                for row in self._generalize(root)]

    def _whole(self, inbound: Inbound) -> tuple[bytes, list[tuple[str, bytes]]]:
        """The message as it goes down a link that takes it whole: its bytes in the
        link's format (as they came when that is the format already), and the header."""
        header = inbound.header
        if inbound.message is None:  # floor: forwarded as it came
            out = PacketHeader("xml", format=header.format, source_id=header.source_id,
                               root_broker=header.root_broker, message_id=header.message_id,
                               dictionary_version=header.dictionary_version).to_kafka()
            return inbound.payload, out
        fmt, dictionary = self._link_format(header.source_id)
        version = dictionary.version if dictionary else None
        if header.format == fmt and header.dictionary_version == version:
            out = PacketHeader("xml", format=fmt, source_id=header.source_id, root_broker=header.root_broker,
                               message_id=header.message_id, dictionary_version=version,
                               transform=header.transform, sample=header.sample).to_kafka()
            return inbound.payload, out
        return self._encoded(header, inbound.message, header.transform)

    def _encoded(self, header: PacketHeader, message: formats.Message,
                 transform: str | None) -> tuple[bytes, list[tuple[str, bytes]]]:
        """``message`` (the one received, or a projection of it) in the link's format."""
        fmt, dictionary = self._link_format(header.source_id)
        out = PacketHeader("xml", format=fmt, source_id=header.source_id, root_broker=header.root_broker,
                           message_id=header.message_id,
                           dictionary_version=dictionary.version if dictionary else None,
                           transform=transform, sample=header.sample).to_kafka()
        return formats.encode(fmt, message, dictionary=dictionary), out

    def deliver(self, inbound: Inbound) -> list[Row]:
        """The deliveries of the profiles hosted here: for the filters that match, one record
        per delivery topic (and way of delivery: the message, or a :func:`reference
        <broker.packets.reference>` to it), keyed by the first of their ids (sorted), every id in
        the ``onyx-profiles`` header (split over several records past
        :attr:`PlanSettings.profiles_header_bytes`); for a transformation profile, one record
        per result document, keyed by its id. A thousand filters of one subscriber matching a
        message cost one record, not a thousand copies of the message."""
        hosted = self.node.profiles
        if not hosted:
            return []
        header = inbound.header
        if inbound.message is None:  # floor: every local profile, nothing evaluated
            results = {pid: [inbound.payload] for pid in hosted}
        else:
            # A filter delivers the message itself: as published, when it came as text.
            xml = inbound.payload if header.format == "text" and header.transform is None else None
            try:
                results = self.node.deliver(inbound.message, xml, applied=inbound.applied)
            except MessageError as exc:
                return [dead_letter(str(exc), *inbound.record)]
            except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
                return [dead_letter(f"internal error while matching: {exc!r}", *inbound.record)]
        if not results:
            return []
        out = PacketHeader("xml", format="text", source_id=header.source_id,
                           root_broker=header.root_broker, message_id=header.message_id).to_kafka()
        rows: list[Row] = []
        shared: dict[tuple[str, bool], list[str]] = {}  # (topic, by reference) -> filters, in id order
        by_reference = self.state.by_reference
        for pid in sorted(results):
            profile = hosted[pid]
            topic = profile.target
            reason = self.refusal(topic)
            if reason is not None:
                rows.append(dead_letter(f"not delivered to profile {pid}: its delivery topic {reason}",
                                        *inbound.record))
            elif self._transforms(pid, profile.text) or "," in pid:
                # Results of its own; an id with a comma cannot be listed (it is the key alone).
                own = out if "," in pid else out + [(packets.PROFILES, pid.encode())]
                rows += [(topic, pid.encode(), doc, own) for doc in results[pid]]
            else:
                shared.setdefault((topic, pid in by_reference), []).append(pid)
        refer = None
        for (topic, reference), pids in shared.items():
            copy = results[pids[0]][0]  # every filter's result is the message itself
            extra = [(packets.DELIVERY, packets.REFERENCE)] if reference else []
            if reference and refer is None:
                refer = packets.references(header.message_id, header.source_id)
            for ids in packets.id_slices(pids, self.settings.profiles_header_bytes):
                value = refer(ids[0]) if reference else copy
                rows.append((topic, ids[0].encode(), value,
                             out + [(packets.PROFILES, ",".join(ids).encode())] + extra))
        return rows

    def _transforms(self, pid: str, text: str) -> bool:
        """Whether hosted profile ``pid`` (of ``text``) is a transformation profile (kept per
        profile: asked for every match of every message)."""
        known = self._kinds.get(pid)
        if known is None or known[0] is not text:
            if len(self._kinds) > 2 * len(self.node.profiles) + 1000:  # deleted profiles' entries
                self._kinds = {p: k for p, k in self._kinds.items() if p in self.node.profiles}
            known = self._kinds[pid] = (text, is_flwr(text))
        return known[1]
