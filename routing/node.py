"""One broker of the overlay without its transport: query plane and data plane (ONYX 4.2-4.3).

A :class:`Node` is what a broker is, short of Kafka: the profiles it hosts, one routing
table per broadcast tree it is in, and the engine of its local profiles. The running
broker (:mod:`broker.control.state`, :mod:`broker.dataplane.plan`) wraps a node in Kafka packets; the
simulator (:mod:`routing.simulate`) wires nodes together in one process. Both run this
code, so the simulator's numbers are the system's.

Query plane (ONYX 4.2.1), each call returning the routing deltas to send up
(:class:`Up`, one per tree whose parent must hear of it):

* :meth:`Node.host` / :meth:`Node.drop` — ``Map()``: a hosted profile's routing query
  and what it reads of a message (its :func:`~routing.incremental.need`) join the
  node's summary of every tree it is not the root of;
* :meth:`Node.collect` — ``Collect()``: a child's delta applied to the tree's table
  (the child's summary, filed under the link to it), which changes this node's own
  summary in turn;
* ``Aggregate()`` — what a node sends its parent is its :class:`~routing.summary.Summary`
  of the tree: the distinct conjunctions below it, generalized to its share of the
  ``budget`` when it has one (the budget over the parent's children), so that the
  parent's table fits the budget and the exact queries stay here. A plan of which
  generalizations to make is made on the data path (:meth:`Node.summary_plan`, measured
  on the messages of the tree) and adopted by :meth:`Node.generalize`;
* :meth:`Node.join` — a new tree (a source with a new root broker): every hosted
  profile joins the node's summary of it.

Data plane (ONYX 4.2.2 and 4.3.1), in priority order: :meth:`Node.forwards` gives the
links of the message's tree that want it, each with what the link carries — the whole
message, or what the link's transformation query makes of it (incremental
transformation, :mod:`routing.incremental`) — and only then :meth:`Node.deliver` runs the local
profiles. A forwarded message is never held back by local work.

>>> from routing.overlay import builtin
>>> b4 = Node("b4", builtin("figure4"))
>>> b2 = Node("b2", builtin("figure4"), bandwidth=1e4)   # a slow link: worth leaving bytes out
>>> q = "for $h in $msg/nitf/head return <t>{$h/title/text()}</t>"
>>> ups = b4.host("q1", 1, q)
>>> [(u.parent, u.root, u.delta.profile_id[:3]) for u in ups]   # b4's summary: a conjunction, its need
[('b2', 'b1', '~c:'), ('b2', 'b1', '~ne')]
>>> [len(b2.collect(u.root, "b4", u.delta)) for u in ups]   # b2's summary changes in turn
[1, 1]
>>> msg = b"<nitf><head><title>Tide</title><meta/></head><body>" + b"long text " * 100 + b"</body></nitf>"
>>> [(f.link, f.transformed.to_xml()) for f in b2.forwards("b1", msg)]
[('b4', b'<nitf><head><title>Tide</title></head></nitf>')]
>>> [f] = b2.forwards("b1", msg)
>>> b4.deliver(f.transformed, applied=f.effect)
{'q1': [b'<t>Tide</t>']}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import formats
from formats.header import MAX_TRANSFORM
from routing.budget import Budget
from routing.dnf import RoutingQuery, map_profile
from routing.incremental import Need, Needed, below, compiled, header_bytes, need, serves, to_header
from routing.matcher import AtomEngine
from routing.overlay import Overlay
from routing.planner import Plan
from routing.summary import Summary
from routing.table import Delta, RoutingTable
from yfilter import Engine, validate
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse


@dataclass
class Hosted:
    """A profile hosted here: its version, text and where its results go (for a broker,
    the delivery topic; the node does not look at it)."""

    version: int
    text: str
    target: str = ""


class Up(NamedTuple):
    """A routing delta for ``parent``, this node's parent in ``root``'s tree."""

    parent: str
    root: str
    delta: Delta


class Forward(NamedTuple):
    """The message goes down ``link``: as it came (``transformed`` None; it had
    ``effect``, what it came with) or as the link's transformation made it (it had
    ``effect``: the link's transformation query, :mod:`routing.incremental`)."""

    link: str
    transformed: formats.Message | None
    effect: Need | None = None


MEASURE_EVERY = 16
"""A link measures what its transformation saves and costs on one message in this many
(the first included): the bytes left out (XML text) and the CPU seconds it took."""


@dataclass
class LinkCost:
    """What a link's transformation saved and cost, per message (moving averages over
    the measured ones), and how many messages since the last measurement."""

    saved: float = 0.0
    seconds: float = 0.0
    seen: int = 0
    measured: int = 0

    def worth(self, bandwidth: float, cpu_per_byte: float) -> bool:
        """Whether the bytes saved take longer on the link and to handle downstream
        (``bandwidth`` bits/s, ``cpu_per_byte`` seconds) than the transformation."""
        return self.saved * (8 / bandwidth + cpu_per_byte) > self.seconds


@dataclass
class Node:
    """Broker ``broker`` of ``overlay`` (see the module docstring). With a ``budget``
    every routing table of the overlay stays within it: each node's summary of a tree
    is generalized to fit its share (:mod:`routing.summary`), measured on the last
    ``samples`` messages; ``engine`` shares one atom engine with other nodes (a
    simulation); ``namespaces`` binds the prefixes profiles may use."""

    broker: str
    overlay: Overlay
    budget: Budget | None = None
    samples: int = 16
    sample_every: int = 16
    """One message in this many is a sample (see :meth:`sample`): at 20 msg/s a summary
    has its 16 samples, and its second plan, 13 s after the first message; a sample
    costs a flood, about 1/16 of flooding's link sends on top of routing's."""
    engine: AtomEngine | None = None
    namespaces: Mapping[str, str] = field(default_factory=dict)
    profiles: dict[str, Hosted] = field(default_factory=dict)
    tombstones: dict[str, int] = field(default_factory=dict)  # deleted profile -> its last version
    tables: dict[str, RoutingTable] = field(default_factory=dict)  # tree root -> table
    summaries: dict[str, Summary] = field(default_factory=dict)  # tree root -> what the parent holds
    version: int = 0  # changes made: hosted profiles and tables
    bandwidth: float = 100e6
    """Bits per second of a link, for the cost model of transformations (:class:`LinkCost`)."""
    cpu_per_byte: float = 25e-9
    """CPU seconds a byte costs downstream: measured on the batched news workload of
    ``bench/transform.py`` (30 KB messages), about 9 ns to encode and decode it in the
    link format (``stream``) and 16 ns at the host's engine (``deliver`` took 0.61 ms less
    for 38.5 KB less)."""
    costs: dict[tuple[str, str], LinkCost] = field(default_factory=dict)
    """(root, link) -> what its transformation saves and costs."""

    def __post_init__(self) -> None:
        # Whether an atom matches a message does not depend on the tree asking: the
        # tables of one node share an atom engine, so a message is matched once.
        if self.engine is None:
            self.engine = AtomEngine()
        self._local: Engine | None = None
        # Summaries are sent, never matched: their atoms live apart from the engine that routes.
        self._summary_engine = AtomEngine()
        self._messages: dict[str, int] = {}  # root -> messages this root sent down its tree
        self._needs: dict[str, tuple[int, Needed]] = {}  # profile -> (version, its need)

    @property
    def local(self) -> Engine:
        """The engine of the hosted profiles, built on first use (all at once, the fast
        path): a copy of the node that only follows changes (the driver's view of a
        broker) never builds it, and a burst of profiles is added in one pass."""
        if self._local is None:
            self._local = self._build_local()
        return self._local

    def _build_local(self) -> Engine:
        engine = Engine(dict(self.namespaces))
        engine.add_many((pid, p.text) for pid, p in self.profiles.items())
        return engine

    def table(self, root: str) -> RoutingTable:
        """The routing table of ``root``'s tree (made empty on first use)."""
        table = self.tables.get(root)
        if table is None:
            table = self.tables[root] = RoutingTable(self.broker, engine=self.engine)
        return table

    def parent(self, root: str) -> str | None:
        """This node's parent in ``root``'s tree (None at the root)."""
        return self.overlay.tree(root).parent[self.broker]

    def share(self, root: str) -> Budget | None:
        """The budget of this node's summary of ``root``'s tree: the parent's budget
        (its own in the overlay config, else this node's) over the parent's children,
        so that the parent's table fits it."""
        parent = self.parent(root)
        budget = None if parent is None else self.overlay.budget(parent) or self.budget
        if budget is None or not budget.limits():
            return None
        return budget.scaled(1 / len(self.overlay.tree(root).children[parent]))

    def summary(self, root: str) -> Summary | None:
        """What this node's parent in ``root``'s tree holds for it (None at the root)."""
        held = self.summaries.get(root)
        if held is None and self.parent(root) is not None:
            held = self.summaries[root] = Summary(self.share(root), self.samples, self._summary_engine)
        return held

    # -- query plane -------------------------------------------------------------------

    def query(self, text: str) -> RoutingQuery:
        """``Map()`` of a profile: its routing query (a transformation profile's for/where)."""
        if is_flwr(text):
            return map_profile(parse_flwr(text, self.namespaces).filter_path())
        return map_profile(parse(text, self.namespaces))

    def delta(self, pid: str) -> Delta:
        """The delta a hosted profile sends up."""
        p = self.profiles[pid]
        return Delta(pid, p.version, self.query(p.text), need(p.text, self.namespaces))

    def host(self, pid: str, version: int, text: str, target: str = "") -> list[Up]:
        """Host (or replace) profile ``pid`` at ``version``; nothing happens if this node
        holds that version or a newer one already. Raises :class:`yfilter.ProfileError`
        (a ``ValueError``) for a text that is not a profile, changing nothing."""
        if version <= self._known(pid):
            return []
        query, needed = self.query(text), need(text, self.namespaces)
        if self._local is not None:
            self._local.add(pid, text)
        else:
            validate(text, self.namespaces)  # what adding it would refuse, refused now
        old = self.profiles.get(pid)
        self.profiles[pid] = Hosted(version, text, target)
        self.tombstones.pop(pid, None)
        self.version += 1
        return self._change_all((query, needed), None if old is None else self._map(old.text))

    def drop(self, pid: str, version: int) -> list[Up]:
        """Stop hosting ``pid`` (its deletion at ``version``)."""
        if version <= self._known(pid):
            return []
        old = self.profiles.pop(pid, None)
        if old is not None and self._local is not None:
            self._local.remove(pid)
        self.tombstones[pid] = version
        self.version += 1
        return [] if old is None else self._change_all(None, self._map(old.text))

    def _map(self, text: str) -> tuple[RoutingQuery, Needed]:
        return self.query(text), need(text, self.namespaces)

    def _known(self, pid: str) -> int:
        held = self.profiles.get(pid)
        return held.version if held is not None else self.tombstones.get(pid, 0)

    def collect(self, root: str, child: str, delta: Delta) -> list[Up]:
        """``Collect()`` a delta from ``child`` for ``root``'s tree; what it changes in
        this node's summary goes to the parent (``Aggregate()``)."""
        table = self.table(root)
        old = table.held(child, delta.profile_id)
        if not table.apply(child, delta):
            return []
        self.version += 1
        added = None if delta.query is None else (delta.query, delta.need)
        removed = None if old is None or old.query is None else (old.query, old.need)
        return self._change(root, added, removed)

    def join(self, root: str) -> list[Up]:
        """A new tree: every hosted profile joins this node's summary of it."""
        return [u for pid in sorted(self.profiles) for u in self._change(root, self._map(self.profiles[pid].text), None)]

    def _change_all(self, added: tuple[RoutingQuery, Needed] | None,
                    removed: tuple[RoutingQuery, Needed] | None) -> list[Up]:
        return [u for root in self.overlay.roots for u in self._change(root, added, removed)]

    def _change(self, root: str, added: tuple[RoutingQuery, Needed] | None,
                removed: tuple[RoutingQuery, Needed] | None) -> list[Up]:
        summary = self.summary(root)
        if summary is None:
            return []
        parent = self.parent(root)
        return [Up(parent, root, d) for d in summary.change(added, removed)]

    def summary_plan(self, root: str) -> Plan | None:
        """A generalization plan for this node's summary of ``root``'s tree, when one
        is due (see :meth:`routing.summary.Summary.plan`); :meth:`generalize` adopts it."""
        job = self.summary_plan_job(root)
        return None if job is None else job()

    def summary_plan_job(self, root: str) -> Callable[[], Plan] | None:
        """:meth:`summary_plan` as a function that may run in another thread (see
        :meth:`routing.summary.Summary.plan_job`)."""
        summary = self.summaries.get(root)
        return summary.plan_job() if summary is not None else None

    def generalize(self, root: str, plan: Plan) -> list[Up]:
        """Adopt ``plan`` for this node's summary of ``root``'s tree (made here or by
        another copy of this node); the deltas for the parent."""
        summary = self.summary(root)
        if summary is None:
            return []
        self.version += 1
        return [Up(self.parent(root), root, d) for d in summary.adopt(plan)]

    def plans(self) -> int:
        """Generalization plans its summaries adopted so far (each builds new structures)."""
        return sum(s.view.rebuilds for s in self.summaries.values() if s.view is not None)

    def warm(self) -> None:
        """Build now what routing would build at the next message (the atom engine and
        its compiled lazy atoms, and the engine of the local profiles), so that a change's
        cost is paid with the change."""
        self.engine.warm()
        if self._local is None:
            self._local = self._build_local()

    # -- data plane --------------------------------------------------------------------

    def children(self, root: str) -> list[str]:
        """Every child of this node in ``root``'s tree (what flooding sends to)."""
        return sorted(self.overlay.tree(root).children[self.broker])

    def route(self, root: str, message) -> list[str]:
        """The children in ``root``'s tree whose routing queries ``message`` matches
        (XML text or a :class:`formats.Message`), sorted."""
        table = self.tables.get(root)
        return sorted(table.route(message)) if table is not None else []

    def sample(self, root: str) -> bool:
        """At the root of ``root``'s tree: whether the next message goes down every link
        as a sample (one in :attr:`sample_every`, the first included; never without a
        budget, or one that limits nothing). Generalizations are measured on samples: the messages a broker gets
        otherwise are those its parent's table chose, which would make a summary that
        lets more through look free."""
        if self.budget is None or not self.budget.limits():
            return False
        n = self._messages[root] = self._messages.get(root, 0) + 1
        return n % self.sample_every == 1 % self.sample_every

    def forwards(self, root: str, message, links: list[str] | None = None, *,
                 project: bool = True, applied: Need | None = None, sample: bool = False) -> list[Forward]:
        """What goes down each link: the routed ``links`` (default :meth:`route`; every
        child for a ``sample``, which the node's summary measures itself on, see
        :meth:`sample`), each with what the link's transformation query makes of the
        message (:mod:`routing.incremental`; ``applied``: the transformation the message
        had on its way here) when ``project``, the link has one, it extends what the
        message had, its ``onyx-transform`` header is not too long (a path projection of
        thousands of profiles' paths: the message goes as it came), and it is worth its
        cost (:class:`LinkCost`, the header's bytes counted against what it saves:
        :func:`~routing.incremental.header_bytes`).

        >>> from routing.overlay import builtin
        >>> n = Node("b4", builtin("figure4"), bandwidth=1e4)
        >>> q = "for $t in $msg/a/t return <t>{$t/text()}</t>"
        >>> [u.parent for u in n.collect("b1", "b6", Delta("q", 1, n.query(q), need(q)))]
        ['b2', 'b2']
        >>> xml = b"<a><t>x</t><b>" + b"long text " * 100 + b"</b></a>"
        >>> [(f.link, f.transformed.to_xml()) for f in n.forwards("b1", xml)]
        [('b6', b'<a><t>x</t></a>')]
        """
        if sample:
            summary = self.summaries.get(root)
            if summary is not None and summary.view is not None:
                message = _decoded(message)
                summary.observe(message)
            links = self.children(root)
        elif links is None:
            links = self.route(root, message)
        table = self.tables.get(root) if project else None
        out = []
        for link in links:
            target = table.projection(link) if table is not None else None
            if (target is None or target == applied or not below(applied, target)
                    or len(to_header(target)) > MAX_TRANSFORM):
                out.append(Forward(link, None, applied))
                continue
            cost = self.costs.setdefault((root, link), LinkCost())
            measure = cost.seen % MEASURE_EVERY == 0
            cost.seen += 1
            if not measure and not cost.worth(self.bandwidth, self.cpu_per_byte):
                out.append(Forward(link, None, applied))
                continue
            message = _decoded(message)
            transformation = compiled(target, applied)
            started = time.perf_counter()
            part = transformation.apply(message)
            if measure:
                seconds = time.perf_counter() - started
                # what the link carries besides the message: the header that says what it had
                saved = len(message.to_xml()) - (len(part.to_xml()) + header_bytes(target) if part.tags else 0)
                cost.measured += 1
                w = 1 / min(cost.measured, 8)
                cost.saved += w * (saved - cost.saved)
                cost.seconds += w * (seconds - cost.seconds)
                if part.tags and not cost.worth(self.bandwidth, self.cpu_per_byte):
                    out.append(Forward(link, None, applied))
                    continue
            if not part.tags:
                # No element left: no binding passes the link's where (or the message has
                # none), so no profile below can give a result. A sample still goes (whole:
                # the summaries below measure themselves on it); a routed message does not.
                if sample:
                    out.append(Forward(link, None, applied))
                continue
            out.append(Forward(link, part, target))
        return out

    def deliver(self, message, xml: bytes | None = None, *, applied: Need | None = None) -> dict[str, list[bytes]]:
        """The results of the local profiles (see :meth:`yfilter.Engine.run`; ``xml``:
        the message as published, what a filter delivers). On a message that had a
        transformation (``applied``), only the profiles it serves give results (their
        remainders: the binding steps it ran are not run again); a profile it does not
        serve (a filter, or one registered below the link before the link heard of it)
        gives none from this message."""
        if applied is None:
            return self.local.run(message, xml=xml)
        done = (applied.binding, applied.steps) if applied.steps else None
        results = self.local.run(message, xml=xml, done=done)
        return {pid: r for pid, r in results.items() if serves(applied, self._need(pid))}

    def _need(self, pid: str) -> Needed:
        p = self.profiles[pid]
        held = self._needs.get(pid)
        if held is None or held[0] != p.version:
            held = self._needs[pid] = (p.version, need(p.text, self.namespaces))
        return held[1]

    def process(self, root: str, message, xml: bytes | None = None, *,
                applied: Need | None = None) -> Iterator[Forward | tuple[str, list[bytes]]]:
        """The whole data plane for one message, in priority order: every
        :class:`Forward`, then ``(profile id, results)`` of each local profile matched."""
        yield from self.forwards(root, message, applied=applied)
        yield from self.deliver(message, xml, applied=applied).items()


def _decoded(message) -> formats.Message:
    return message if isinstance(message, formats.Message) else formats.decode("text", bytes(message))
