"""The compiled data plane of one broker at one control-state version.

The driver turns its :class:`~broker.state.BrokerState` into a :class:`PlanSpec` (plain
data) whenever the version changes and broadcasts it; executors compile it into a
:class:`Plan` once and keep it in :data:`_CACHE` under the broker and a key unique to
the spec, so a plan is rebuilt per version, not per batch (the key, unlike the version,
also tells apart two overlays with a broker of the same name in one Spark application). A record goes through three steps: :meth:`Plan.receive`
validates the source (or parses the packet header) and decodes by format;
:meth:`Plan.route` forwards the message down the links of its tree whose routing
queries it matches (re-encoded in the link's format); :meth:`Plan.deliver` matches the
profiles hosted here (a delivery to one of the overlay's own topics becomes a dead letter:
it would loop). Routing is on the critical path: the executor function routes a
whole batch and hands those rows to the Kafka sink before it matches local profiles.
Bad input becomes one dead letter with the reason; nothing raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import formats
from broker import topics
from broker.packets import Row, dead_letter
from formats.dictionary import Dictionary, DictionaryStore
from formats.errors import FormatError
from formats.header import PacketHeader
from routing.table import Delta, RoutingTable
from yfilter import Engine
from yfilter.errors import MessageError


@dataclass(frozen=True)
class Limits:
    """What a broker accepts; larger or deeper messages become dead letters."""

    max_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64


@dataclass(frozen=True)
class PlanSpec:
    broker: str
    version: int
    sources: dict[str, str]                       # source id -> root broker
    profiles: dict[str, tuple[str, str]]          # profile id -> (text, delivery topic)
    tables: dict[str, dict]                       # root -> RoutingTable.contributions()
    dictionaries: dict[str, dict] = field(default_factory=dict)  # source -> Dictionary.to_json()
    link_format: str = "stream"
    guard: bool = False                           # dead-letters messages of unknown sources
    limits: Limits = Limits()
    flood: dict[str, tuple[str, ...]] | None = None  # root -> children, when flooding instead of routing

    @classmethod
    def of(cls, state, link_format: str, guard: bool, limits: Limits, flood: bool = False) -> "PlanSpec":
        """The spec of a broker's control state; ``flood`` sends every message down every
        link of its tree (the baseline content-based routing is measured against)."""
        children = ({root: tuple(state.overlay.tree(root).children[state.broker])
                     for root in set(state.overlay.sources.values())} if flood else None)
        return cls(state.broker, state.version, dict(state.overlay.sources),
                   {pid: (p.text, p.delivery_topic) for pid, p in state.profiles.items()},
                   {root: t.contributions() for root, t in state.tables.items()},
                   dict(state.dictionaries), link_format, guard, limits, children)


@dataclass(frozen=True)
class Inbound:
    """A message this broker handles, decoded, with the record it came in."""

    message: formats.Message
    header: PacketHeader
    payload: bytes
    record: tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]  # topic, key, value, headers


class Plan:
    """A compiled :class:`PlanSpec` (see module docstring)."""

    def __init__(self, spec: PlanSpec) -> None:
        self.spec = spec
        self.engine = Engine()
        self.engine.add_many((pid, text) for pid, (text, _) in spec.profiles.items())
        self.delivery = {pid: topic for pid, (_, topic) in spec.profiles.items()}
        # A delivery into a topic the overlay reads would be read, matched and delivered
        # again, without end. The service refuses such topics; a profile that has one all
        # the same (an older store, a packet written by hand) gets dead letters instead.
        self.refused = {pid: reason for pid, topic in self.delivery.items()
                        if (reason := topics.internal_reason(topic)) is not None}
        self.dictionaries = DictionaryStore(Dictionary.from_json(d) for d in spec.dictionaries.values())
        self.tables: dict[str, RoutingTable] = {}
        for root, links in spec.tables.items():
            table = self.tables[root] = RoutingTable(spec.broker)
            for link, held in links.items():
                for pid, (version, query) in held.items():
                    table.apply(link, Delta(pid, version, query))

    def process(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], partition: int, offset: int) -> list[Row]:
        """Every row one record causes: :meth:`receive`, then :meth:`route`, then :meth:`deliver`."""
        inbound, rows = self.receive(topic, key, value, headers, partition, offset)
        if inbound is not None:
            rows = self.route(inbound) + self.deliver(inbound)
        return rows

    def receive(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], partition: int, offset: int) -> tuple[Inbound | None, list[Row]]:
        """Validate and decode one record: ``(inbound, [])`` for a message this broker
        handles, ``(None, [dead letter])`` for bad input, ``(None, [])`` for a source
        message another broker is the root of."""
        spec = self.spec
        record = (topic, key, value, headers)
        try:
            if topic.startswith(topics.SOURCE_PREFIX):
                source = topic[len(topics.SOURCE_PREFIX):]
                root = spec.sources.get(source)
                if root is None:
                    return None, [dead_letter(f"unknown source id {source!r}: register it with POST /sources first",
                                              *record)] if spec.guard else []
                if root != spec.broker:
                    return None, []  # another broker is this source's root and handles it
                given = dict(headers).get("onyx-message-id")
                message_id = given.decode(errors="replace") if given else f"{source}-{partition}-{offset}"
                header = PacketHeader("xml", format="text", source_id=source, root_broker=root,
                                      message_id=message_id)
            else:
                header = PacketHeader.from_kafka(headers)
                if header.flow != "xml" or header.root_broker is None or header.message_id is None:
                    raise FormatError("an xml packet between brokers needs onyx-root-broker and onyx-message-id")
            payload = value or b""
            if len(payload) > spec.limits.max_bytes:
                raise FormatError(f"message of {len(payload)} bytes exceeds this broker's limit of "
                                  f"{spec.limits.max_bytes} bytes")
            msg = header.decode(payload, self.dictionaries)
            if max(msg.depths, default=0) > spec.limits.max_depth:
                raise FormatError(f"message nesting exceeds this broker's limit of {spec.limits.max_depth}")
            return Inbound(msg, header, payload, record), []
        except (FormatError, MessageError) as exc:
            return None, [dead_letter(str(exc), *record)]
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return None, [dead_letter(f"internal error while receiving: {exc!r}", *record)]

    def _link_format(self, source: str | None) -> tuple[str, Dictionary | None]:
        """The format to forward in, and its dictionary: the configured link format, or
        ``stream`` when that needs a dictionary the source has not registered."""
        fmt = self.spec.link_format
        if not formats.get(fmt).needs_dictionary:
            return fmt, None
        dictionary = self.dictionaries.latest(source) if source else None
        return (fmt, dictionary) if dictionary is not None else ("stream", None)

    def route(self, inbound: Inbound) -> list[Row]:
        """The rows that forward a message down the links of its tree that want it."""
        spec, header = self.spec, inbound.header
        try:
            if spec.flood is not None:
                links = set(spec.flood.get(header.root_broker, ()))
            else:
                table = self.tables.get(header.root_broker)
                links = table.route(inbound.message) if table is not None else set()
            if not links:
                return []
            fmt, dictionary = self._link_format(header.source_id)
            version = dictionary.version if dictionary else None
            same = header.format == fmt and header.dictionary_version == version
            blob = inbound.payload if same else formats.encode(fmt, inbound.message, dictionary=dictionary)
            out = PacketHeader("xml", format=fmt, source_id=header.source_id, root_broker=header.root_broker,
                               message_id=header.message_id, dictionary_version=version).to_kafka()
            key = header.message_id.encode()
            return [(topics.broker_topic(link), key, blob, out) for link in sorted(links)]
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return [dead_letter(f"internal error while routing: {exc!r}", *inbound.record)]

    def deliver(self, inbound: Inbound) -> list[Row]:
        """The deliveries of the profiles hosted here: the message for a filter, one
        result document per binding for a transformation profile."""
        if not len(self.engine):
            return []
        header = inbound.header
        try:
            results = self.engine.run(inbound.message)
        except MessageError as exc:
            return [dead_letter(str(exc), *inbound.record)]
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return [dead_letter(f"internal error while matching: {exc!r}", *inbound.record)]
        if not results:
            return []
        out = PacketHeader("xml", format="text", source_id=header.source_id,
                           root_broker=header.root_broker, message_id=header.message_id).to_kafka()
        delivered = [(self.delivery[pid], pid.encode(), doc, out)
                     for pid in sorted(results) if pid not in self.refused for doc in results[pid]]
        return delivered + [dead_letter(f"not delivered to profile {pid}: its delivery topic {self.refused[pid]}",
                                        *inbound.record) for pid in sorted(self.refused.keys() & results.keys())]


_CACHE: dict[str, tuple[str, Plan]] = {}
"""Compiled plans in this (executor) process, by broker: only the newest spec is kept."""


def cached_plan(broker: str, spec_key: str, load) -> Plan:
    """The compiled plan of ``broker`` for the spec with key ``spec_key``; ``load()``
    returns the spec if it has to be compiled here (once per spec per Python worker)."""
    cached = _CACHE.get(broker)
    if cached is None or cached[0] != spec_key:
        cached = _CACHE[broker] = (spec_key, Plan(load()))
    return cached[1]
