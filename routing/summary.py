"""``Aggregate()`` with generalization: the routing query a broker stands for in its parent.

ONYX 4.2.1 (Figure 6(d)): a broker does not hand its parent every profile below it; it
sends its own *generalized* routing query — the queries of its local profiles and of
the routing tables' entries of its children, generalized to a size budget — and the
parent files that under its link to the broker. So every table, the root's included,
holds what its children stood for, never more than the budget allows, while the exact
queries stay only at the profiles' host brokers (whose exact match decides every
delivery: a generalized entry costs a link send at most, never a wrong delivery).

A :class:`Summary` is that query for one broadcast tree. It counts every conjunction
below the broker (:meth:`Summary.add` / :meth:`Summary.remove`, one reference per
profile or child entry that has it) and what the profiles below read of a message
(their merged :func:`~routing.incremental.need`: the transformation query the parent's
link runs, ONYX 4.2.2 — the paper's "new transformation query for its parent"). What the parent holds changes by :class:`~routing.table.Delta` s
of two kinds of pseudo-profile, each versioned by the summary's own counter so that a
replayed or reordered delta cannot undo a newer one:

* ``~c:<digest>``: one conjunction of the summary (``query`` = that conjunction, or
  ``None`` once it is gone), read by the parent like any profile's query;
* ``~need``: no conjunction, and the merged need (transformation query) of everything below.

With a :class:`~routing.budget.Budget` the summary is a
:class:`~routing.generalize.GeneralizedView` of the conjunctions below, filed in groups
by the skeleton of their anchor atom, first and last step (so that generalization (a), a group's
conjunctions becoming the one they all imply, keeps at least that path instead of
letting every message through; the parent holds the union): new ones are
generalized by the current plan's rules as they come; a *plan* — which rules, chosen
by what they cost in false positives on recent messages (:mod:`routing.planner`) — is
made where messages are (:meth:`Summary.plan_job`, beside the data path: a broker runs
it in a worker thread from copies) and adopted where the state changes (:meth:`Summary.adopt`, a logged packet in a running broker), so every
copy of a broker sends the same deltas. Without a budget the summary is exact: the
distinct conjunctions below (a profile whose conjunctions a parent holds already sends
nothing).

>>> from routing.dnf import map_profile
>>> s = Summary(None)
>>> [d.profile_id[:3] for d in s.add(map_profile("/nitf//hl1"))]   # a conjunction, the need
['~c:', '~ne']
>>> s.add(map_profile("/nitf//hl1")), len(s)        # the parent holds it already
([], 1)
>>> s.remove(map_profile("/nitf//hl1")), [d.query for d in s.remove(map_profile("/nitf//hl1"))]
([], [None, frozenset()])
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Callable

from routing import atoms as A
from routing.budget import Budget
from routing.dnf import Conjunction, RoutingQuery
from routing.generalize import GeneralizedView
from routing.matcher import AtomEngine, LinkMatcher, anchor
from routing.planner import Plan
from routing.incremental import NOTHING, WHOLE, LinkPlan, Needed
from routing.table import Delta

NEED_ID = "~need"
"""The pseudo-profile that carries a summary's merged need."""


def group(conj: Conjunction) -> str:
    """The group a conjunction is generalized in: its anchor's skeleton, shortened to
    its first and last step (so a group's common conjunction keeps at least that).

    >>> group(frozenset({"/quote/symbol[. = 'S1']", "/quote"})), group(frozenset({"/a/b/c[@x = '1']"}))
    ('//symbol', '/a//c')
    """
    if not conj:
        return ""
    skeleton = A.skeleton(anchor(conj))
    return A.shorten(skeleton) or skeleton


def conjunction_id(conj: Conjunction) -> str:
    """The pseudo-profile id of one conjunction of a summary (stable across copies).

    >>> conjunction_id(frozenset({"/a", "/b"})) == conjunction_id(frozenset({"/b", "/a"}))
    True
    """
    return "~c:" + hashlib.blake2b("\n".join(sorted(conj)).encode(), digest_size=12).hexdigest()


class Summary:
    """The generalized routing query of one broker in one tree (see module docstring).
    ``budget`` None: exact. ``samples``: recent messages a plan is measured on;
    ``engine``: the :class:`~routing.matcher.AtomEngine` the summary's atoms live in
    (never one that routes: a summary is sent, not matched)."""

    def __init__(self, budget: Budget | None, samples: int = 32, engine: AtomEngine | None = None) -> None:
        engine = engine if engine is not None else AtomEngine()
        self.budget = budget
        self.exact = LinkMatcher(engine)
        self.view = GeneralizedView(budget, samples, engine=engine) if budget is not None else None
        self.needs = LinkPlan()
        self.counter = 0  # versions of the deltas sent so far
        self.sent: set[Conjunction] = set()  # what the parent holds
        self._need_sent: Needed | None = None
        self._journal: list[tuple[str, Conjunction, bool]] = []
        self._held: Counter[Conjunction] = Counter()  # groups whose view has the conjunction
        self.pending = False
        """A plan is on its way (a copy asked for it to be adopted, not yet seen)."""

    def __len__(self) -> int:
        return len(self.sent)

    @property
    def conjunctions(self) -> frozenset[Conjunction]:
        """What the parent holds for this broker."""
        return frozenset(self.sent)

    # -- what is below changes ----------------------------------------------------------

    def add(self, query: RoutingQuery, need: Needed = WHOLE) -> list[Delta]:
        """A profile (or a child's entry) with ``query`` and ``need`` is now below;
        the deltas for the parent."""
        return self.change((query, need), None)

    def remove(self, query: RoutingQuery, need: Needed = WHOLE) -> list[Delta]:
        """What :meth:`add` added is gone; the deltas for the parent."""
        return self.change(None, (query, need))

    def change(self, added: tuple[RoutingQuery, Needed] | None,
               removed: tuple[RoutingQuery, Needed] | None) -> list[Delta]:
        """One thing below replaced by another (either may be None); the deltas for
        the parent. What stays is never retracted and sent again."""
        if added is not None:
            for conj in added[0]:
                self._add(conj)
            self.needs.add(added[1])
        if removed is not None:
            for conj in removed[0]:
                self._discard(conj)
            self.needs.remove(removed[1])
        return self._deltas()

    def _add(self, conj: Conjunction) -> None:
        link = group(conj)
        if self.exact.add(link, conj):
            if self.view is not None:
                self.view.add(link, conj, self.exact)
                if self.view.rebuilds and not self.budget.fits(self.view.matcher.stats()):
                    self.view.collapse(link)  # within budget until the next plan
            else:
                self._journal.append((link, conj, True))

    def _discard(self, conj: Conjunction) -> None:
        link = group(conj)
        if self.exact.discard(link, conj):
            if self.view is not None:
                self.view.discard(link, conj, self.exact)
            else:
                self._journal.append((link, conj, False))

    # -- generalizing -------------------------------------------------------------------

    def observe(self, message) -> None:
        """A message of this tree reached the broker: one more sample for plans."""
        if self.view is not None:
            self.view.observe(message)

    def plan(self) -> Plan | None:
        """A new plan when one is due (over budget, first samples, many changes since
        the last) and none is on its way; else None. Costs what planning costs."""
        job = self.plan_job()
        return None if job is None else job()

    def plan_job(self) -> Callable[[], Plan] | None:
        """:meth:`plan` in two steps: what it needs is copied now (the conjunctions
        below, the samples), and the function returned makes the plan from the copies
        alone, so that it may run in another thread while this summary changes (a
        broker plans beside its data path: a plan of 13k conjunctions takes seconds)."""
        if self.view is None or self.pending or not self.view.samples or not self.view.due(self.exact):
            return None
        self.pending = True
        items, samples, budget = list(self.exact.items()), list(self.view.samples), self.budget
        headroom = self.view.headroom

        def job() -> Plan:
            engine = AtomEngine()
            exact = LinkMatcher(engine)
            for link, conj in items:
                exact.add(link, conj)
            view = GeneralizedView(budget, len(samples), headroom=headroom, engine=engine)
            view.samples.extend(samples)
            return view.plan(exact)

        return job

    def adopt(self, plan: Plan) -> list[Delta]:
        """Generalize what is below by ``plan``; the deltas for the parent."""
        self.pending = False
        if self.view is None:
            return []
        self.view.adopt(self.exact, plan)
        return self._deltas()

    # -- deltas ---------------------------------------------------------------------------

    def _deltas(self) -> list[Delta]:
        journal = self.view.journal if self.view is not None else self._journal
        touched = set()
        for _, conj, added in journal:
            self._held[conj] += 1 if added else -1
            touched.add(conj)
        journal.clear()
        out = []
        # Sorted, so that every copy numbers the same deltas the same way.
        for conj in sorted(touched, key=_text):
            present = self._held[conj] > 0
            if not present:
                del self._held[conj]
            if present and conj not in self.sent:
                self.sent.add(conj)
                out.append(Delta(conjunction_id(conj), self._next(), frozenset({conj}), NOTHING))
            elif not present and conj in self.sent:
                self.sent.discard(conj)
                out.append(Delta(conjunction_id(conj), self._next(), None))
        need = self.needs.need()
        if need != self._need_sent and not (self._need_sent is None and need == NOTHING):
            self._need_sent = need
            out.append(Delta(NEED_ID, self._next(), frozenset(), need))
        return out

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def stats(self) -> dict[str, int]:
        """Size of what the parent holds (``atoms``, ``nfa_states``, ``guards``,
        ``conjunctions``) and of the exact queries below (``exact_*``)."""
        out = (self.view.matcher if self.view is not None else self.exact).stats()
        out.pop("links", None)
        out.update({f"exact_{k}": v for k, v in self.exact.stats().items() if k != "links"})
        out["plans"] = self.view.rebuilds if self.view is not None else 0
        return out


def _text(conj: Conjunction) -> str:
    return "\n".join(sorted(conj))
