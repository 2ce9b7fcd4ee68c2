"""The compiled data plane of one broker at one control-state version.

The driver turns its :class:`~broker.state.BrokerState` into a :class:`PlanSpec` (plain
data) whenever the version changes; executors compile it into a :class:`Plan` once
and keep it in :data:`_CACHE` under ``(broker, version)``, so a plan is rebuilt per
version, not per batch. ``Plan.process`` handles one XML packet: validate the source
(or parse the packet header), decode by format, route it down the links of its tree
whose routing queries it matches, match the profiles hosted here, and emit rows:
one per chosen link (re-encoded in the link's format), one per delivery, or one dead
letter with the reason. It never raises for bad input.
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


class Plan:
    """A compiled :class:`PlanSpec` (see module docstring)."""

    def __init__(self, spec: PlanSpec) -> None:
        self.spec = spec
        self.engine = Engine()
        self.delivery: dict[str, str] = {}
        for pid, (text, topic) in spec.profiles.items():
            self.engine.add(pid, text)
            self.delivery[pid] = topic
        self.dictionaries = DictionaryStore(Dictionary.from_json(d) for d in spec.dictionaries.values())
        self.tables: dict[str, RoutingTable] = {}
        for root, links in spec.tables.items():
            table = self.tables[root] = RoutingTable(spec.broker)
            for link, held in links.items():
                for pid, (version, query) in held.items():
                    table.apply(link, Delta(pid, version, query))

    def process(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]], partition: int, offset: int) -> list[Row]:
        spec = self.spec
        try:
            if topic.startswith(topics.SOURCE_PREFIX):
                source = topic[len(topics.SOURCE_PREFIX):]
                root = spec.sources.get(source)
                if root is None:
                    return [dead_letter(f"unknown source id {source!r}: register it with POST /sources first",
                                        topic, key, value, headers)] if spec.guard else []
                if root != spec.broker:
                    return []  # another broker is this source's root and handles it
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
            return self._route_and_match(msg, header, payload)
        except (FormatError, MessageError) as exc:
            return [dead_letter(str(exc), topic, key, value, headers)]
        except Exception as exc:  # a bug must not stop the broker: the message is kept, with why
            return [dead_letter(f"internal error while processing: {exc!r}", topic, key, value, headers)]

    def _link_format(self, source: str | None) -> tuple[str, Dictionary | None]:
        """The format to forward in, and its dictionary: the configured link format, or
        ``stream`` when that needs a dictionary the source has not registered."""
        fmt = self.spec.link_format
        if not formats.get(fmt).needs_dictionary:
            return fmt, None
        dictionary = self.dictionaries.latest(source) if source else None
        return (fmt, dictionary) if dictionary is not None else ("stream", None)

    def _route_and_match(self, msg: formats.Message, header: PacketHeader, payload: bytes) -> list[Row]:
        spec = self.spec
        rows: list[Row] = []
        if spec.flood is not None:
            links = set(spec.flood.get(header.root_broker, ()))
        else:
            table = self.tables.get(header.root_broker)
            links = table.route(msg) if table is not None else set()
        if links:
            fmt, dictionary = self._link_format(header.source_id)
            version = dictionary.version if dictionary else None
            same = header.format == fmt and header.dictionary_version == version
            blob = payload if same else formats.encode(fmt, msg, dictionary=dictionary)
            out = PacketHeader("xml", format=fmt, source_id=header.source_id, root_broker=header.root_broker,
                               message_id=header.message_id, dictionary_version=version).to_kafka()
            key = header.message_id.encode()
            rows += [(topics.broker_topic(link), key, blob, out) for link in sorted(links)]
        if len(self.engine):
            results = self.engine.run(msg)
            if results:
                out = PacketHeader("xml", format="text", source_id=header.source_id,
                                   root_broker=header.root_broker, message_id=header.message_id).to_kafka()
                for pid in sorted(results):
                    for doc in results[pid]:
                        rows.append((self.delivery[pid], pid.encode(), doc, out))
        return rows


_CACHE: dict[str, Plan] = {}
"""Compiled plans in this (executor) process, by broker: only the newest version is kept."""


def cached_plan(broker: str, version: int, load) -> Plan:
    """The compiled plan of ``broker`` at ``version``; ``load()`` returns the spec if it
    has to be compiled here (once per version per Python worker)."""
    plan = _CACHE.get(broker)
    if plan is None or plan.spec.version != version:
        plan = _CACHE[broker] = Plan(load())
    return plan
