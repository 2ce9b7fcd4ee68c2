"""Content generalization: the view a routing table routes with when it has a budget.

A routing table keeps every profile's contribution exactly (so deltas stay exact);
when it has a :class:`~routing.budget.Budget` it routes with a *generalized view*
derived from those contributions: fewer atoms, automaton states and predicates, at
the price of some false positives and never a false negative. The kinds of
generalization (issue 6, see :mod:`routing.atoms` for why each one is sound):

(a) ``common``   a link's conjunctions become one: the atoms all of them imply;
(b) ``drop``     atoms differing only in predicates lose them (``/a/b[@c='x']`` -> ``/a/b``),
    ``strip``    or only in one step's predicates lose those;
(c) ``merge``    predicates on the same step and operand merge into a value set or a
                 numeric range (``[@c='x']``, ``[@c='y']`` -> ``[@c='x' or @c='y']``);
(d) ``shorten``  paths keep their first and last step (``/a/b/c/d`` -> ``/a//d``);
(e) ``forget``   an atom leaves the conjunctions that have other atoms too.

:mod:`routing.planner` chooses them to fit the budget while losing as little
filtering power as possible on a sample of recent messages. :class:`GeneralizedView`
keeps the view in step with the exact table between plans — a new conjunction is
generalized by the plan's rules (an atom no rule covers stays exact, so nothing is
ever missed), a link collapsed by (a) keeps one conjunction that only gets weaker —
and re-plans when the view is over budget, when its sample has grown, or when many
deltas went by.

>>> from routing.matcher import LinkMatcher
>>> exact = LinkMatcher()
>>> for v in "xyz":
...     _ = exact.add("b5", frozenset({f"/nitf/head/pubdata[@edition.area = '{v}']"}))
>>> view = GeneralizedView(Budget(atoms=1))
>>> _ = view.observe(b"<nitf><head><pubdata edition.area='w'/></head></nitf>")
>>> for link, conj in exact.items():
...     view.add(link, conj, exact)
>>> view.rebuild(exact)
>>> [sorted(c) for c in view.matcher.conjunctions("b5")]
[["/nitf/head/pubdata[@edition.area = 'x' or @edition.area = 'y' or @edition.area = 'z']"]]
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Iterable

import formats
from routing import atoms as A
from routing.budget import Budget, BudgetError
from routing.dnf import Conjunction
from routing.matcher import AtomEngine, LinkMatcher
from routing.planner import Plan, Rules, plan_view

__all__ = ["Budget", "BudgetError", "GeneralizedView"]


class GeneralizedView:
    """A generalized, budget-fitting copy of an exact :class:`LinkMatcher`, updated
    conjunction by conjunction (:meth:`add` / :meth:`discard` after the exact
    matcher gained or lost a distinct conjunction) and re-planned by :meth:`rebuild`.

    ``samples`` recent messages (see :meth:`observe`) measure filtering power;
    a plan aims at ``headroom`` times the budget so that deltas fit for a while.
    :meth:`due` says when to re-plan: over budget; at the first message, and again
    once the sample is full (a plan of a big table costs seconds, so not at every
    step in between); or more than ``refresh`` times the table's conjunctions
    changed since (stale generalizations get tighter again).
    ``engine`` is the :class:`~routing.matcher.AtomEngine` the view matches with
    (shared with other tables, or None for one of its own)."""

    def __init__(self, budget: Budget, samples: int = 32, headroom: float = 0.8,
                 refresh: float = 0.25, engine: AtomEngine | None = None) -> None:
        if samples < 1:
            raise BudgetError("a generalized view needs room for at least one sample message")
        self.budget = budget
        self.headroom, self.refresh = headroom, refresh
        self._engine = engine if engine is not None else AtomEngine()
        self.matcher = LinkMatcher(self._engine)
        self.samples: deque = deque(maxlen=samples)
        self.rebuilds = 0
        self.kinds: Counter = Counter()
        self._rules = Rules()
        self._common: dict[str, Conjunction] = {}
        self._planned_with = 0
        self._changes = 0
        self.journal: list[tuple[str, Conjunction, bool]] = []
        """``(link, conjunction, added)`` for every conjunction the view gained or lost,
        in order, until the reader empties it (a summary turns them into deltas)."""

    def map(self, conj: Conjunction) -> Conjunction:
        """A conjunction under the current rules."""
        return self._rules.conjunction(conj)

    def add(self, link: str, conj: Conjunction, exact: LinkMatcher) -> None:
        """``exact`` just gained ``conj`` on ``link``."""
        self._changes += 1
        held = self._common.get(link)
        if held is None:
            self._add(link, self.map(conj))
            return
        implied = set().union(*(A.closure(a) for a in conj | self.map(conj)))
        weaker = A.prune(held & implied)
        if weaker != held:
            self._add(link, weaker)
            self._discard(link, held)
            self._common[link] = weaker

    def discard(self, link: str, conj: Conjunction, exact: LinkMatcher) -> None:
        """``exact`` just lost its last ``conj`` on ``link``."""
        self._changes += 1
        held = self._common.get(link)
        if held is None:
            self._discard(link, self.map(conj))
        elif not exact.count(link):
            self._discard(link, held)
            del self._common[link]

    def collapse(self, link: str) -> None:
        """Make ``link``'s conjunctions the one they all imply (kind a) until the next
        plan: what keeps a view within budget between plans, deterministically."""
        held = self.matcher.conjunctions(link)
        weaker = A.prune(A.common(held))
        if held == {weaker}:
            return
        for conj in held:
            while not self.matcher.discard(link, conj):
                pass
            self.journal.append((link, conj, False))
        self._add(link, weaker)
        self._common[link] = weaker

    def _add(self, link: str, conj: Conjunction) -> None:
        if self.matcher.add(link, conj):
            self.journal.append((link, conj, True))

    def _discard(self, link: str, conj: Conjunction) -> None:
        if self.matcher.discard(link, conj):
            self.journal.append((link, conj, False))

    def observe(self, message) -> formats.Message:
        """Remember a message this table routes (the newest ``samples`` are kept);
        returns it decoded, to be routed as such. What the sample matches is asked when
        a plan is made (:meth:`AtomEngine.sample_bits`), not of every message routed:
        most of a table's atoms are checked only when a candidate needs them."""
        if not isinstance(message, formats.Message):
            message = formats.decode("text", bytes(message) if not isinstance(message, str) else message.encode())
        self.samples.append(message)
        return message

    def due(self, exact: LinkMatcher) -> bool:
        n = len(self.samples)
        if self._planned_with < self.samples.maxlen and n >= (self.samples.maxlen if self._planned_with else 1):
            return True
        if self._changes > max(64, self.refresh * exact.total()):
            return True
        return not self.budget.fits(self.matcher.stats())

    def rebuild(self, exact: LinkMatcher) -> None:
        """Re-plan from the exact table and the current sample, then rebuild the view."""
        self.adopt(exact, self.plan(exact))

    def plan(self, exact: LinkMatcher) -> Plan:
        """A plan for the view from the exact table and the current sample, changing
        nothing (an exact table that fits the plan's target is kept as it is: an empty
        plan)."""
        target = self.budget.scaled(self.headroom)
        if target.fits(exact.stats()):
            return Plan()
        plan, matcher = self._plan(exact, target)
        matcher.close()
        return plan

    def adopt(self, exact: LinkMatcher, plan: Plan) -> None:
        """Rebuild the view from the exact table under ``plan`` (made here or by
        another copy of this view: the same plan on the same table gives the same
        view), noting in :attr:`journal` what changed."""
        matcher = self._build(exact, plan)
        old = set(self.matcher.items())
        new = set(matcher.items())
        self.journal += [(link, conj, False) for link, conj in old - new]
        self.journal += [(link, conj, True) for link, conj in new - old]
        self.matcher.close()
        self.matcher, self._rules, self._common = matcher, plan.rules, dict(plan.common)
        self.kinds = plan.kinds
        self.rebuilds += 1
        self._planned_with = len(self.samples)
        self._changes = 0

    def _plan(self, exact: LinkMatcher, target: Budget) -> tuple[Plan, LinkMatcher]:
        samples = list(self.samples)
        known = self._engine.sample_bits(exact.atoms, samples)

        def bits(atoms: Iterable[str]) -> dict[str, int]:
            # The table's atoms: what the sample matches. Derived
            # atoms: their skeleton's matches, exact for atoms without predicates and
            # an over-estimate otherwise (generalizing looks no cheaper than it is).
            out, derived = {}, {}
            for a in atoms:
                if a in known:
                    out[a] = known[a]
                else:
                    derived[a] = A.skeleton(a)
            if derived:
                skeleton_bits = self._engine.sample_bits(set(derived.values()), samples)
                out.update((a, skeleton_bits[sk]) for a, sk in derived.items())
            return out

        items = list(exact.items())
        for _ in range(4):
            plan = plan_view(items, bits, len(samples), target)
            matcher = self._build(exact, plan)
            size = matcher.stats()
            if self.budget.fits(size):
                break
            # The plan's rules, replayed on the exact table, can come out a little
            # bigger than the view the planner priced: aim lower and plan again.
            matcher.close()
            ratio = max(size[k] / max(lim, 1) for k, lim in self.budget.limits().items())
            target = target.scaled(0.9 / ratio)
        else:
            # Every link the one conjunction all of its conjunctions imply (kind a).
            plan = Plan(Rules(), {link: A.prune(A.common(exact.conjunctions(link))) for link in exact.links},
                        Counter(common=len(exact.links)))
            matcher = self._build(exact, plan)
        # ONYX Figure 6(d): every link the paths common to all conjunctions of the view.
        # Where that fits and lets fewer sample messages through, it is the plan.
        common = A.prune(A.common(c for _, c in items))
        paper = Plan(Rules(), {link: common for link in exact.links}, Counter(common=len(exact.links)))
        other = self._build(exact, paper)
        full = (1 << len(samples)) - 1
        if self.budget.fits(other.stats()) and (_let_through(other, bits, full), len(common)) < (
                _let_through(matcher, bits, full), 0):
            matcher.close()
            return paper, other
        other.close()
        return plan, matcher

    def _build(self, exact: LinkMatcher, plan: Plan) -> LinkMatcher:
        matcher = LinkMatcher(self._engine)
        for link, conj in plan.common.items():
            matcher.add(link, conj)
        for link, conj in exact.items():
            if link not in plan.common:
                matcher.add(link, plan.rules.conjunction(conj))
        return matcher


def _let_through(matcher: LinkMatcher, bits, full: int) -> int:
    """(sample, link) pairs ``matcher`` routes, from its atoms' sample bits (derived
    atoms by their skeleton's): the filtering power two plans are compared by."""
    items = list(matcher.items())
    known = bits({a for _, conj in items for a in conj})
    per_link: dict[str, int] = {}
    for link, conj in items:
        mask = full
        for a in conj:
            mask &= known[a]
        per_link[link] = per_link.get(link, 0) | mask
    return sum(m.bit_count() for m in per_link.values())

