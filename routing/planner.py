"""Choosing generalizations: a greedy search that fits a budget and loses little.

:func:`plan_view` starts from an exact table — distinct ``(link, conjunction)``
pairs — and repeatedly applies the candidate generalization with the best ratio of
size saved to filtering power lost, until the view fits the target budget:

``drop``     all atoms with one skeleton lose their predicates            (kind b)
``strip``    atoms equal but for one step's predicates lose them          (kind b)
``merge``    atoms differing in one simple predicate merge it             (kind c)
``shorten``  all atoms with one shortened form take it                    (kind d)
``common``   a link's conjunctions become the one they all imply          (kind a)
``forget``   an atom leaves every conjunction that has other atoms too    (extra)

Size saved is the change of the :class:`~routing.budget.SizeModel`, each measure
weighted by one over its limit (only measures over the target count). Filtering
power lost is the expected number of extra (message, link) forwardings: a link's
forwarding probability is ``(n + π) / (K + 1)`` where ``n`` counts the ``K`` sample
messages the link's query matches (atoms' matches are bit masks; a conjunction
matches where all its atoms do, a link where any conjunction does) and ``π`` is one
pseudo-message: the chance that a fresh message matches, with each conjunction
independent and matching with the product over its atoms of ``(matches + mass) /
(K + 1)``; ``mass`` is 1/2 for an exact atom and the masses it replaced for a
generalized one, so merging values never seen or dropping a predicate still costs
something. The sample bounds what a big link can be believed to let through, so
routing everything down a link costs what it should.

The search is lazy: candidates wait in a heap with the price they had when pushed;
the best is re-priced when it comes out and applied only if it is still the best.

Atom-level choices become :class:`Rules`, which generalize any conjunction —
including ones that arrive after planning — the same way.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from routing import atoms as A
from routing.budget import Budget, SizeModel
from routing.dnf import Conjunction

Bits = Callable[[Iterable[str]], dict[str, int]]
"""Atoms -> bit mask of the sample messages each one matches."""


class Rules:
    """Atom rewrites (drop / merge / shorten) and forgotten atoms, in the order they
    were chosen. :meth:`apply` rewrites one atom as the plan did; :meth:`conjunction`
    also forgets what the plan forgot.

    >>> r = Rules()
    >>> r.drop("/a/b")
    >>> r.shorten("/a//b")
    >>> r.apply("/a/b[@x = '1']"), r.apply("/a/q/b"), r.apply("/c")
    ('/a/b', '/a//b', '/c')
    >>> r.forget("/c")
    >>> sorted(r.conjunction(frozenset({"/c", "/a/q/b"}))), sorted(r.conjunction(frozenset({"/c"})))
    (['/a//b'], ['/c'])
    >>> Rules.from_json(r.to_json()).apply("/a/b[@x = '2']")   # what a summary packet carries
    '/a/b'
    """

    def __init__(self) -> None:
        self._drop: dict[str, int] = {}                                 # skeleton -> rule no.
        self._strip: dict[str, int] = {}                                # atom less one step's preds -> no.
        self._shorten: dict[str, int] = {}                              # shortened atom -> rule no.
        self._merge: dict[tuple, tuple[int, A.PredSummary, str]] = {}   # key -> (no., summary, atom)
        self._forget: dict[str, int] = {}                               # atom -> rule no.
        self._n = 0
        self._cache: dict[str, str] = {}
        self._made: list[list] = []  # every rule in the order made: what to_json() carries

    def to_json(self) -> list[list]:
        """The rules as JSON, in the order they were made (so :meth:`from_json`
        numbers them the same and rewrites every atom the same way)."""
        return [list(r) for r in self._made]

    @classmethod
    def from_json(cls, data: list) -> "Rules":
        """The inverse of :meth:`to_json`; ``ValueError`` for anything else."""
        rules = cls()
        try:
            for kind, *args in data:
                if kind == "merge":
                    (skel, i, operand), s, result = args
                    summary = A.PredSummary(s["operand"], s["kind"], frozenset(s.get("values", ())),
                                            s.get("lo"), bool(s.get("lo_open")), s.get("hi"), bool(s.get("hi_open")))
                    rules.merge((str(skel), int(i), str(operand)), summary, str(result))
                elif kind in ("drop", "strip", "shorten", "forget"):
                    (arg,) = args
                    getattr(rules, kind)(str(arg))
                else:
                    raise ValueError(f"unknown rule kind {kind!r}")
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not generalization rules: {exc}") from exc
        return rules

    def __len__(self) -> int:
        return self._n

    def _next(self) -> int:
        self._cache.clear()
        self._n += 1
        return self._n

    def drop(self, skeleton: str) -> None:
        if skeleton not in self._drop:
            self._made.append(("drop", skeleton))
            self._drop[skeleton] = self._next()

    def strip(self, result: str) -> None:
        if result not in self._strip:
            self._made.append(("strip", result))
            self._strip[result] = self._next()

    def shorten(self, result: str) -> None:
        if result not in self._shorten:
            self._made.append(("shorten", result))
            self._shorten[result] = self._next()

    def merge(self, key: tuple, summary: A.PredSummary, result: str) -> None:
        s = {"operand": summary.operand, "kind": summary.kind, "values": sorted(summary.values),
             "lo": summary.lo, "lo_open": summary.lo_open, "hi": summary.hi, "hi_open": summary.hi_open}
        self._made.append(("merge", list(key), s, result))
        self._merge[key] = (self._next(), summary, result)

    def forget(self, atom: str) -> None:
        if atom not in self._forget:
            self._made.append(("forget", atom))
            self._forget[atom] = self._next()

    def apply(self, atom: str) -> str:
        """The generalized form of ``atom`` (itself if no rule covers it)."""
        out = self._cache.get(atom)
        if out is None:
            out = self._cache[atom] = self._apply(atom)
        return out

    def _apply(self, atom: str) -> str:
        after = 0
        while True:
            best: tuple[int, str] | None = None
            i = self._drop.get(A.skeleton(atom), 0)
            if i > after and A.has_predicates(atom):
                best = (i, A.skeleton(atom))
            for variant in A.strip_steps(atom):
                i = self._strip.get(variant, 0)
                if i > after and (best is None or i < best[0]):
                    best = (i, variant)
            short = A.shorten(atom)
            i = self._shorten.get(short, 0) if short else 0
            if i > after and (best is None or i < best[0]):
                best = (i, short)
            key = A.merge_key(atom)
            if key in self._merge:
                i, summary, result = self._merge[key]
                if i > after and (best is None or i < best[0]) and summary.covers(A.summary(atom)):
                    best = (i, result)
            if best is None:
                return atom
            after, atom = best

    def conjunction(self, conj: Conjunction) -> Conjunction:
        """``conj`` with every atom rewritten and forgotten atoms left out (the one
        forgotten last stays if all of them were)."""
        atoms = {self.apply(a) for a in conj}
        kept = {a for a in atoms if a not in self._forget}
        if kept or not atoms:
            return frozenset(kept)
        return frozenset({max(atoms, key=self._forget.__getitem__)})


@dataclass
class Plan:
    """What :func:`plan_view` chose: the rules, the links collapsed to one
    conjunction (link -> conjunction), and how many choices of each kind."""

    rules: Rules = field(default_factory=Rules)
    common: dict[str, Conjunction] = field(default_factory=dict)
    kinds: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        """The plan as JSON (what a broker logs so that every copy of it adopts the
        same plan, see :mod:`routing.summary`).

        >>> p = Plan(common={"": frozenset({"/a"})}, kinds=Counter(common=1))
        >>> Plan.from_json(p.to_json()) == p
        True
        """
        return {"rules": self.rules.to_json(), "common": {link: sorted(c) for link, c in sorted(self.common.items())},
                "kinds": dict(self.kinds)}

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        """The inverse of :meth:`to_json`; ``ValueError`` for anything else."""
        try:
            common = {str(link): frozenset(map(str, atoms)) for link, atoms in data["common"].items()}
            return cls(Rules.from_json(data["rules"]), common, Counter({str(k): int(v) for k, v in data["kinds"].items()}))
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a generalization plan: {exc!r}") from exc

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Plan) and self.rules.to_json() == other.rules.to_json()
                and self.common == other.common and self.kinds == other.kinds)


_FINEST_FIRST = {"merge": 0, "forget": 1, "strip": 2, "drop": 3, "shorten": 4, "common": 5}  # ties: lose the least
_KINDS = frozenset(_FINEST_FIRST)
_COARSE = frozenset({"merge", "drop", "shorten", "common"})  # one candidate per group of atoms
_COARSE_UNTIL = 4.0  # the coarse search runs while the view is more than this many times the target
_BATCH_UNTIL = 16.0  # the batch pass runs while the view is more than this many times the target


@dataclass
class _Candidate:
    kind: str
    key: object                    # skeleton / merge key / shortened atom / forgotten atom / link
    group: frozenset[str] = frozenset()   # view atoms replaced (drop, merge, shorten)
    result: str | None = None      # the atom replacing them
    conj: Conjunction | None = None       # common: the link's one conjunction
    summary: A.PredSummary | None = None  # merge
    score: float = 0.0
    delta: dict | None = None


class _Planner:
    def __init__(self, items: Iterable[tuple[str, Conjunction]], bits: Bits, n_samples: int) -> None:
        self.view: dict[str, set[Conjunction]] = defaultdict(set)
        self.where: dict[str, set[tuple[str, Conjunction]]] = {}
        self.links_of: dict[str, Counter[str]] = {}  # atom -> links using it (with counts)
        self.link_atoms: Counter[str] = Counter()     # link -> distinct atoms it uses
        # Per (link, conjunction), once bits are known: (sample mask, log(1 - prior)).
        self.est: dict[tuple[str, Conjunction], tuple[int, float]] | None = None
        self.index: dict[str, dict] = {kind: defaultdict(set) for kind in ("drop", "strip", "merge", "shorten")}
        self.model = SizeModel()
        for link, conj in items:
            self._put(link, conj)
        self.bits_fn = bits
        self.k = n_samples
        self.full = (1 << n_samples) - 1
        self.mass: dict[str, float] = dict.fromkeys(self.where, 0.5)
        self.bits: dict[str, int] = {}
        derived = set(self.where)
        for a in self.where:
            s = A.shorten(a)
            derived.update(filter(None, (A.skeleton(a), s, s and A.skeleton(s), s and A.shorten(s))))
            derived.update(A.strip_steps(a))
        self._need(derived)
        self.cover: dict[str, list[int]] = defaultdict(lambda: [0] * self.k)  # conjunctions matching sample i
        self.union: Counter[str] = Counter()                  # sample messages the link matches
        self.log_q: dict[str, float] = defaultdict(float)    # log P(no conjunction matches a fresh one)
        self.est = {}
        for link, conjs in self.view.items():
            for conj in conjs:
                self._count(link, conj, self._est(conj))
        self.plan = Plan()

    # -- the view ---------------------------------------------------------------------
    def _put(self, link: str, conj: Conjunction) -> None:
        if conj in self.view[link]:
            return
        self.view[link].add(conj)
        if self.est is not None:
            self._count(link, conj, self._est(conj))
        for a in conj:
            places = self.where.get(a)
            if places is None:
                places = self.where[a] = set()
                self.links_of[a] = Counter()
                self.model.add(a)
                self._index(a, True)
            places.add((link, conj))
            self.links_of[a][link] += 1
            if self.links_of[a][link] == 1:
                self.link_atoms[link] += 1

    def _take(self, link: str, conj: Conjunction) -> None:
        self.view[link].discard(conj)
        self._uncount(link, conj)
        for a in conj:
            places = self.where[a]
            places.discard((link, conj))
            links = self.links_of[a]
            links[link] -= 1
            if not links[link]:
                del links[link]
                self.link_atoms[link] -= 1
            if not places:
                del self.where[a], self.links_of[a]
                self.model.remove(a)
                self._index(a, False)

    def _index(self, atom: str, present: bool) -> None:
        keys = [("drop", A.skeleton(atom) if A.has_predicates(atom) else None),
                ("merge", A.merge_key(atom)), ("shorten", A.shorten(atom)),
                *(("strip", v) for v in A.strip_steps(atom))]
        for kind, key in keys:
            if key is not None:
                group = self.index[kind][key]
                if present:
                    group.add(atom)
                else:
                    group.discard(atom)
                    if not group:
                        del self.index[kind][key]

    # -- estimates ----------------------------------------------------------------------
    def _need(self, atoms: Iterable[str]) -> None:
        missing = [a for a in atoms if a not in self.bits]
        if missing:
            self.bits.update(self.bits_fn(missing))

    def _est(self, conj: Iterable[str], masses: dict[str, float] | None = None) -> tuple[int, float]:
        """(sample messages the conjunction matches, log(1 - its prior))."""
        mask, prior = self.full, 1.0
        for a in conj:
            bits = self.bits[a]
            mask &= bits
            m = masses[a] if masses and a in masses else self.mass.get(a, 1.0)
            prior *= (bits.bit_count() + m) / (self.k + 1)
        return mask, math.log1p(-min(prior, 1.0 - 1e-9))

    def _count(self, link: str, conj: Conjunction, est: tuple[int, float]) -> None:
        self.est[(link, conj)] = est
        mask, log_q = est
        self.log_q[link] += log_q
        cover = self.cover[link]
        for i in _ones(mask):
            cover[i] += 1
            if cover[i] == 1:
                self.union[link] += 1

    def _uncount(self, link: str, conj: Conjunction) -> None:
        mask, log_q = self.est.pop((link, conj))
        self.log_q[link] -= log_q
        cover = self.cover[link]
        for i in _ones(mask):
            cover[i] -= 1
            if not cover[i]:
                self.union[link] -= 1

    def _lost(self, changes: dict[str, list]) -> float:
        """Extra forwardings (in sample messages, plus the pseudo-message) if each
        link's conjunctions changed by ``changes``: link -> ``(old, new)`` estimate
        pairs, ``None`` for a conjunction that goes or comes."""
        lost = 0.0
        for link, pairs in changes.items():
            cover, bit_delta, d_log = self.cover[link], Counter(), 0.0
            for old, new in pairs:
                if old is not None:
                    bit_delta.subtract(_ones(old[0]))
                    d_log -= old[1]
                if new is not None:
                    bit_delta.update(_ones(new[0]))
                    d_log += new[1]
            d_union = sum((cover[i] + d > 0) - (cover[i] > 0) for i, d in bit_delta.items() if d)
            log_q = self.log_q[link]
            lost += d_union + math.exp(log_q) - math.exp(min(log_q + d_log, 0.0))
        return max(lost, 0.0)

    # -- candidates -------------------------------------------------------------------------
    def candidate(self, kind: str, key) -> _Candidate | None:
        """The candidate ``(kind, key)`` as the view is now (None if it does nothing)."""
        if kind == "common":
            conjs = self.view.get(key, ())
            if len(conjs) < 2:
                return None
            common = A.common(conjs)
            self._need(common)
            return _Candidate(kind, key, conj=common)
        if kind == "forget":
            if key not in self.where or not any(len(c) > 1 for _, c in self.where[key]):
                return None
            return _Candidate(kind, key, group=frozenset({key}))
        group = self.index[kind].get(key)
        if not group:
            return None
        if kind == "merge":
            if len(group) < 2:
                return None
            members = sorted(group)
            summary = A.summary(members[0])
            for a in members[1:]:
                summary = summary.join(A.summary(a))
            result = A.merged(key, summary)
            if result not in self.bits:
                if summary.kind == "values":
                    self.bits[result] = 0
                    for a in members:
                        self.bits[result] |= self.bits[a]  # a value set matches iff one value does
                else:
                    self._need([result])
            return _Candidate(kind, key, frozenset(group) - {result}, result, summary=summary)
        self._need([key])
        return _Candidate(kind, key, frozenset(group), key)

    def _result_mass(self, c: _Candidate) -> float:
        return min(1.0, self.mass.get(c.result, 0.0) + sum(self.mass[a] for a in c.group))

    def _places(self, c: _Candidate) -> set[tuple[str, Conjunction]]:
        if c.kind == "common":
            return {(c.key, conj) for conj in self.view[c.key]}
        if c.kind == "forget":
            return {p for p in self.where[c.key] if len(p[1]) > 1}
        return {p for a in c.group for p in self.where[a]}

    def _rewrite(self, c: _Candidate, conj: Conjunction) -> Conjunction:
        if c.kind == "forget":
            return conj - c.group
        return frozenset(c.result if a in c.group else a for a in conj)

    def price(self, c: _Candidate, weights: dict[str, float]) -> None:
        """Size saved (weighted) over filtering power lost."""
        changes: dict[str, list] = defaultdict(list)
        if c.kind == "common":
            gone = {a for conj in self.view[c.key] for a in conj if len(self.links_of[a]) == 1}
            c.delta = self.model.delta(gone, c.conj)
            changes[c.key] = [(self.est[(c.key, conj)], None) for conj in self.view[c.key]]
            changes[c.key].append((None, self._est(c.conj)))
        else:
            places = self._places(c)
            if c.kind == "forget":
                whole = len(places) == len(self.where[c.key])
                c.delta = self.model.delta(c.group if whole else (), ())
                masses = None
            else:
                c.delta = self.model.delta(c.group, [c.result])
                masses = {c.result: self._result_mass(c)}
            for link, conj in places:
                changes[link].append((self.est[(link, conj)], self._est(self._rewrite(c, conj), masses)))
        gain = -sum(w * c.delta[k] for k, w in weights.items())
        c.score = gain / (self._lost(changes) + 1e-6) if gain > 0 else 0.0

    def apply(self, c: _Candidate) -> None:
        self.plan.kinds[c.kind] += 1
        if c.kind == "common":
            for conj in list(self.view[c.key]):
                self._take(c.key, conj)
            for a in c.conj:
                self.mass.setdefault(a, 1.0)
            self._put(c.key, c.conj)
            self.plan.common[c.key] = c.conj
        else:
            places = self._places(c)
            repriced = set()
            if c.kind != "forget":
                self.mass[c.result] = self._result_mass(c)
                repriced = self.where.get(c.result, set()) - places  # the result's mass changed
            for link, conj in places:
                self._take(link, conj)
                self._put(link, self._rewrite(c, conj))
            for link, conj in repriced:
                self._uncount(link, conj)
                self._count(link, conj, self._est(conj))
            if c.kind == "drop":
                self.plan.rules.drop(c.result)
            elif c.kind == "strip":
                self.plan.rules.strip(c.result)
            elif c.kind == "shorten":
                self.plan.rules.shorten(c.result)
            elif c.kind == "merge":
                self.plan.rules.merge(c.key, c.summary, c.result)
            else:
                self.plan.rules.forget(c.key)

    def _keys(self, atoms: Iterable[str]) -> list[tuple[str, object]]:
        out = []
        for a in atoms:
            if A.has_predicates(a):
                out.append(("drop", A.skeleton(a)))
            out.extend(("strip", v) for v in A.strip_steps(a))
            if A.merge_key(a) is not None:
                out.append(("merge", A.merge_key(a)))
            if A.shorten(a) is not None:
                out.append(("shorten", A.shorten(a)))
            out.append(("forget", a))
        return out

    # -- the search ------------------------------------------------------------------------
    def run(self, target: Budget) -> Plan:
        limits = target.limits()

        def weights() -> dict[str, float]:
            size = self.model.size()
            return {k: 1.0 / max(lim, 1) for k, lim in limits.items() if size[k] > lim}

        def over() -> float:
            size = self.model.size()
            return max(size[k] / max(lim, 1) for k, lim in limits.items())

        if weights():
            self._saturated()
        # Far over the target only the kinds that act on whole groups are searched
        # (few candidates, big steps); close to it, atom by atom too. Very far over
        # it, each of those is priced once and they are taken best first (a batch).
        self._batch(weights, lambda: over() <= _BATCH_UNTIL)
        self._search(weights, _COARSE, lambda: over() <= _COARSE_UNTIL)
        self._search(weights, _KINDS, lambda: not weights())
        self._fallback(limits)
        for link in self.plan.common:
            (self.plan.common[link],) = self.view[link]
        return self.plan

    def _candidate_keys(self, kinds: frozenset[str]) -> list[tuple[str, object]]:
        """Every ``(kind, key)`` of ``kinds`` the view has now, in a fixed order."""
        keys = {(kind, key) for kind in self.index if kind in kinds for key in self.index[kind]}
        if "forget" in kinds:
            keys |= {("forget", a) for a in self.where}
        if "common" in kinds:
            keys |= {("common", link) for link in self.view}
        return sorted(keys, key=repr)

    def _batch(self, weights: Callable[[], dict[str, float]], done: Callable[[], bool]) -> None:
        """The coarse candidates priced once, taken best first until ``done()``. Far
        over the target most choices lose next to nothing and touch different
        atoms, so pricing them again after every choice (the lazy search) costs
        much and changes little: on a 40,000-atom table it made plans several times
        slower for about the same view."""
        if done():
            return
        w = weights()
        ranked = []
        for seq, (kind, key) in enumerate(self._candidate_keys(_COARSE)):
            c = self.candidate(kind, key)
            if c is not None:
                self.price(c, w)
                if c.score > 0:
                    ranked.append((-c.score, _FINEST_FIRST[kind], seq, kind, key))
        ranked.sort()
        for _, _, _, kind, key in ranked:
            if done():
                return
            c = self.candidate(kind, key)  # as the view is now: earlier choices may have changed it
            if c is not None:
                self.apply(c)

    def _search(self, weights: Callable[[], dict[str, float]], kinds: frozenset[str],
                done: Callable[[], bool]) -> None:
        """The lazy greedy over candidates of ``kinds`` until ``done()``."""
        heap: list = []
        seq = 0
        common_at: dict[str, int] = {}  # link -> its size when "common" was last priced

        def push(kind: str, key, w: dict[str, float]) -> None:
            nonlocal seq
            if kind not in kinds:
                return
            if kind == "common":
                common_at[key] = self.link_atoms[key]
            c = self.candidate(kind, key)
            if c is None:
                return
            self.price(c, w)
            if c.score > 0:
                seq += 1
                heapq.heappush(heap, (-c.score, _FINEST_FIRST[kind], seq, kind, key))

        if done():
            return
        w = weights()
        for kind, key in self._candidate_keys(kinds):
            push(kind, key, w)
        while heap and not done():
            _, _, _, kind, key = heapq.heappop(heap)
            c = self.candidate(kind, key)
            if c is None:
                continue
            self.price(c, w)
            if c.score <= 0:
                continue
            if heap and c.score < -heap[0][0]:
                seq += 1
                heapq.heappush(heap, (-c.score, _FINEST_FIRST[kind], seq, kind, key))
                continue
            self.apply(c)
            w = weights()
            new = [c.result] if c.result else list(c.conj or ())
            for kind2, key2 in self._keys(new):
                push(kind2, key2, w)
            if c.kind != "common":
                # Pricing "common" reads the whole link: do it again only once the
                # link has shrunk by a quarter, not after every change to it.
                for link in {link for a in new for link in self.links_of.get(a, ())}:
                    if self.link_atoms[link] <= 0.75 * common_at.get(link, math.inf):
                        push("common", link, w)

    def _saturated(self) -> None:
        """Links whose query matches every sample message become the conjunction
        their conjunctions all imply (often: route everything) before anything else:
        the sample says it costs at most the pseudo-message, and the big links near
        a tree's root, which would take the longest to price atom by atom, are
        usually such links."""
        if not self.k:
            return
        for link in sorted(self.view):
            if self.union[link] == self.k and len(self.view[link]) > 1:
                c = self.candidate("common", link)
                self.price(c, {})
                self.apply(c)

    def _fallback(self, limits: dict[str, int]) -> None:
        """Links that still do not fit become the one conjunction all of theirs imply
        (generalization (a)), biggest first; then every link the one conjunction all
        conjunctions of the view imply (ONYX Figure 6(d): the paths common to all
        disjuncts); then, as the paper reads "nothing common", one that lets
        everything through."""
        def fits() -> bool:
            size = self.model.size()
            return all(size[k] <= lim for k, lim in limits.items())

        order = sorted(self.view, key=lambda link: (-sum(len(c) for c in self.view[link]), link))
        for link in order:
            if fits():
                return
            conj = A.prune(A.common(self.view[link]))
            if self.view[link] != {conj}:
                self._need(conj)
                self.apply(_Candidate("common", link, conj=conj))
        for weakest in (False, True):
            if fits():
                return
            conj = frozenset() if weakest else A.prune(A.common(c for link in order for c in self.view[link]))
            self._need(conj)
            for link in order:
                if self.view[link] != {conj}:
                    self.apply(_Candidate("common", link, conj=conj))


def _ones(mask: int) -> list[int]:
    """Positions of the set bits of ``mask``."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def plan_view(items: Iterable[tuple[str, Conjunction]], bits: Bits, n_samples: int, target: Budget) -> Plan:
    """Choose generalizations for the distinct ``(link, conjunction)`` pairs of an
    exact table so that the view fits ``target``; ``bits(atoms)`` gives each atom's
    matches on the ``n_samples`` sample messages as bit masks."""
    return _Planner(items, bits, n_samples).run(target)
