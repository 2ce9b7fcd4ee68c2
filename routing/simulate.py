"""The routing simulator: ONYX's query and data planes in one process, run by the
brokers' own code.

``python -m routing.simulate --brokers 100 --profiles 10000 --messages 500 --churn 0.1``

An overlay of N brokers (a generator of :mod:`routing.generators`) with one broadcast
tree per source root. Every broker is a :class:`~routing.node.Node`, the code the
running broker wraps (ONYX 4.2-4.3); the simulator is their transport and referee.
Subscribers' profiles (:mod:`routing.workload`) are placed on host brokers by a
:data:`~routing.placement.Placement` and registered, updated and deleted with the
host's :meth:`~routing.node.Node.host` / :meth:`~routing.node.Node.drop` (``Map()``).
The routing deltas a node returns (:class:`~routing.node.Up`) go in flight, and each is
delivered to its parent's :meth:`~routing.node.Node.collect` (``Collect()`` and
``Aggregate()``), which returns the next hop's. Deltas in flight are delivered in a
shuffled order and some are replayed (``--replay``), so versioning and idempotence are
exercised all the time.

Messages are published at random sources and go down the source's tree as brokers send
them: each reached node's :meth:`~routing.node.Node.forwards`, on what the node
received and the transformation it had, gives the links the message goes down and what
each carries — what the node received, or what the link's transformation query makes
of it (incremental transformation, ONYX 4.2.2, :mod:`routing.incremental`: bindings no
where clause below wants dropped, the rest projected on what the profiles below read,
their shared first binding steps run; the query merges the needs the deltas carried
up) — and its :meth:`~routing.node.Node.deliver` gives its profiles' results on it. A
child gets what the link carried with the transformation it had (the link's, or what
its parent received with). This is the code the running broker runs: nothing about
transformation is the simulator's own. A centralized engine over all live profiles,
run on the *whole* message, is the ground truth. Per message the simulator checks that
every host with a matching profile was reached (else a false negative), that the set
of profiles delivered is exactly the expected one, and that every host gave each
profile the centralized engine's results (``result_mismatches``). It counts, per link,
messages and bytes forwarded (the XML text of what the link carried), the transformed
ones and their bytes, forwardings nobody downstream needed (false positives), what
perfect routing would forward, and what flooding (every message over every tree link)
costs; and the CPU seconds brokers spent in ``forwards`` (routing and transformations)
and in ``deliver``. With ``--transform FRACTION`` that share of the profiles are
transformation profiles; with ``--bindings N`` they share N for paths. Whether a link
transforms is its broker's choice (:class:`~routing.node.LinkCost`: the bytes saved at
``--bandwidth`` against the CPU the transformation takes, measured), so with a
bandwidth where the choice is close, which links transform depends on timings;
``--no-transform`` turns incremental transformation off. Churn (``--churn FRACTION``
of the profile count in adds, updates and deletes) is interleaved with the messages.
At the end every routing table is compared with one built from scratch from the live
profiles: entries and transformation queries.

Because a broker routes what it received, some numbers mean what a broker does, not
what routing the whole message at every broker would give:

* ``link_messages`` and ``false_positive_link_messages``: below a transforming link a
  node matches its routing queries on what the link carried. It keeps every binding
  and everything a profile below reads, so no needed link is lost, but a generalized
  conjunction (``--generalize``) may match it differently from the whole message.
* ``delta_bytes``: a delta carries the profile's need (its transformation query) with
  its routing query, and both are counted.
* ``updates_without_delta``: a node sends a delta for every update (the need may
  change while the routing query does not), so only an update on a host that is the
  root of every tree sends none.
* ``--engine per-broker``: each node has its own atom engine, shared by its tables
  (as in the running broker); ``shared``, the default, is one for every node.

Everything is seeded: the same command prints the same numbers (timings aside).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import formats
from routing import generators
from routing.generalize import Budget, BudgetError
from routing.matcher import AtomEngine
from routing.node import Node, Up
from routing.overlay import Overlay
from routing.placement import STRATEGIES, Placement, PlacementOptions, PlacementRequest, make_strategy
from routing.incremental import LinkPlan, Need, need_to_json
from routing.table import Delta
from routing.trees import BroadcastTree
from routing.workload import INTERESTS, Interests, Messages, WorkloadError, load_corpus
from yfilter import Engine
from yfilter.generators import Schema

OVERLAYS = ("geometric", "transit-stub", "tree", "ring")
ENGINES = ("shared", "per-broker")
DEFAULT_BUDGET = Budget(atoms=4000, states=12000, predicates=2000)
"""The running overlay's default budget (``ONYX_TABLE_BUDGET``, broker/config.py), so that
the simulator's figures are the system's."""
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
    bandwidth: float = 100e6
    incremental: bool = True

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
        if not self.bandwidth > 0:
            raise SimulationError("--bandwidth is bits per second of a link (more than 0)")
        if not 0 <= self.replay < 1:
            raise SimulationError("--replay is a probability in [0, 1)")
        if not 1 <= self.sources <= self.brokers:
            raise SimulationError(f"--sources must be between 1 and the number of brokers ({self.brokers})")
        for name, value, allowed in (("overlay", self.overlay, OVERLAYS), ("interests", self.interests, INTERESTS),
                                     ("placement", self.placement, STRATEGIES), ("engine", self.engine, ENGINES)):
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


@dataclass
class _Link:
    messages: int = 0
    bytes: int = 0
    flooding_messages: int = 0
    flooding_bytes: int = 0
    ideal_messages: int = 0
    ideal_bytes: int = 0
    transformed_messages: int = 0  # forwardings that carried what the link's transformation made
    transformed_bytes: int = 0  # their bytes (counted in ``bytes`` too)
    false_positives: int = 0
    deltas: int = 0
    delta_bytes: int = 0


Progress = Callable[[str, int, int, dict], None]


@dataclass
class _Totals:
    expected: int = 0
    delivered: int = 0
    false_negatives: int = 0
    mismatches: int = 0
    result_mismatches: int = 0
    results_compared: int = 0
    forward_seconds: float = 0.0  # in Node.forwards: routing and transformations
    deliver_seconds: float = 0.0  # in Node.deliver: the local profiles
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
        # Whether an atom matches a message does not depend on the broker asking, so
        # by default every node shares one atom engine and a message is matched
        # against the atoms once; the tables' counting steps stay per table.
        shared = AtomEngine() if config.engine == "shared" else None
        self.nodes = self._nodes(shared, self.namespaces)
        self.truth = Engine(self.namespaces)
        self.profiles: dict[str, _Profile] = {}
        self.links: dict[tuple[str, str], _Link] = {}
        self.delivered: Counter[str] = Counter()
        self.expected: Counter[str] = Counter()
        self.totals = _Totals()
        self._sources = sorted(self.overlay.sources)
        # Deltas in flight: (the sender, the delta for its parent, its size).
        self._pending: list[tuple[str, Up, int]] = []
        self._next_id = 0
        self._progress = progress or (lambda phase, done, total, info: None)

    def _nodes(self, engine: AtomEngine | None, namespaces: dict[str, str]) -> dict[str, Node]:
        """One node per broker, with the run's budget when it generalizes."""
        cfg = self.config
        budget = cfg.budget if cfg.generalize else None
        return {b: Node(b, self.overlay, budget, samples=cfg.samples, engine=engine, namespaces=namespaces,
                        bandwidth=cfg.bandwidth) for b in self.brokers}

    # -- profiles and deltas --------------------------------------------------------
    def _link(self, a: str, b: str) -> _Link:
        link = self.links.get((a, b))
        if link is None:
            link = self.links[(a, b)] = _Link()
        return link

    def _send(self, sender: str, ups: list[Up]) -> None:
        """Put the routing deltas ``sender``'s node returned in flight."""
        self._pending += [(sender, up, _delta_size(up.delta)) for up in ups]

    def flush(self) -> None:
        """Deliver every delta in flight, in a shuffled order with replays, to the
        parent's node (``Collect()``, ONYX 4.2.1), and put what it sends on
        (``Aggregate()``) in flight."""
        pending, rng, replay = self._pending, self.rng, self.config.replay
        t0 = time.perf_counter()
        while pending:
            i = rng.randrange(len(pending))
            pending[i], pending[-1] = pending[-1], pending[i]
            item = pending.pop()
            child, up, size = item
            link = self._link(child, up.parent)
            link.deltas += 1
            link.delta_bytes += size
            if replay and rng.random() < replay:
                pending.append(item)
            node = self.nodes[up.parent]
            pending += [(up.parent, nxt, _delta_size(nxt.delta)) for nxt in node.collect(up.root, child, up.delta)]
        self.totals.timings["deltas"] += time.perf_counter() - t0

    def _host(self, pid: str, p: _Profile) -> int:
        """Register ``p`` (new or updated) on its host's node; the number of routing
        deltas it sends up."""
        ups = self.nodes[p.host].host(pid, p.version, p.text)
        self._send(p.host, ups)
        return len(ups)

    def add_profile(self) -> str:
        pid = f"p{self._next_id}"
        self._next_id += 1
        home = self.rng.choice(self.brokers)
        text = self.interests.generate(home)
        host = self.place(PlacementRequest(pid, text, near=home))
        if host not in self.nodes:
            raise SimulationError(f"placement put profile {pid} on unknown broker {host!r}")
        self.profiles[pid] = p = _Profile(host, home, 1, text)
        self.truth.add(pid, text)
        self._host(pid, p)
        self.totals.adds += 1
        return pid

    def update_profile(self, pid: str) -> None:
        p = self.profiles[pid]
        p.text = self.interests.generate(p.home)
        p.version += 1
        self.truth.add(pid, p.text)
        self.totals.updates += 1
        if not self._host(pid, p):
            self.totals.suppressed_updates += 1

    def delete_profile(self, pid: str) -> None:
        p = self.profiles.pop(pid)
        self.truth.remove(pid)
        self._send(p.host, self.nodes[p.host].drop(pid, p.version + 1))
        self.totals.deletes += 1

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
        """Route one message from a random source down its tree, node by node (ONYX
        4.2.2 and 4.3.1), and check it against the truth. A broker decodes what it
        received once, as a running broker does: its node routes, transforms and
        matches the decoded :class:`formats.Message`, and a child gets what the link
        carried (the message as its parent received it, or what the link's
        transformation made of it) with the transformation it had."""
        timings, t = self.totals.timings, self.totals
        source = self.rng.choice(self._sources)
        root = self.overlay.root_of(source)
        tree, size = self.trees[root], len(xml)
        sample = self.nodes[root].sample(root)  # down every link: what summaries measure themselves on
        project = self.config.incremental

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

        # What each reached broker received: the decoded message, the transformation it
        # had (None: none, the message as published) and its size as XML text.
        arrived: dict[str, tuple[formats.Message, Need | None, int]] = {root: (message, None, size)}
        local: dict[str, frozenset[str]] = {}
        truth: list[dict] = []  # the centralized engine's results, computed once if needed

        def visit(b: str) -> list[str]:
            node = self.nodes[b]
            received, applied, nbytes = arrived[b]
            t0 = time.perf_counter()
            forwards = node.forwards(root, received, project=project, applied=applied, sample=sample)
            t1 = time.perf_counter()
            t.forward_seconds += t1 - t0
            plan = node.summary_plan(root)  # measured on what the node routed, adopted at once
            if plan is not None:
                self._send(b, node.generalize(root, plan))
                timings["generalize"] += time.perf_counter() - t1
            for f in forwards:
                link = self._link(b, f.link)
                link.messages += 1
                if (b, f.link) not in needed:
                    link.false_positives += 1
                if f.transformed is None:
                    carried, sent = received, nbytes
                else:
                    carried, sent = f.transformed, len(f.transformed.to_xml())
                    link.transformed_messages += 1
                    link.transformed_bytes += sent
                link.bytes += sent
                arrived[f.link] = (carried, f.effect, sent)
            if node.profiles:
                t0 = time.perf_counter()
                results = node.deliver(received, xml if applied is None else None, applied=applied)
                t.deliver_seconds += time.perf_counter() - t0
                local[b] = frozenset(results)
                t0 = time.perf_counter()
                t.results_compared += len(results)
                t.result_mismatches += _differing(results, self._truth_results(message, xml, truth))
                timings["truth"] += time.perf_counter() - t0
            return [f.link for f in forwards]

        # Brokers that received the message as published go first: it is one decoded
        # object, whose atoms the shared engine then matches once for all of them.
        reached = _descend(tree, visit, first=lambda b: arrived[b][1] is None)
        for b, c in tree.links():
            link = self._link(b, c)
            link.flooding_messages += 1
            link.flooding_bytes += size
            if (b, c) in needed:
                link.ideal_messages += 1
                link.ideal_bytes += size

        delivered = frozenset().union(*local.values())
        at = set(reached)
        t.expected += len(expected)
        t.delivered += len(delivered)
        t.false_negatives += sum(1 for pid in expected if self.profiles[pid].host not in at)
        t.mismatches += len(expected ^ delivered)
        self.expected.update(expected)
        self.delivered.update(delivered)

    def _truth_results(self, message: formats.Message, xml: bytes, cache: list[dict]) -> dict:
        if not cache:
            cache.append(self.truth.run(message, xml=xml))
        return cache[0]

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
        """Routing entries (exact summaries only) and transformation queries (tree,
        broker, link) that differ from those built from scratch from the live profiles
        (a :class:`~routing.incremental.LinkPlan` of the needs of the profiles below
        each link); 0 when deltas did their job."""
        want: dict[tuple[str, str, str], tuple[set, LinkPlan]] = {}
        for pid, p in self.profiles.items():
            # Map() of what each node hosts, from its text: not what the deltas carried.
            delta = self.nodes[p.host].delta(pid)
            for root, tree in self.trees.items():
                for parent, b in tree.links_up(p.host):
                    conjunctions, plan = want.setdefault((root, parent, b), (set(), LinkPlan()))
                    conjunctions.update(delta.query)
                    plan.add(delta.need)
        bad = 0
        for b, node in self.nodes.items():
            for root, tree in self.trees.items():
                table = node.tables.get(root)
                for child in set(tree.children[b]) | set(table.links if table else ()):
                    conjunctions, plan = want.get((root, b, child), (set(), None))
                    entry = table.entry(child) if table else frozenset()
                    projection = table.projection(child) if table else None
                    # A generalized summary stands for the conjunctions below, not as them:
                    # what it lets through is checked message by message (false negatives).
                    differs = not self.config.generalize and entry != frozenset(conjunctions)
                    if differs or projection != (plan.projection() if plan else None):
                        bad += 1
        return bad

    def report(self, table_mismatches: int) -> dict:
        """The run as a JSON-ready dict (see :mod:`routing.report`)."""
        t = self.totals
        links = {f"{a}>{b}": asdict(v) for (a, b), v in sorted(self.links.items())}
        total = lambda key: sum(v[key] for v in links.values())  # noqa: E731
        sizes = [tab.stats() for node in self.nodes.values() for tab in node.tables.values() if tab.links]
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
            "transformed_link_bytes": total("transformed_bytes"),
            "transformed_link_messages": total("transformed_messages"),
            "results_compared": t.results_compared,
            "result_mismatches": t.result_mismatches,
            "delta_messages": total("deltas"),
            "delta_bytes": total("delta_bytes"),
            "table_mismatches": table_mismatches,
            "tables": _table_sizes(sizes),
            "summaries": _table_sizes([s.stats() for node in self.nodes.values() for s in node.summaries.values()
                                       if len(s)]),
            "per_link": links,
            "timings": {k: round(v, 3) for k, v in sorted(t.timings.items())},
            "cpu": {"forwards_seconds": round(t.forward_seconds, 6), "deliver_seconds": round(t.deliver_seconds, 6),
                    "forwards_per_message": round(t.forward_seconds / max(self.config.messages, 1), 9),
                    "deliver_per_message": round(t.deliver_seconds / max(self.config.messages, 1), 9)},
        }



def _descend(tree: BroadcastTree, visit: Callable[[str], list[str]],
             first: Callable[[str], bool] | None = None) -> list[str]:
    """Send a message down ``tree``: ``visit(b)`` handles it at broker ``b`` and says
    which children it goes to. Breadth first, except that brokers ``first`` holds for
    (asked when they are reached) are all visited before the others. Returns the
    brokers reached, in the order visited."""
    reached: list[str] = []
    now, later = deque([tree.root]), deque()
    while now or later:
        b = (now or later).popleft()
        reached.append(b)
        for c in visit(b):
            (now if first is None or first(c) else later).append(c)
    return reached


def _differing(results: dict[str, list[bytes]], truth: dict[str, list[bytes]]) -> int:
    """Profiles whose results differ from the centralized engine's."""
    return sum(1 for pid, r in results.items() if r != truth.get(pid))


def _delta_size(delta: Delta) -> int:
    """About what ``delta`` takes on a link: the profile id, the version, the routing
    query's atoms and the transformation query (its JSON text; nothing for a profile
    that needs the whole message)."""
    size = len(delta.profile_id) + 16
    if delta.query is not None:
        size += sum(len(a) + 3 for c in delta.query for a in c)
    n = need_to_json(delta.need)
    if n is not None:
        size += len(json.dumps(n, separators=(",", ":")))
    return size


def _table_sizes(sizes: list[dict[str, int]]) -> dict:
    out = {"count": len(sizes)}
    for key in ("conjunctions", "atoms", "nfa_states", "guards", "exact_conjunctions", "exact_atoms",
                "exact_nfa_states", "exact_guards", "plans"):
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
               "incremental transformation: --profiles 2000 --transform 1.0 --bindings 4 --bandwidth 1e6")
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
      help=f"per routing table, with --generalize (default {DEFAULT_BUDGET}, the running overlay's)")
    a("--interests", choices=INTERESTS, default="uniform",
      help="uniform, or geo: subscribers near each other share vocabulary and values (default uniform)")
    a("--placement", choices=sorted(STRATEGIES), default="nearest",
      help="host a profile at the subscriber's nearest broker, the least loaded one (round-robin), "
           "a random one, or by PEP partitioning (default nearest)")
    a("--overlay", choices=OVERLAYS, default="geometric", help="overlay generator (default geometric)")
    a("--sources", type=int, default=4, help="data sources, each with its own root broker and tree (default 4)")
    a("--replay", type=float, default=0.1, metavar="P",
      help="probability that a delta in flight is delivered twice (default 0.1); deltas are always reordered")
    a("--samples", type=int, default=16, help="recent messages a generalized table measures itself on (default 16)")
    a("--engine", choices=ENGINES, default="shared",
      help="shared: one atom engine for every broker's routing tables (a message is matched against the "
           "atoms once; same routing as per-broker, much faster); per-broker: one engine per broker, shared "
           "by its tables, as in the running broker (default shared)")
    a("--transform", type=float, default=0.0, metavar="FRACTION",
      help="share of transformation (for/where/return) profiles; links whose profiles below all read "
           "parts of the message carry what their transformation query makes of it (incremental "
           "transformation, ONYX 4.2.2) (default 0)")
    a("--bindings", type=int, default=0, metavar="N",
      help="transformation profiles draw their for path from N shared ones, so that links below which "
           "all share one drop the bindings no where clause wants (early projection); 0: each draws "
           "its own (default 0)")
    a("--bandwidth", type=float, default=100e6, metavar="BITS",
      help="bits per second of every link, for the brokers' cost model: a link transforms when the "
           "bytes it saves take longer than the transformation (default 100e6)")
    a("--no-transform", dest="incremental", action="store_false",
      help="no incremental transformation: every link carries the message as published")
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
                    args.samples, args.corpus, args.engine, args.transform, args.bindings, args.bandwidth,
                    args.incremental)
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
    ok = all(result[k] == 0 for k in ("false_negatives", "delivery_mismatches", "result_mismatches",
                                      "table_mismatches"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
