"""Routing tables: ``Collect()`` and ``Aggregate()`` over per-profile deltas.

A broker keeps one :class:`RoutingTable` per broadcast tree it is in. For each output
link (a child broker) the table holds the routing queries of every profile hosted
below that link, and matches a message against all of them at once with one shared
:class:`yfilter.Engine` whose profiles are the distinct atoms (absolute linear paths)
and whose targets — through a counting step over conjunctions — are the links.

Changes travel as :class:`Delta` s: "profile P, at version v, contributes query Q"
(``Q is None``: P is gone), with what P reads of a message (its
:func:`~routing.projection.need`). The needs of the profiles below a link make the
link's transformation plan (:meth:`RoutingTable.projection`, ONYX 4.2.2): while every
one of them reads only parts of a message, the link can carry the projection. A table applies a delta only if its version is newer than
what it holds for that profile on that link, so replays and reordering cannot corrupt
it; the same delta, relabelled with this broker as the link, is what ``Aggregate()``
sends to the parent (see :meth:`RoutingTable.aggregate`). Deleting the last profile
below a link removes the link's entry.

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

from collections import Counter
from dataclasses import dataclass

from routing.dnf import RoutingQuery
from routing.generalize import Budget, GeneralizedView
from routing.matcher import AtomEngine, LinkMatcher
from routing.projection import WHOLE, LinkPlan, Needed, Projection, need_from_json, need_to_json


@dataclass(frozen=True)
class Delta:
    """One profile's routing query at a version (``query=None`` means deleted) and
    what the profile reads of a message (:data:`~routing.projection.WHOLE` unless it
    is a transformation profile)."""

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

    With a ``budget`` the table routes with a generalized view that fits it (see
    :mod:`routing.generalize`); contributions, entries and deltas stay exact.
    ``samples`` is how many recent messages measure what generalizing costs.
    ``engine`` shares one :class:`~routing.matcher.AtomEngine` among tables (the
    tables of a broker's trees, or every table of a simulation); by default the
    table has its own."""

    def __init__(self, broker: str, budget: Budget | None = None, *, samples: int = 32,
                 engine: AtomEngine | None = None) -> None:
        self.broker = broker
        self._contrib: dict[str, dict[str, Delta]] = {}
        self._plans: dict[str, LinkPlan] = {}
        engine = engine if engine is not None else AtomEngine()
        self._exact = LinkMatcher(engine)
        self._view = GeneralizedView(budget, samples, engine=engine) if budget is not None else None
        self.false_positives: Counter[str] = Counter()
        """Per link, messages the generalized view sent down it that the exact table
        would not have (counted as they are routed; the reader may clear it)."""

    @property
    def budget(self) -> Budget | None:
        return None if self._view is None else self._view.budget

    @property
    def links(self) -> list[str]:
        """Output links that have at least one profile below them."""
        return self._exact.links

    def entry(self, link: str) -> RoutingQuery:
        """The routing query of one output link (the union of its profiles' queries)."""
        return self._exact.conjunctions(link)

    def view(self, link: str) -> RoutingQuery:
        """The query this table routes ``link`` with: :meth:`entry`, or its
        generalization when the table has a budget."""
        return self.entry(link) if self._view is None else self._view.matcher.conjunctions(link)

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
                if self._exact.add(link, conj) and self._view is not None:
                    self._view.add(link, conj, self._exact)
        if old is not None and old.query is not None:
            plan.remove(old.need)
            for conj in old.query:
                if self._exact.discard(link, conj) and self._view is not None:
                    self._view.discard(link, conj, self._exact)
        if not plan.whole and not plan.keeps:
            del self._plans[link]
        return True

    def projection(self, link: str) -> Projection | None:
        """What ``link`` may carry instead of the whole message: the projection on what
        every profile below it reads, or ``None`` (one of them needs the whole message,
        or there is none).

        >>> from routing.dnf import map_profile
        >>> from routing.projection import need
        >>> t, q = RoutingTable("b1"), "for $n in $msg/nitf/head return <t>{$n/title}</t>"
        >>> t.apply("b2", Delta("q1", 1, map_profile(q), need(q)))
        True
        >>> print(t.projection("b2"))
        /nitf/head
        /nitf/head/title (subtree)
        >>> t.apply("b2", Delta("f1", 1, map_profile("/nitf"))), t.projection("b2")
        (True, None)
        """
        plan = self._plans.get(link)
        return plan.projection() if plan is not None else None

    def route(self, message) -> set[str]:
        """Output links whose routing query ``message`` matches (XML bytes or a
        :class:`formats.Message`). Conjunctions of links already chosen are skipped.
        A table with a budget samples the message and re-plans its view first when
        that is due (see :meth:`GeneralizedView.due`)."""
        if self._view is None:
            return self._exact.route(message)
        message = self._view.observe(message)
        if self._view.due(self._exact):
            self._view.rebuild(self._exact)
        chosen = self._view.matcher.route(message)
        if chosen:
            # The exact answer costs the counting step only: the view and the table share
            # the atom engine, which remembers the message's atoms.
            for link in chosen - self._exact.route(message):
                self.false_positives[link] += 1
        return chosen

    @property
    def plans(self) -> int:
        """Generalized views planned so far (0 without a budget)."""
        return 0 if self._view is None else self._view.rebuilds

    def regeneralize(self) -> None:
        """Re-plan the generalized view now (with the messages sampled so far)."""
        if self._view is None:
            raise ValueError(f"routing table of {self.broker} has no budget to generalize to")
        self._view.rebuild(self._exact)

    def aggregate(self, local: dict[str, Delta] | None = None) -> list[Delta]:
        """``Aggregate()``: the whole table (plus local profiles' deltas) as deltas for
        the parent, where they are all filed under the link to this broker. Used to
        (re)build a parent's entry; single changes are forwarded as they come."""
        out: dict[str, Delta] = {}
        for held in [*self._contrib.values(), local or {}]:
            for pid, delta in held.items():
                if pid not in out or out[pid].version < delta.version:
                    out[pid] = delta
        return [out[pid] for pid in sorted(out)]

    def stats(self) -> dict[str, int]:
        """Size of what the table routes with — links, conjunctions, distinct atoms,
        NFA states, guards (predicates) — and, with a budget, the same of the exact
        table as ``exact_*`` plus ``rebuilds`` (plans made so far)."""
        if self._view is None:
            return self._exact.stats()
        out = self._view.matcher.stats()
        out.update({f"exact_{k}": v for k, v in self._exact.stats().items()})
        out["rebuilds"] = self._view.rebuilds
        return out
