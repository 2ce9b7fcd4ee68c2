"""One holistic plan for a broker: routing, incremental transformation and local
profiles over one engine, scheduled by dependency-aware priority (ONYX 4.3.1).

A plan has three classes of *targets*:

* ``route`` (high priority): an output link, reached when the message satisfies its
  routing query, a disjunction of conjunctions of absolute paths (as
  :mod:`routing.dnf` builds them; one XPath is one conjunction of one path);
* ``transform`` (medium): a transformation profile attached to an output link, whose
  result travels down that link instead of (or besides) the message;
* ``user`` (low): a profile hosted here, filter or transformation.

All of them are compiled into one engine's operator network (interned predicate
operators, see :meth:`yfilter.Engine.intern_steps`) and evaluated on one per-message
:class:`~yfilter.navigate.Session`, whose memo makes an operator shared by several
classes run once, at the highest priority that needs it (routing asks first; the
transformation and user classes find its result). :meth:`Plan.process` runs the
classes in priority order, each first come first served, and yields its events as
soon as they are known: a broker can forward the message down a link before any
local work starts.

* Routing goes link by link (registration order), conjunction by conjunction, path by
  path. A path already decided for this message is not evaluated again (links share
  paths), a conjunction stops at its first false path, and a link stops at its first
  true conjunction: a reached target makes the rest of its work skippable (ONYX
  4.2.1). Each reached link is announced at once (``Route``), then ``Routed`` closes
  the routing decision.
* Transformations wait: a link's transformation targets are released only once the
  link has been reached for this message, and those of links not reached never run.
  They are evaluated by navigation (bindings of for/where, then the return clause;
  see :mod:`yfilter.transform`): they are few per link, and being outside the
  automaton is what lets them wait.
* User profiles are matched last, by the engine's shared automaton (all of them in
  one pass) on the same session, so predicates that routing already evaluated are
  answered from the memo.

Operator executions (:class:`Counters`) are what the session records: predicate
evaluations (the run's memo of guard results), navigation steps and transformation
operators. The automaton's own work for the user class (DFA steps, index lookups,
candidate checks) is not in them, so the user class's count is a lower bound.

``Plan.process(message, prune=False)`` runs the same plan without the skipping (every
conjunction evaluated in full, every transformation run whether or not its link was
reached): the benchmark's measure of what pruning saves.

>>> plan = Plan()
>>> plan.add_route("b5", "/nitf/head/pubdata[@edition.area = 'SF']")
>>> plan.add_route("b6", [["/nitf//hl1", "/nitf/head"], ["/quote"]])
>>> plan.add_transform("b5", "t1", "for $n in $msg/nitf return <h>{$n//hl1/text()}</h>")
>>> plan.add_user("q1", "for $h in $msg//hl1 return <u>{$h/text()}</u>")
>>> msg = b"<nitf><head><pubdata edition.area='SF'/></head><hl1>Up</hl1></nitf>"
>>> for event in plan.process(msg):
...     print(event)
Route(link='b5')
Route(link='b6')
Routed(links=('b5', 'b6'))
Transformed(link='b5', profile_id='t1', results=(b'<h>Up</h>',))
UserResult(profile_id='q1', results=(b'<u>Up</u>',))
>>> plan.counters.transform_skipped, plan.counters.route_ops > 0
(0, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields

from yfilter import ast
from yfilter.dfa import DEFAULT_BUDGET
from yfilter.engine import Engine, MessageLike
from yfilter.errors import ProfileError
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.navigate import Nav, Session, select
from yfilter.parser import parse
from yfilter.transform import Transform

RouteQuery = str | Iterable[Iterable[str]]


# -- events ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Route:
    """The message goes down ``link``."""

    link: str


@dataclass(frozen=True, slots=True)
class Routed:
    """The routing decision is complete: these links, in the order they were reached."""

    links: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Transformed:
    """Results of the transformation target ``profile_id`` of ``link``, one per binding."""

    link: str
    profile_id: str
    results: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class UserResult:
    """Results of a local profile: the message for a filter, one document per binding
    for a transformation profile."""

    profile_id: str
    results: tuple[bytes, ...]


Event = Route | Routed | Transformed | UserResult


@dataclass
class Counters:
    """What one :meth:`Plan.process` did, per class. ``*_ops`` are operator executions
    (predicate evaluations, navigation steps, transformation operators; see
    :attr:`Session.operator_executions`) charged to the class that ran them first."""

    route_ops: int = 0
    transform_ops: int = 0
    user_ops: int = 0
    routes_reached: int = 0
    conjunctions_evaluated: int = 0
    conjunctions_skipped: int = 0  # of links already reached
    paths_evaluated: int = 0
    transforms_run: int = 0
    transform_skipped: int = 0  # transformation targets of links not reached
    users_matched: int = 0

    @property
    def ops(self) -> int:
        return self.route_ops + self.transform_ops + self.user_ops

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"ops": self.ops}


# -- compiled targets ----------------------------------------------------------------

class _Path:
    """One absolute path of routing queries, shared by every conjunction that uses it."""

    __slots__ = ("key", "nav", "refs")

    def __init__(self, key: str, nav: Nav) -> None:
        self.key, self.nav, self.refs = key, nav, 0


class _Link:
    __slots__ = ("conjunctions", "transforms")

    def __init__(self) -> None:
        self.conjunctions: list[tuple[_Path, ...]] = []
        self.transforms: dict[str, tuple[Transform, tuple]] = {}


class Plan:
    """Route, transform and user targets in one plan over one :class:`Engine` (see the
    module docstring). ``namespaces`` binds the prefixes every target may use.
    Not thread-safe, like the engine: changes go between messages."""

    def __init__(self, namespaces: Mapping[str, str] | None = None, *,
                 dfa_budget: int = DEFAULT_BUDGET) -> None:
        self.namespaces = dict(namespaces or {})
        self.engine = Engine(self.namespaces, dfa_budget=dfa_budget, runtime="python")
        self._links: dict[str, _Link] = {}
        self._routes: set[str] = set()  # links with a routing query
        self._paths: dict[str, _Path] = {}
        self.counters = Counters()

    # -- registration --------------------------------------------------------------
    def add_route(self, link: str, query: RouteQuery) -> None:
        """Set the routing query of ``link``: one XPath (filtering profile) or a
        disjunction of conjunctions of them. Raises :class:`ProfileError` naming the
        bad path; then nothing changes."""
        conjunctions = [[query]] if isinstance(query, str) else [list(c) for c in query]
        parsed = [[_as_path(text, self.namespaces) for text in c] for c in conjunctions]
        new = [tuple(self._path(p) for p in c) for c in parsed]  # before the old go
        entry = self._links.setdefault(link, _Link())
        old, entry.conjunctions = entry.conjunctions, new
        self._release(old)
        self._routes.add(link)

    def remove_route(self, link: str) -> None:
        """Drop ``link``'s routing query; its transformation targets stay registered
        but cannot run until it has one again. ``KeyError`` if it has none."""
        if link not in self._routes:
            raise KeyError(link)
        entry = self._links[link]
        self._release(entry.conjunctions)
        entry.conjunctions = []
        self._routes.discard(link)

    def add_transform(self, link: str, profile_id: str, text: str) -> None:
        """Attach (or replace) the transformation profile ``profile_id`` to ``link``."""
        if not is_flwr(text):
            raise ProfileError("a transformation target is a for ... return profile", 1)
        flwr = parse_flwr(text, self.namespaces)
        binding = self.engine.intern_steps(flwr.filter_path().steps)
        transform = Transform(flwr, binding, self.engine.intern_steps)
        entry = self._links.setdefault(link, _Link())
        old = entry.transforms.get(profile_id)
        entry.transforms[profile_id] = (transform, binding)
        if old is not None:
            self._release_transform(old)

    def remove_transform(self, link: str, profile_id: str) -> None:
        """``KeyError`` if ``link`` has no such transformation target."""
        self._release_transform(self._links[link].transforms.pop(profile_id))

    def add_user(self, profile_id: str, text: str) -> None:
        """Register (or replace) a local profile, filter or transformation."""
        self.engine.add(profile_id, text)

    def remove_user(self, profile_id: str) -> None:
        self.engine.remove(profile_id)

    def _path(self, path: ast.Path) -> _Path:
        key = str(path)
        p = self._paths.get(key)
        if p is None:
            p = self._paths[key] = _Path(key, Nav(self.engine.intern_steps(path.steps)))
        p.refs += 1
        return p

    def _release(self, conjunctions: list[tuple[_Path, ...]]) -> None:
        for c in conjunctions:
            for p in c:
                p.refs -= 1
                if p.refs == 0:
                    self.engine.release_steps(p.nav.steps)
                    del self._paths[p.key]

    def _release_transform(self, entry: tuple[Transform, tuple]) -> None:
        transform, binding = entry
        transform.release(self.engine.release_steps)
        self.engine.release_steps(binding)

    @property
    def links(self) -> list[str]:
        """Links with a routing query, in registration (evaluation) order."""
        return [link for link in self._links if link in self._routes]

    # -- processing ------------------------------------------------------------------
    def process(self, message: MessageLike, *, prune: bool = True) -> Iterator[Event]:
        """The events of one message, in priority order (see the module docstring);
        :attr:`counters` counts as it goes. Raises :class:`MessageError` for a
        malformed message before yielding anything."""
        session = self.engine.start(message)
        c = self.counters = Counters()
        decided: dict[_Path, bool] = {}

        start = session.operator_executions
        reached: list[str] = []
        for link in self.links:
            if self._reached(session, self._links[link], decided, prune, c):
                reached.append(link)
                c.routes_reached += 1
                c.route_ops = session.operator_executions - start
                yield Route(link)
        c.route_ops = session.operator_executions - start
        yield Routed(tuple(reached))

        start = session.operator_executions
        released = set(reached)
        for link, entry in self._links.items():
            if link not in released:
                c.transform_skipped += len(entry.transforms)
                if prune:
                    continue
            for pid, (transform, _) in entry.transforms.items():
                c.transforms_run += 1
                results = transform.results(session)
                c.transform_ops = session.operator_executions - start
                if results and link in released:
                    yield Transformed(link, pid, tuple(results))
        c.transform_ops = session.operator_executions - start

        start = session.operator_executions
        out = self.engine.run(message, session)
        c.user_ops = session.operator_executions - start
        c.users_matched = len(out)
        for pid, results in out.items():
            yield UserResult(pid, tuple(results))

    def _reached(self, session: Session, link: _Link, decided: dict, prune: bool,
                 c: Counters) -> bool:
        hit = False
        for k, conj in enumerate(link.conjunctions):
            c.conjunctions_evaluated += 1
            holds = True
            for p in conj:
                v = decided.get(p)
                if v is None:
                    c.paths_evaluated += 1
                    v = decided[p] = bool(select(session, p.nav))
                if not v:
                    holds = False
                    if prune:
                        break
            if holds:
                hit = True
                if prune:
                    c.conjunctions_skipped += len(link.conjunctions) - k - 1
                    break
        return hit

    def stats(self) -> dict[str, int]:
        """Sizes: links, conjunctions, distinct routing paths, transformation targets
        and the engine's own (user profiles, automaton, operators)."""
        return {"links": len(self._routes),
                "conjunctions": sum(len(e.conjunctions) for e in self._links.values()),
                "route_paths": len(self._paths),
                "transforms": sum(len(e.transforms) for e in self._links.values()),
                **self.engine.stats()}


def _as_path(text: str, namespaces: dict[str, str]) -> ast.Path:
    """A routing path with a trailing ``/@a`` or ``/text()`` folded into a predicate of
    its last step (the path is a condition: "has such an attribute / text node")."""
    path = parse(text, namespaces)
    if path.tail is None:
        return path
    *init, last = path.steps
    return ast.Path((*init, ast.Step(last.axis, last.test,
                                     (*last.preds, ast.RelPath((), path.tail)))))
