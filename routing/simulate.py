"""The routing simulator: ONYX's query and data planes in one process.

``python -m routing.simulate --brokers 100 --profiles 10000 --messages 500 --churn 0.1``

An overlay of N brokers (a generator of :mod:`routing.generators`) with one
broadcast tree per source root. Subscribers' profiles (:mod:`routing.workload`) are
placed on host brokers by a :data:`~routing.placement.Placement`; each host matches
its profiles with its own :class:`yfilter.Engine`, and every registration, update or
deletion travels up every tree as a :class:`~routing.table.Delta`, hop by hop, each
broker applying it to its :class:`~routing.table.RoutingTable` and forwarding it if
it was news. Deltas in flight are delivered in a shuffled order and some are
replayed (``--replay``), so versioning and idempotence are exercised all the time.

Messages are published at random sources and routed down the source's tree; a
centralized engine over all live profiles is the ground truth. Per message the
simulator checks that every host with a matching profile was reached (else a false
negative) and that the set of profiles delivered is exactly the expected one, and
counts, per link, messages and bytes forwarded, forwardings nobody downstream needed
(false positives), what perfect routing would forward, and what flooding (every
message over every tree link) costs. With transformation profiles (``--transform
FRACTION``), each link also keeps a :class:`~routing.restructure.TransformPlan` of
the needs below it; a link whose profiles all read parts of the message carries the
projection (early projection), each broker projects what it received, and every
host runs its profiles on the message as it arrived: their results are compared
with the centralized engine's on the whole message. The same message is also sent
with early restructuring (:mod:`routing.restructure`): a link whose plan meets the
three conditions carries the restructured document, a broker that received one routes
it with a second set of routing tables holding the routing queries of the profiles'
remainder queries (sent up the trees as deltas like the others) and restructures it
again for the links below, and every host that received one runs the remainder
queries on it; their results, deliveries and reach are checked like the others. With
``--bindings N`` transformation profiles share N for paths. Churn (``--churn FRACTION`` of the profile
count in adds, updates and deletes) is interleaved with the messages. At the end
every routing table is compared with one built from scratch from the live profiles.

Everything is seeded: the same command prints the same numbers (timings aside).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import formats
from routing import generators
from routing.dnf import RoutingQuery, map_profile
from routing.generalize import Budget, BudgetError
from routing.matcher import AtomEngine
from routing.overlay import Overlay
from routing.placement import (STRATEGIES as PLACEMENTS, Placement, PlacementOptions,
                               PlacementRequest as Subscription, make_strategy)
from routing.projection import WHOLE
from routing.restructure import Reads, Restructuring, TransformPlan, reads, remainder, remainder_namespaces
from routing.table import Delta, RoutingTable
from routing.trees import BroadcastTree
from routing.workload import INTERESTS, Interests, Messages, WorkloadError, load_corpus
from yfilter import Engine
from yfilter.generators import Schema
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse

OVERLAYS = ("geometric", "transit-stub", "tree", "ring")
ENGINES = ("shared", "per-table")
DEFAULT_BUDGET = Budget(atoms=1000, states=3000, predicates=300)
RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"


class SimulationError(ValueError):
    """A simulation that cannot be set up as asked."""


@dataclass
class Config:
    """One simulation run (the command-line options, see ``--help``)."""

    brokers: int = 100
    profiles: int = 10_000
    messages: int = 500
    churn: float = 0.0
    seed: int = 0
    generalize: bool = False
    budget: Budget = DEFAULT_BUDGET
    interests: str = "uniform"
    placement: str = "nearest"
    overlay: str = "geometric"
    sources: int = 4
    replay: float = 0.1
    samples: int = 16
    corpus: str | None = None
    engine: str = "shared"
    transform: float = 0.0
    bindings: int = 0

    def check(self) -> None:
        if self.brokers < 2:
            raise SimulationError("a routing simulation needs at least 2 brokers")
        if self.profiles < 0 or self.messages < 0:
            raise SimulationError("--profiles and --messages cannot be negative")
        if not 0 <= self.churn:
            raise SimulationError("--churn is a fraction of the profiles (0 or more)")
        if not 0 <= self.transform <= 1:
            raise SimulationError("--transform is the share of transformation profiles, in [0, 1]")
        if self.bindings < 0 or (self.bindings and not self.transform):
            raise SimulationError("--bindings is how many for paths transformation profiles share "
                                  "(0 or more, and only with --transform)")
        if not 0 <= self.replay < 1:
            raise SimulationError("--replay is a probability in [0, 1)")
        if not 1 <= self.sources <= self.brokers:
            raise SimulationError(f"--sources must be between 1 and the number of brokers ({self.brokers})")
        for name, value, allowed in (("overlay", self.overlay, OVERLAYS), ("interests", self.interests, INTERESTS),
                                     ("placement", self.placement, PLACEMENTS), ("engine", self.engine, ENGINES)):
            if value not in allowed:
                raise SimulationError(f"unknown --{name} {value!r}; choose from {', '.join(allowed)}")


def build_overlay(kind: str, brokers: int, sources: int, seed: int) -> Overlay:
    """An overlay of about ``brokers`` brokers from one of :data:`OVERLAYS`."""
    if kind == "geometric":
        return generators.random_geometric(brokers, sources=sources, seed=seed)
    if kind == "transit-stub":
        return generators.transit_stub(max(1, round(brokers / 13)), 3, 4, sources=sources, seed=seed)
    if kind == "tree":
        return generators.tree(brokers, sources=sources, seed=seed)
    return generators.ring(brokers, sources=sources, seed=seed)


@dataclass
class _Profile:
    host: str
    home: str
    version: int
    text: str
    query: RoutingQuery
    reads: Reads
    rem_text: str | None  # the remainder query of a transformation profile
    rem_query: RoutingQuery | None  # and its routing query


@dataclass
class _Link:
    messages: int = 0
    bytes: int = 0
    flooding_messages: int = 0
    flooding_bytes: int = 0
    ideal_messages: int = 0
    ideal_bytes: int = 0
    projected_bytes: int = 0
    projected_messages: int = 0
    restructured_bytes: int = 0  # every forwarding of the run with early restructuring
    restructured_messages: int = 0  # the restructured ones
    restructuring_run_messages: int = 0
    false_positives: int = 0
    deltas: int = 0
    delta_bytes: int = 0
    remainder_deltas: int = 0
    remainder_delta_bytes: int = 0


Progress = Callable[[str, int, int, dict], None]


@dataclass
class _Totals:
    expected: int = 0
    delivered: int = 0
    false_negatives: int = 0
    mismatches: int = 0
    result_mismatches: int = 0
    restructured_false_negatives: int = 0
    restructured_mismatches: int = 0
    restructured_result_mismatches: int = 0
    adds: int = 0
    updates: int = 0
    deletes: int = 0
    suppressed_updates: int = 0
    timings: Counter = field(default_factory=Counter)


class Simulation:
    """One seeded simulation (see the module docstring); :meth:`run` returns the
    report as a JSON-ready dict."""

    def __init__(self, config: Config, placement: Placement | None = None,
                 progress: Progress | None = None) -> None:
        config.check()
        self.config = config
        self.rng = random.Random(config.seed)
        self.overlay = build_overlay(config.overlay, config.brokers, config.sources, config.seed)
        self.brokers = self.overlay.brokers
        self.trees = {root: self.overlay.tree(root) for root in self.overlay.roots}
        corpus = None
        schema = Schema.nitf()
        if config.corpus:
            corpus, schema = load_corpus(config.corpus)
        self.namespaces = dict(schema.namespaces)
        self.interests = Interests.build(config.interests, self.overlay, schema, config.seed,
                                         transform=config.transform, bindings=config.bindings)
        self.messages = Messages(schema, config.seed, corpus)
        if placement is None:
            tuning = PlacementOptions(seed=config.seed, schema=schema)
            placement = make_strategy(config.placement, self.overlay, tuning).choose
        self.place = placement
        budget = config.budget if config.generalize else None
        # Whether an atom matches a message does not depend on the broker asking, so
        # by default every table shares one atom engine and a message is matched
        # against the atoms once; the tables' counting steps stay per table.
        shared = AtomEngine() if config.engine == "shared" else None
        self.tables = {root: {b: RoutingTable(b, budget, samples=config.samples, engine=shared)
                              for b in self.brokers}
                       for root in self.trees}
        self.local = {b: Engine(self.namespaces) for b in self.brokers}
        self.truth = Engine(self.namespaces)
        self.plans: dict[tuple[str, str, str], TransformPlan] = {}  # (root, parent, child)
        # Remainder queries: routing tables and host engines for restructured documents.
        self.rem_namespaces = remainder_namespaces(self.namespaces) if config.transform else {}
        self.rem_tables = {root: {b: RoutingTable(b, budget, samples=config.samples, engine=shared)
                                  for b in self.brokers}
                           for root in self.trees} if config.transform else {}
        self.rem_local = {b: Engine(self.rem_namespaces) for b in self.brokers} if config.transform else {}
        self.profiles: dict[str, _Profile] = {}
        self.links: dict[tuple[str, str], _Link] = {}
        self.delivered: Counter[str] = Counter()
        self.expected: Counter[str] = Counter()
        self.totals = _Totals()
        self._sources = sorted(self.overlay.sources)
        self._pending: list[tuple[str, str, str, Delta, int, bool]] = []
        self._next_id = 0
        self._progress = progress or (lambda phase, done, total, info: None)

    # -- profiles and deltas --------------------------------------------------------
    def _link(self, a: str, b: str) -> _Link:
        link = self.links.get((a, b))
        if link is None:
            link = self.links[(a, b)] = _Link()
        return link

    def _send(self, host: str, delta: Delta, remainder: bool = False) -> None:
        """Send ``delta`` up every tree from ``host``, for the routing tables of
        remainder queries if ``remainder``."""
        size = _delta_size(delta)
        for root, tree in self.trees.items():
            parent = tree.parent[host]
            if parent is not None:
                self._pending.append((root, host, parent, delta, size, remainder))

    def flush(self) -> None:
        """Deliver every delta in flight, in a shuffled order with replays; each
        broker forwards a delta to its parent when it changed its table."""
        pending, rng, replay = self._pending, self.rng, self.config.replay
        t0 = time.perf_counter()
        while pending:
            i = rng.randrange(len(pending))
            pending[i], pending[-1] = pending[-1], pending[i]
            item = pending.pop()
            root, child, broker, delta, size, rem = item
            link = self._link(child, broker)
            if rem:
                link.remainder_deltas += 1
                link.remainder_delta_bytes += size
            else:
                link.deltas += 1
                link.delta_bytes += size
            if replay and rng.random() < replay:
                pending.append(item)
            if (self.rem_tables if rem else self.tables)[root][broker].apply(child, delta):
                parent = self.trees[root].parent[broker]
                if parent is not None:
                    pending.append((root, broker, parent, delta, size, rem))
        self.totals.timings["deltas"] += time.perf_counter() - t0

    def _query(self, text: str) -> RoutingQuery:
        if is_flwr(text):
            return map_profile(parse_flwr(text, self.namespaces).filter_path())
        return map_profile(parse(text, self.namespaces))

    def _remainder(self, text: str) -> tuple[str | None, RoutingQuery | None]:
        """The remainder query of a transformation profile and its routing query."""
        if not self.config.transform or not is_flwr(text):
            return None, None
        rem = remainder(text, self.namespaces)
        return rem, map_profile(parse_flwr(rem, self.rem_namespaces).filter_path())

    def _plan(self, host: str, n: Reads, times: int) -> None:
        """Count a profile's reads in (or out of) every link above its host, in every tree:
        a broker's plan for its parent link is the merge of its children's and its own."""
        if not self.config.transform:
            return
        for root, tree in self.trees.items():
            for parent, b in tree.links_up(host):
                plan = self.plans.get((root, parent, b))
                if plan is None:
                    plan = self.plans[(root, parent, b)] = TransformPlan()
                plan.add(n, times)

    def add_profile(self) -> str:
        pid = f"p{self._next_id}"
        self._next_id += 1
        home = self.rng.choice(self.brokers)
        text = self.interests.generate(home)
        host = self.place(Subscription(pid, text, home))
        if host not in self.local:
            raise SimulationError(f"placement put profile {pid} on unknown broker {host!r}")
        self.profiles[pid] = p = _Profile(host, home, 1, text, self._query(text), self._reads(text),
                                          *self._remainder(text))
        self._plan(host, p.reads, 1)
        self.local[host].add(pid, text)
        self.truth.add(pid, text)
        self._send(host, Delta(pid, 1, p.query))
        if p.rem_text is not None:
            self.rem_local[host].add(pid, p.rem_text)
            self._send(host, Delta(pid, 1, p.rem_query), remainder=True)
        self.totals.adds += 1
        return pid

    def update_profile(self, pid: str) -> None:
        p = self.profiles[pid]
        p.text = self.interests.generate(p.home)
        p.version += 1
        query = self._query(p.text)
        self._plan(p.host, p.reads, -1)
        p.reads = self._reads(p.text)
        self._plan(p.host, p.reads, 1)
        self.local[p.host].add(pid, p.text)
        self.truth.add(pid, p.text)
        self.totals.updates += 1
        rem_text, rem_query = self._remainder(p.text)
        if rem_text is not None:
            self.rem_local[p.host].add(pid, rem_text)
        elif p.rem_text is not None:
            self.rem_local[p.host].remove(pid)
        if rem_query != p.rem_query:
            self._send(p.host, Delta(pid, p.version, rem_query), remainder=True)
        p.rem_text, p.rem_query = rem_text, rem_query
        if query == p.query:
            self.totals.suppressed_updates += 1  # same routing query: nothing to tell upstream
            return
        p.query = query
        self._send(p.host, Delta(pid, p.version, query))

    def delete_profile(self, pid: str) -> None:
        p = self.profiles.pop(pid)
        self._plan(p.host, p.reads, -1)
        self.local[p.host].remove(pid)
        self.truth.remove(pid)
        self._send(p.host, Delta(pid, p.version + 1, None))
        if p.rem_text is not None:
            self.rem_local[p.host].remove(pid)
            self._send(p.host, Delta(pid, p.version + 1, None), remainder=True)
        self.totals.deletes += 1

    def _reads(self, text: str) -> Reads:
        return reads(text, self.namespaces) if self.config.transform else Reads(WHOLE, None)

    def churn(self) -> None:
        """One add, update or delete, equally likely (adds when nothing is live)."""
        kind = self.rng.choice(("add", "update", "delete")) if self.profiles else "add"
        if kind == "add":
            self.add_profile()
            return
        pid = self.rng.choice(list(self.profiles)) if len(self.profiles) < 64 else self._live_pick()
        (self.update_profile if kind == "update" else self.delete_profile)(pid)

    def _live_pick(self) -> str:
        while True:
            pid = f"p{self.rng.randrange(self._next_id)}"
            if pid in self.profiles:
                return pid

    # -- messages --------------------------------------------------------------------
    def publish(self, xml: bytes) -> None:
        """Route one message from a random source and check it against the truth,
        then the same with early restructuring (:meth:`_publish_restructured`). The
        message is parsed once, as a broker receiving it would, and every engine on
        its way matches the decoded :class:`formats.Message`."""
        timings = self.totals.timings
        source = self.rng.choice(self._sources)
        root = self.overlay.root_of(source)
        tree, tables, size = self.trees[root], self.tables[root], len(xml)

        t0 = time.perf_counter()
        message = formats.decode("text", xml)
        t1 = time.perf_counter()
        expected = self.truth.match(message)
        timings["decode"] += t1 - t0
        timings["truth"] += time.perf_counter() - t1

        needed: set[tuple[str, str]] = set()
        for pid in expected:
            b = self.profiles[pid].host
            while tree.parent[b] is not None and (tree.parent[b], b) not in needed:
                needed.add((tree.parent[b], b))
                b = tree.parent[b]

        # What each reached broker received: a projection (XML text), or None for the
        # whole message; a broker projects what it received for a link further down.
        arrived: dict[str, bytes | None] = {root: None}
        routes: dict[str, list[str]] = {}
        element = None

        def forward(b: str) -> list[str]:
            nonlocal element
            t0 = time.perf_counter()
            routes[b] = sorted(tables[b].route(message))
            timings["route"] += time.perf_counter() - t0
            for c in routes[b]:
                link = self._link(b, c)
                link.messages += 1
                link.bytes += size
                if (b, c) not in needed:
                    link.false_positives += 1
                plan = self.plans.get((root, b, c))
                projection = plan.projection() if plan is not None else None
                sent = None
                if projection is not None:
                    t0 = time.perf_counter()
                    if arrived[b] is None and element is None:
                        element = message.to_element()
                    sent = projection.apply(element if arrived[b] is None else arrived[b])
                    timings["project"] += time.perf_counter() - t0
                    link.projected_messages += 1
                link.projected_bytes += size if sent is None else len(sent)
                arrived[c] = sent
            return routes[b]

        reached = _descend(tree, forward)
        for b, c in tree.links():
            link = self._link(b, c)
            link.flooding_messages += 1
            link.flooding_bytes += size
            if (b, c) in needed:
                link.ideal_messages += 1
                link.ideal_bytes += size

        t0 = time.perf_counter()
        local: dict[str, frozenset[str]] = {}  # what each reached host delivered
        truth: list[dict] = []  # the centralized engine's results, computed once if needed
        for b in reached:
            if not len(self.local[b]):
                continue
            got = arrived[b]
            if got is None:
                local[b] = self.local[b].match(message)
                continue
            results = self.local[b].run(got)
            local[b] = frozenset(results)
            self.totals.result_mismatches += _differing(results, self._truth_results(message, truth))
        delivered = frozenset().union(*local.values())
        timings["local"] += time.perf_counter() - t0

        at = set(reached)
        self.totals.expected += len(expected)
        self.totals.delivered += len(delivered)
        self.totals.false_negatives += sum(1 for pid in expected if self.profiles[pid].host not in at)
        self.totals.mismatches += len(expected ^ delivered)
        self.expected.update(expected)
        self.delivered.update(delivered)
        self._publish_restructured(root, message, size, routes, arrived, local, expected, truth)

    def _truth_results(self, message: formats.Message, cache: list[dict]) -> dict:
        if not cache:
            cache.append(self.truth.run(message))
        return cache[0]

    def _publish_restructured(self, root: str, message: formats.Message, size: int,
                              routes: dict[str, list[str]],
                              projected: dict[str, bytes | None], local: dict[str, frozenset[str]],
                              expected: frozenset[str], truth: list[dict]) -> None:
        """The message of :meth:`publish` again, with early restructuring. Down to
        the first restructured link everything is as without it (same tables, same
        input: ``routes``, ``projected`` and ``local`` are reused); below one, a broker
        routes what it received with the tables of remainder queries, restructures it
        again for each link, and its hosted profiles run as remainder queries."""
        timings, t = self.totals.timings, self.totals
        tree = self.trees[root]
        # What each reached broker received: whether it is restructured, and the XML
        # text (None: the whole message).
        arrived: dict[str, tuple[bool, bytes | None]] = {root: (False, None)}

        def forward(b: str) -> list[str]:
            restructured, doc = arrived[b]
            if restructured:
                t0 = time.perf_counter()
                chosen = sorted(self.rem_tables[root][b].route(doc))
                timings["route_restructured"] += time.perf_counter() - t0
            else:
                chosen = routes[b]
            for c in chosen:
                link = self._link(b, c)
                plan = self.plans.get((root, b, c))
                how = plan.decision() if plan is not None else None
                if isinstance(how, Restructuring):
                    t0 = time.perf_counter()
                    sent = how.again(doc) if restructured else how.apply(message if doc is None else doc)
                    timings["restructure"] += time.perf_counter() - t0
                    link.restructured_messages += 1
                    arrived[c] = (True, sent)
                elif restructured:
                    raise SimulationError(f"link {b}>{c} below a restructured link cannot restructure "
                                          f"(its plan: {how})")
                else:
                    sent = projected[c]
                    arrived[c] = (False, sent)
                link.restructuring_run_messages += 1
                link.restructured_bytes += size if sent is None else len(sent)
            return chosen

        reached = _descend(tree, forward)
        t0 = time.perf_counter()
        delivered: set[str] = set()
        for b in reached:
            if not len(self.local[b]):
                continue
            restructured, doc = arrived[b]
            if not restructured:
                delivered |= local[b]
                continue
            results = self.rem_local[b].run(doc)
            delivered |= results.keys()
            t.restructured_result_mismatches += _differing(results, self._truth_results(message, truth))
        timings["local_restructured"] += time.perf_counter() - t0
        at = set(reached)
        t.restructured_false_negatives += sum(1 for pid in expected if self.profiles[pid].host not in at)
        t.restructured_mismatches += len(expected ^ delivered)

    # -- the whole run -----------------------------------------------------------------
    def run(self) -> dict:
        cfg = self.config
        t_start = time.perf_counter()
        step = max(1, cfg.profiles // 50)
        for n in range(cfg.profiles):
            self.add_profile()
            if (n + 1) % step == 0 or n + 1 == cfg.profiles:
                self.flush()
                self._progress("profiles", n + 1, cfg.profiles, {})
        self.flush()
        self.totals.timings["load"] = time.perf_counter() - t_start

        n_churn = round(cfg.churn * cfg.profiles)
        slots = Counter(self.rng.randrange(max(cfg.messages, 1)) for _ in range(n_churn))
        messages = iter(self.messages)
        step = max(1, cfg.messages // 50)
        for i in range(cfg.messages):
            for _ in range(slots.get(i, 0)):
                self.churn()
            self.flush()
            self.publish(next(messages))
            if (i + 1) % step == 0 or i + 1 == cfg.messages:
                self._progress("messages", i + 1, cfg.messages,
                               {"false_negatives": self.totals.false_negatives,
                                "churn": self.totals.adds + self.totals.updates + self.totals.deletes
                                - cfg.profiles})
        if cfg.messages == 0:
            for _ in range(n_churn):
                self.churn()
            self.flush()
        t0 = time.perf_counter()
        table_mismatches = self.check_tables()
        self.totals.timings["check"] = time.perf_counter() - t0
        self.totals.timings["total"] = time.perf_counter() - t_start
        return self.report(table_mismatches)

    def check_tables(self) -> int:
        """Routing entries (tree, broker, link), of profiles and of remainder queries,
        and link plans (projection and restructuring) that differ from those built
        from scratch from the live profiles; 0 when deltas did their job."""
        want: dict[tuple[str, str, str], set] = {}
        want_rem: dict[tuple[str, str, str], set] = {}
        plans: dict[tuple[str, str, str], TransformPlan] = {}
        for p in self.profiles.values():
            for root, tree in self.trees.items():
                for parent, b in tree.links_up(p.host):
                    key = (root, parent, b)
                    want.setdefault(key, set()).update(p.query)
                    if self.config.transform:
                        plans.setdefault(key, TransformPlan()).add(p.reads)
                        want_rem.setdefault(key, set()).update(p.rem_query or ())
        bad = sum(1 for key in plans.keys() | self.plans.keys()
                  if _plan_state(plans.get(key)) != _plan_state(self.plans.get(key)))
        for all_tables, wanted in ((self.tables, want), (self.rem_tables, want_rem)):
            for root, tables in all_tables.items():
                for broker, table in tables.items():
                    for child in set(table.links) | set(self.trees[root].children[broker]):
                        if table.entry(child) != frozenset(wanted.get((root, broker, child), ())):
                            bad += 1
        return bad

    def report(self, table_mismatches: int) -> dict:
        """The run as a JSON-ready dict (see :mod:`routing.report`)."""
        t = self.totals
        links = {f"{a}>{b}": asdict(v) for (a, b), v in sorted(self.links.items())}
        total = lambda key: sum(v[key] for v in links.values())  # noqa: E731
        sizes = [tab.stats() for tables in self.tables.values() for tab in tables.values() if tab.links]
        exact_profiles = sum(1 for pid in self.expected.keys() | self.delivered.keys()
                             if self.expected[pid] == self.delivered[pid])
        cfg = asdict(self.config)
        cfg["budget"] = asdict(self.config.budget) if self.config.generalize else None
        return {
            "config": cfg,
            "overlay": {"name": self.overlay.name, "brokers": len(self.brokers),
                        "links": len(self.overlay.links), "trees": len(self.trees),
                        "tree_depth": {root: tree.depth() for root, tree in self.trees.items()}},
            "profiles": {"live": len(self.profiles), "added": t.adds, "updated": t.updates,
                         "deleted": t.deletes, "updates_without_delta": t.suppressed_updates},
            "messages": self.config.messages,
            "false_negatives": t.false_negatives,
            "expected_deliveries": t.expected,
            "deliveries": t.delivered,
            "delivery_mismatches": t.mismatches,
            "profiles_with_matches": len(self.expected.keys() | self.delivered.keys()),
            "profiles_delivered_exactly": exact_profiles,
            "link_messages": total("messages"),
            "flooding_link_messages": total("flooding_messages"),
            "ideal_link_messages": total("ideal_messages"),
            "ideal_link_bytes": total("ideal_bytes"),
            "false_positive_link_messages": total("false_positives"),
            "link_bytes": total("bytes"),
            "flooding_link_bytes": total("flooding_bytes"),
            "projected_link_bytes": total("projected_bytes"),
            "projected_link_messages": total("projected_messages"),
            "projection_result_mismatches": t.result_mismatches,
            "restructured_link_bytes": total("restructured_bytes"),
            "restructured_link_messages": total("restructured_messages"),
            "restructuring_run_link_messages": total("restructuring_run_messages"),
            "restructured_false_negatives": t.restructured_false_negatives,
            "restructured_delivery_mismatches": t.restructured_mismatches,
            "restructured_result_mismatches": t.restructured_result_mismatches,
            "delta_messages": total("deltas"),
            "delta_bytes": total("delta_bytes"),
            "remainder_delta_messages": total("remainder_deltas"),
            "remainder_delta_bytes": total("remainder_delta_bytes"),
            "table_mismatches": table_mismatches,
            "tables": _table_sizes(sizes),
            "per_link": links,
            "timings": {k: round(v, 3) for k, v in sorted(t.timings.items())},
        }


def _descend(tree: BroadcastTree, forward: Callable[[str], list[str]]) -> list[str]:
    """Send a message down ``tree``: ``forward(b)`` handles it at broker ``b`` (which
    has children) and says which of them it goes to. Returns the brokers reached, in
    breadth-first order from the root."""
    reached, i = [tree.root], 0
    while i < len(reached):
        b = reached[i]
        i += 1
        if tree.children[b]:
            reached.extend(forward(b))
    return reached


def _plan_state(plan: TransformPlan | None) -> tuple | None:
    return None if plan is None else plan.state()


def _differing(results: dict[str, list[bytes]], truth: dict[str, list[bytes]]) -> int:
    """Profiles whose results differ from the centralized engine's."""
    return sum(1 for pid, r in results.items() if r != truth.get(pid))


def _delta_size(delta: Delta) -> int:
    if delta.query is None:
        return len(delta.profile_id) + 16
    return len(delta.profile_id) + 16 + sum(len(a) + 3 for c in delta.query for a in c)


def _table_sizes(sizes: list[dict[str, int]]) -> dict:
    out = {"count": len(sizes)}
    for key in ("conjunctions", "atoms", "nfa_states", "guards", "exact_conjunctions", "exact_atoms",
                "exact_nfa_states", "exact_guards", "rebuilds"):
        values = [s[key] for s in sizes if key in s]
        if values:
            out[key] = {"total": sum(values), "mean": round(sum(values) / len(values), 1), "max": max(values)}
    return out


# -- command line -----------------------------------------------------------------------

def _progress_printer(stream=sys.stderr, every: float = 10.0) -> Progress:
    """Progress on ``stream``: a line rewritten in place on a terminal, else a line
    every ``every`` seconds and at the end of each phase."""
    start = time.perf_counter()
    last = [start]
    tty = stream.isatty()

    def show(phase: str, done: int, total: int, info: dict) -> None:
        now = time.perf_counter()
        if not tty and done != total and now - last[0] < every:
            return
        last[0] = now
        extra = "".join(f"  {k} {v}" for k, v in info.items())
        line = f"[{now - start:7.1f}s] {phase:9} {done:>8}/{total} ({100 * done // max(total, 1)}%){extra}"
        stream.write(("\r" + line + ("\n" if done == total else "")) if tty else line + "\n")
        stream.flush()

    return show


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m routing.simulate",
        description="Simulate Onyx's content-based routing on a generated overlay: profiles placed on "
                    "brokers, deltas up the broadcast trees, messages routed down them, checked against a "
                    "centralized engine and compared with flooding. Prints a table, writes JSON and a plot.",
        epilog="Example: python -m routing.simulate --brokers 100 --profiles 100000 --messages 500 "
               "--churn 0.1 --interests geo --generalize --json bench/results/routing_simulate.json; "
               "early projection: --profiles 2000 --transform 1.0; early restructuring: add --bindings 4")
    a = p.add_argument
    a("--brokers", type=int, default=100, help="number of brokers (default 100)")
    a("--profiles", type=int, default=10_000, help="profiles registered before the first message (default 10000)")
    a("--messages", type=int, default=500, help="messages published (default 500)")
    a("--churn", type=float, default=0.0, metavar="FRACTION",
      help="adds + updates + deletes interleaved with the messages, as a fraction of --profiles (default 0)")
    a("--seed", type=int, default=0, help="seed of everything (default 0)")
    a("--generalize", action=argparse.BooleanOptionalAction, default=False,
      help="route with generalized tables that fit --budget (default: exact tables)")
    a("--budget", type=Budget.parse, default=DEFAULT_BUDGET, metavar="atoms=N,states=N,predicates=N",
      help="per routing table, with --generalize (default atoms=1000,states=3000,predicates=300)")
    a("--interests", choices=INTERESTS, default="uniform",
      help="uniform, or geo: subscribers near each other share vocabulary and values (default uniform)")
    a("--placement", choices=PLACEMENTS, default="nearest",
      help="host a profile at the subscriber's nearest broker, a random one, or by PEP partitioning "
           "(default nearest)")
    a("--overlay", choices=OVERLAYS, default="geometric", help="overlay generator (default geometric)")
    a("--sources", type=int, default=4, help="data sources, each with its own root broker and tree (default 4)")
    a("--replay", type=float, default=0.1, metavar="P",
      help="probability that a delta in flight is delivered twice (default 0.1); deltas are always reordered")
    a("--samples", type=int, default=16, help="recent messages a generalized table measures itself on (default 16)")
    a("--engine", choices=ENGINES, default="shared",
      help="shared: one atom engine for every routing table (a message is matched against the atoms "
           "once; same routing as per-table, much faster); per-table: one engine per table (default shared)")
    a("--transform", type=float, default=0.0, metavar="FRACTION",
      help="share of transformation (for/where/return) profiles; links whose profiles below all read "
           "parts of the message carry its projection (early projection) (default 0)")
    a("--bindings", type=int, default=0, metavar="N",
      help="transformation profiles draw their for path from N shared ones, so that links can carry "
           "the message restructured into the bindings (early restructuring); 0: each draws its own "
           "(default 0)")
    a("--corpus", metavar="DIR", help="publish the *.xml files of DIR instead of generated documents "
                                      "(profiles then come from their vocabulary)")
    a("--json", metavar="PATH", help="write the report here (default bench/results/routing_simulate.json)")
    a("--plot", metavar="PATH", help="write the plot here (default: the JSON path with .png)")
    a("--quiet", action="store_true", help="no progress output")
    return p


def main(argv: list[str] | None = None) -> int:
    from routing import report

    args = parser().parse_args(argv)
    config = Config(args.brokers, args.profiles, args.messages, args.churn, args.seed, args.generalize,
                    args.budget, args.interests, args.placement, args.overlay, args.sources, args.replay,
                    args.samples, args.corpus, args.engine, args.transform, args.bindings)
    try:
        sim = Simulation(config, progress=None if args.quiet else _progress_printer())
        result = sim.run()
    except (SimulationError, WorkloadError, BudgetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json_path = Path(args.json) if args.json else RESULTS / "routing_simulate.json"
    plot_path = Path(args.plot) if args.plot else json_path.with_suffix(".png")
    print(report.table(result))
    report.write_json(result, json_path)
    report.plot(result, plot_path)
    print(f"wrote {json_path} and {plot_path}")
    ok = all(result[k] == 0 for k in ("false_negatives", "delivery_mismatches", "projection_result_mismatches",
                                      "restructured_false_negatives", "restructured_delivery_mismatches",
                                      "restructured_result_mismatches"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
