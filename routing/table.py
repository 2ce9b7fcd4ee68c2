"""Routing tables: ``Collect()`` and ``Aggregate()`` over per-profile deltas.

A broker keeps one :class:`RoutingTable` per broadcast tree it is in. For each output
link (a child broker) the table holds the routing queries of every profile hosted
below that link, and matches a message against all of them at once with one shared
:class:`yfilter.Engine` whose profiles are the distinct atoms (absolute linear paths)
and whose targets — through a counting step over conjunctions — are the links.

Changes travel as :class:`Delta` s: "P, at version v, contributes query Q" (``Q is
None``: P is gone), with what P reads of a message (its
:func:`~routing.incremental.need`). What a child sends is its *summary*
(:mod:`routing.summary`, ``Aggregate()``): P is one of the summary's pseudo-profiles — a
conjunction, or the merged need of everything below the child. The needs below a link
make the link's transformation query (:meth:`RoutingTable.projection`, ONYX 4.2.2):
while no profile below needs the whole message, the link can carry what the query
makes of it (:mod:`routing.incremental`). A table applies a delta only if its version is newer than what it holds
for that P on that link, so replays and reordering cannot corrupt it. Deleting the
last conjunction below a link removes the link's entry.

>>> from routing.dnf import map_profile
>>> t = RoutingTable("b4")
>>> t.apply("b5", Delta("q1", 1, map_profile("/nitf//hl1")))
True
>>> t.apply("b6", Delta("q3", 1, map_profile("/nitf[head/title]")))
True
>>> sorted(t.route(b"<nitf><head><title>x</title></head></nitf>"))
['b6']
>>> t.apply("b6", Delta("q3", 2, None)), t.links
(True, ['b5'])
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.dnf import RoutingQuery
from routing.matcher import AtomEngine, LinkMatcher
from routing.incremental import WHOLE, LinkPlan, Need, Needed, need_from_json, need_to_json


@dataclass(frozen=True)
class Delta:
    """One profile's routing query at a version (``query=None`` means deleted) and
    what the profile lets a link above it do to a message (its
    :func:`~routing.incremental.need`; :data:`~routing.incremental.WHOLE` for a filter)."""

    profile_id: str
    version: int
    query: RoutingQuery | None
    need: Needed = WHOLE

    def to_json(self) -> dict:
        q = None if self.query is None else sorted(sorted(c) for c in self.query)
        return {"profile_id": self.profile_id, "version": self.version, "query": q,
                "need": need_to_json(self.need)}

    @classmethod
    def from_json(cls, d: dict) -> "Delta":
        q = d["query"]
        return cls(d["profile_id"], int(d["version"]),
                   None if q is None else frozenset(frozenset(c) for c in q),
                   need_from_json(d.get("need")))


class RoutingTable:
    """The routing table of ``broker`` for one broadcast tree (see module docstring).
    ``engine`` shares one :class:`~routing.matcher.AtomEngine` among tables (the
    tables of a broker's trees, or every table of a simulation); by default the
    table has its own."""

    def __init__(self, broker: str, *, engine: AtomEngine | None = None) -> None:
        self.broker = broker
        self._contrib: dict[str, dict[str, Delta]] = {}
        self._plans: dict[str, LinkPlan] = {}
        self._exact = LinkMatcher(engine if engine is not None else AtomEngine())

    @property
    def links(self) -> list[str]:
        """Output links that have at least one conjunction below them."""
        return self._exact.links

    def entry(self, link: str) -> RoutingQuery:
        """The routing query of one output link (the union of what it sent)."""
        return self._exact.conjunctions(link)

    def held(self, link: str, profile_id: str) -> Delta | None:
        """The newest delta applied for ``profile_id`` on ``link`` (deleted or not)."""
        return self._contrib.get(link, {}).get(profile_id)

    def version(self, link: str, profile_id: str) -> int | None:
        held = self._contrib.get(link, {}).get(profile_id)
        return held.version if held else None

    def apply(self, link: str, delta: Delta) -> bool:
        """Apply a delta received on ``link``; False if it was old news (ignored)."""
        held = self._contrib.setdefault(link, {})
        old = held.get(delta.profile_id)
        if old is not None and old.version >= delta.version:
            return False
        held[delta.profile_id] = delta
        plan = self._plans.setdefault(link, LinkPlan())
        if delta.query is not None:
            plan.add(delta.need)
            for conj in delta.query:
                self._exact.add(link, conj)
        if old is not None and old.query is not None:
            plan.remove(old.need)
            for conj in old.query:
                self._exact.discard(link, conj)
        if plan.empty():
            del self._plans[link]
        return True

    def projection(self, link: str) -> Need | None:
        """The transformation query of ``link`` (:mod:`routing.incremental`), or
        ``None`` (a profile below it needs the whole message, or there is none).

        >>> from routing.dnf import map_profile
        >>> from routing.incremental import need, render
        >>> t, q = RoutingTable("b1"), "for $n in $msg/nitf/head return <t>{$n/title}</t>"
        >>> t.apply("b2", Delta("q1", 1, map_profile(q), need(q)))
        True
        >>> sorted(render(k) for k in t.projection("b2").keeps)
        ['/nitf/head', '/nitf/head/title (subtree)']
        >>> t.apply("b2", Delta("f1", 1, map_profile("/nitf"))), t.projection("b2")
        (True, None)
        """
        plan = self._plans.get(link)
        return plan.projection() if plan is not None else None

    def route(self, message) -> set[str]:
        """Output links whose routing query ``message`` matches (XML bytes or a
        :class:`formats.Message`). Conjunctions of links already chosen are skipped."""
        return self._exact.route(message)

    def stats(self) -> dict[str, int]:
        """Size of the table: links, conjunctions, distinct atoms, NFA states, guards
        (predicates)."""
        return self._exact.stats()
