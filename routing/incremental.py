"""Incremental transformation in the course of routing (ONYX section 4.2.2).

A link can carry, instead of the message, what a *transformation query* makes of it,
when the queries downstream of the link allow one. ONYX names two kinds:

* **early projection**, if (1) the ``for`` clause is shared by all the queries
  downstream of the link, (2) the transformation query's ``where`` generalizes all
  their ``where`` clauses and (3) the binding provides all that their ``return`` clauses
  need (no absolute paths, no backward axis: the profile language has neither). The
  link then carries the message with the bindings that fail the generalized ``where``
  dropped and the rest projected on what the queries read;
* **early restructuring**, if (1), (2) and (3') every ``return`` is a series of
  transformation steps on the binding (``copy $c := $n modify (...) return $c``,
  :mod:`yfilter.flwr`) and the first steps are shared: the link runs those steps on
  every binding it carries.

A query's part in this is its :class:`Need` (:func:`need`): its for path, the conjuncts
of its where clause, the paths it reads (:data:`Keep`, the projection) and the keys of
its leading binding steps. Needs merge up the trees like routing deltas (a
:class:`LinkPlan` counts them, so a deletion undoes an addition): the merged need of
the queries below a link is the link's transformation query — the for path when all
share it, the *common* conjuncts (the generalized where: what every where implies),
the union of the paths read, the longest shared prefix of steps. A query that meets
none of the conditions (a filter, whose subscriber gets the message itself) needs the
:data:`WHOLE` message, and so does every link above it. Queries with different for
paths still share a *path projection* (no binding dropped, no step run): an Onyx
extension, not the paper's early projection (``docs/departures.md``).

Each broker sends its parent the merged need of everything below it (the summary's
``~need`` delta, :mod:`routing.summary`); the parent merges those of its children into
the query it sends up in turn (the paper's "new transformation query for its parent"),
and what a link runs on a message that already had the parent's query applied is the
*remainder* (:class:`Transformation`: the conjuncts not yet evaluated, the steps not
yet run; applying the parent's query, then the remainder, is applying the link's
query). A message says which transformation it has had (its :class:`Need`, the
``onyx-transform`` header), so a host runs each profile only on what it can serve
(:func:`serves`) and skips the steps already run.

The paper's example (``batched-nitf``): a profile below the link wants SF articles; the
link carries the SF article and not the NY one.

>>> q = ('for $n in $msg/batched-nitf/nitf where $n/head/pubdata/@edition.area = "SF" '
...      'return <s>{$n/body/body.content}</s>')
>>> plan = LinkPlan()
>>> plan.add(need(q))
>>> t = Transformation(plan.need())
>>> print(t)
for /batched-nitf/nitf[head/pubdata/@edition.area = 'SF']
keep /batched-nitf/nitf
keep /batched-nitf/nitf/body/body.content (subtree)
keep /batched-nitf/nitf/head/pubdata
>>> import formats
>>> m = formats.Message.from_xml(
...     b"<batched-nitf><nitf><head><pubdata edition.area='SF'/></head><body><body.content>C1"
...     b"</body.content></body></nitf><nitf><head><pubdata edition.area='NY'/></head>"
...     b"<body><body.content>C2</body.content></body></nitf></batched-nitf>")
>>> t.apply(m).to_xml()
b'<batched-nitf><nitf><head><pubdata edition.area="SF"/></head><body><body.content>C1</body.content></body></nitf></batched-nitf>'
"""

from __future__ import annotations

import bisect
import json
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Union

from formats import Message
from yfilter import Engine, ast
from yfilter.flwr import Constructor, Enclosed, Flwr, Projection as Proj, binding_steps, is_flwr, parse_flwr
from yfilter.navigate import Nav, select
from yfilter.parser import parse
from yfilter.steps import Delete, Drop, RenameNode, ReplaceValue, Step, independent

Skeleton = tuple[tuple[str, str], ...]
"""A path without predicates: ``(axis, name test)`` per step, from the root."""

Keep = tuple[Skeleton, bool]
"""A kept path and whether the subtrees of the nodes it selects are kept whole."""


class _Whole:
    """The need of a profile that reads the whole message."""

    def __repr__(self) -> str:
        return "WHOLE"


WHOLE = _Whole()


@dataclass(frozen=True)
class Need:
    """What the queries below a link let it do to a message (see the module docstring):
    ``keeps`` the paths they read; ``binding`` their shared for path (normalized text;
    None: no shared one, then a path projection only); ``where`` the conjuncts every
    where clause has (texts of predicates on the binding); ``steps`` the keys of the
    binding steps every query runs first. ``Need(frozenset())`` is no query at all."""

    keeps: frozenset[Keep]
    binding: str | None = None
    where: frozenset[str] = frozenset()
    steps: tuple[str, ...] = ()
    program: str | None = field(default=None, compare=False)
    """A profile text whose binding steps start with ``steps`` (to run them)."""


Needed = Union[Need, _Whole]
"""What :func:`need` returns."""

NOTHING = Need(frozenset())
"""The need of no query (a conjunction's pseudo-profile: the ``~need`` one says it)."""


def need(text: str, namespaces: Mapping[str, str] | None = None) -> Needed:
    """What profile ``text`` lets a link above it do: :data:`WHOLE` for a filter, else
    its :class:`Need`. The where conjuncts are kept only where dropping a binding that
    fails them cannot change what the for path selects (no position tests, no
    predicates above the binding); the steps only as far as each leaves the where
    clause's reads unchanged (:func:`yfilter.steps.independent`) and the bindings
    cannot nest (a child-axis for path).

    >>> n = need("for $n in $msg/a[@k = 1] where $n/b = 'x' and $n/c return <r>{$n/d}</r>")
    >>> n.binding, sorted(n.where), sorted(render(k) for k in n.keeps)
    ('/a[@k = 1]', ["b = 'x'", 'c'], ['/a', '/a/@k', '/a/b (subtree)', '/a/c', '/a/d (subtree)'])
    >>> need("/nitf//hl1") is WHOLE
    True
    """
    if not is_flwr(text):
        return WHOLE
    q = parse_flwr(text, namespaces)
    keeps: set[Keep] = set()
    *above, last = q.path.steps
    binding = _path(q.path.steps, (), keeps)
    keeps.add((binding, False))
    keeps |= clause_keeps(q, binding)
    conjuncts = _conjuncts(q.where)
    droppable = not any(s.preds for s in above) and not _positional(last.preds)
    reads = _reads((*last.preds, *conjuncts))
    steps = []
    # Steps run upstream must leave the for path selecting what it selected: bindings that
    # cannot nest (child steps), nothing above them testing their content, their name kept.
    if all(s.axis == "/" for s in q.path.steps) and not any(s.preds for s in above):
        for s in binding_steps(q):
            if _renames_binding(s) or not all(not value and _unseen(s, p) for p, value in reads):
                break
            steps.append(s.key)
    return Need(frozenset(keeps), str(q.path), frozenset(str(c) for c in conjuncts) if droppable else frozenset(),
                tuple(steps), text if steps else None)


def _renames_binding(step: Step) -> bool:
    """``rename node $c as ...``: the binding would no longer be what the for path names."""
    return isinstance(step, RenameNode) and not step.target.steps and step.target.tail is None


def _unseen(step: Step, path: ast.RelPath) -> bool:
    """Whether a where clause (or a for path's predicate) reading ``path`` from the
    binding gives the same after ``step``: it is evaluated after the link ran the step
    (a remainder's conjuncts, a host's whole profile). :func:`yfilter.steps.independent`
    allows a step to remove nodes ``path`` selects (no matter to a return clause); here
    an element-removing step must not reach them: ``path`` goes by named child steps only
    (whose nodes, not named as the removed elements, lie in none of their subtrees), and
    with the content of the binding itself replaced, reads only its attributes."""
    if not independent(step, path):
        return False
    if isinstance(step, (Delete, ReplaceValue)) and not isinstance(step.target.tail, ast.AttrTail):
        if not step.target.steps:  # the binding's own content
            return not path.steps
    elif not (isinstance(step, Drop) and step.names):
        return True  # renames, attribute updates: nothing a path selects is removed
    return all(s.axis != ast.DESCENDANT and s.test != "*" for s in path.steps)


def _conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    if e is None:
        return []
    return [c for i in e.items for c in _conjuncts(i)] if isinstance(e, ast.And) else [e]


def _positional(preds: tuple[ast.Expr, ...]) -> bool:
    """Whether step predicates test a position (``[2]``, ``position()`` anywhere)."""
    return any(isinstance(p, ast.Number) or _mentions_position(p) for p in preds)


def _mentions_position(e) -> bool:
    if isinstance(e, ast.Position):
        return True
    if isinstance(e, tuple):
        return any(_mentions_position(i) for i in e)
    fields = getattr(type(e), "__dataclass_fields__", None)
    return bool(fields) and any(_mentions_position(getattr(e, f)) for f in fields)


def _reads(e, value: bool = False) -> list[tuple[ast.RelPath, bool]]:
    """The relative paths a predicate reads (from the node it is on), each with
    whether it reads an element's string value (all of its subtree)."""
    if isinstance(e, ast.RelPath):
        return [(e, value and not isinstance(e.tail, ast.AttrTail))]
    if isinstance(e, (ast.Compare, ast.Call)):
        operands = (e.left, e.right) if isinstance(e, ast.Compare) else e.args
        return [r for o in operands for r in _reads(o, True)]
    if isinstance(e, tuple):
        return [r for i in e for r in _reads(i, value)]
    fields = getattr(type(e), "__dataclass_fields__", None)
    return [r for f in fields for r in _reads(getattr(e, f), value)] if fields else []


def clause_keeps(q: Flwr, binding: Skeleton) -> set[Keep]:
    """What the where and return clauses of ``q`` read, as paths from ``binding``."""
    out: set[Keep] = set()
    if q.where is not None:
        _expr(q.where, binding, out)
    if isinstance(q.ret, Constructor):
        _constructor(q.ret, binding, out)
    else:
        _projection(q.ret, binding, out)
    return out


def _path(steps: Iterable[ast.Step], ctx: Skeleton, out: set[Keep]) -> Skeleton:
    """Walk ``steps`` from ``ctx``, collecting their predicates' needs; the skeleton reached."""
    for s in steps:
        ctx = (*ctx, (s.axis, s.test))
        for p in s.preds:
            _expr(p, ctx, out)
    return ctx


def _expr(e: ast.Expr, ctx: Skeleton, out: set[Keep]) -> None:
    # Numbers and position() read nothing: the node-set they count in is kept whole.
    if isinstance(e, (ast.And, ast.Or)):
        for i in e.items:
            _expr(i, ctx, out)
    elif isinstance(e, ast.Not):
        _expr(e.item, ctx, out)
    elif isinstance(e, ast.RelPath):
        _rel(e, ctx, out, value=False)
    elif isinstance(e, (ast.Compare, ast.Call)):
        for operand in (e.left, e.right) if isinstance(e, ast.Compare) else e.args:
            _operand(operand, ctx, out)


def _operand(o: ast.Operand, ctx: Skeleton, out: set[Keep]) -> None:
    if isinstance(o, ast.RelPath):
        _rel(o, ctx, out, value=True)
    elif isinstance(o, ast.Call):
        for a in o.args:
            _operand(a, ctx, out)


def _rel(p: ast.RelPath, ctx: Skeleton, out: set[Keep], value: bool) -> None:
    """A relative path: existence test, or its value (the string value of an element
    reads its whole subtree; an attribute only its element's attributes)."""
    end = _path(p.steps, ctx, out)
    if isinstance(p.tail, ast.AttrTail):
        out.add((end + (("@", p.tail.name),), False))
    else:  # text() nodes and string values are read from the subtree
        out.add((end, value or isinstance(p.tail, ast.TextTail)))


def _constructor(c: Constructor, binding: Skeleton, out: set[Keep]) -> None:
    parts = [p for a in c.attrs for p in a.parts if isinstance(p, Enclosed)]
    for item in c.content:
        if isinstance(item, Constructor):
            _constructor(item, binding, out)
        elif isinstance(item, Enclosed):
            parts.append(item)
    for enclosed in parts:
        for proj in enclosed.items:
            _projection(proj, binding, out)


def _projection(p: Proj, binding: Skeleton, out: set[Keep]) -> None:
    # Copied elements, text nodes and atomized values all read whole subtrees.
    _rel(p.path, binding, out, value=p.kind != "attribute")


def render(keep: Keep) -> str:
    """A kept path as text: ``/a//b`` (the node, its attributes and the skeleton
    above it), ``/a/b/@c`` (one attribute) or ``/a/b (subtree)``."""
    path, whole = keep
    return "".join(a + t if a != "@" else "/@" + t for a, t in path) + (" (subtree)" if whole else "")


def need_to_json(n: Needed) -> dict | None:
    """``n`` as JSON (what a routing delta and the ``onyx-transform`` header carry):
    ``None`` for :data:`WHOLE`.

    >>> n = need("for $n in $msg/a where $n/b return <r/>")
    >>> need_to_json(n)
    {'keeps': [[[['/', 'a']], False], [[['/', 'a'], ['/', 'b']], False]], 'binding': '/a', 'where': ['b']}
    >>> need_from_json(need_to_json(n)) == n
    True
    >>> need_from_json(need_to_json(WHOLE)) is WHOLE
    True
    """
    if n is WHOLE:
        return None
    out: dict = {"keeps": [[[list(step) for step in path], subtree] for path, subtree in sorted(n.keeps)]}
    if n.binding is not None:
        out["binding"] = n.binding
        out["where"] = sorted(n.where)
    if n.steps:
        out["steps"], out["program"] = list(n.steps), n.program
    return out


def need_from_json(data: dict | list | None) -> Needed:
    """The inverse of :func:`need_to_json` (a list: the kept paths alone, as deltas
    logged before transformation queries had more); ``ValueError`` for anything else."""
    if data is None:
        return WHOLE
    try:
        if isinstance(data, list):
            data = {"keeps": data}
        keeps = frozenset((tuple((str(axis), str(test)) for axis, test in path), bool(subtree))
                          for path, subtree in data["keeps"])
        binding = data.get("binding")
        steps = tuple(str(s) for s in data.get("steps", ()))
        program = data.get("program")
        if steps and not isinstance(program, str):
            raise ValueError("steps without a program")
        return Need(keeps, None if binding is None else str(binding),
                    frozenset(str(w) for w in data.get("where", ())), steps, program)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"not a transformation query: {data!r}") from exc


@lru_cache(maxsize=256)
def to_header(n: Need) -> str:
    """``n`` as the ``onyx-transform`` header says it (a JSON object; a link whose header
    would be longer than :data:`formats.header.MAX_TRANSFORM` carries the message as it
    came, see :meth:`routing.node.Node.forwards`)."""
    return json.dumps(need_to_json(n), separators=(",", ":"), sort_keys=True)


@lru_cache(maxsize=256)
def header_bytes(n: Need) -> int:
    """What the ``onyx-transform`` header of ``n`` adds to a link's bytes, as the cost model
    counts it: its compressed size (the brokers' producer compresses record batches, and
    in a batch the same header repeats; zlib of the one header is the estimate)."""
    return len(zlib.compress(to_header(n).encode()))


@lru_cache(maxsize=256)
def from_header(text: str | None) -> Need | None:
    """The transformation a message had, from its ``onyx-transform`` header (None: it
    had none); ``ValueError`` for a header that does not say one.

    >>> n = need("for $n in $msg/a where $n/b return <r/>")
    >>> from_header(to_header(n)) == n, from_header(None)
    (True, None)
    """
    if text is None:
        return None
    try:
        n = need_from_json(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"onyx-transform is not JSON: {exc}") from None
    if n is WHOLE:
        raise ValueError("onyx-transform says no transformation: leave the header out")
    return n


class LinkPlan:
    """The merged needs of the queries below one link, counted (removing a need undoes
    adding it): :meth:`need` is their transformation query."""

    def __init__(self) -> None:
        self.whole = 0
        self.count = 0  # needs counted (not WHOLE, not NOTHING)
        self.keeps: Counter[Keep] = Counter()
        self.bindings: Counter[str | None] = Counter()
        self.where: Counter[str] = Counter()
        self.steps: Counter[tuple[str, ...]] = Counter()  # every prefix of every need's steps
        self.programs: dict[tuple[str, ...], str] = {}
        self._cached: Needed | None = None

    def add(self, n: Needed, times: int = 1) -> None:
        """Count ``n`` in (``times`` may be negative: :meth:`remove`)."""
        self._cached = None
        if n is WHOLE:
            self.whole += times
        elif n != NOTHING:
            self.count += times
            _bump(self.keeps, dict.fromkeys(n.keeps, times))
            _bump(self.bindings, {n.binding: times})
            _bump(self.where, dict.fromkeys(n.where, times))
            prefixes = [n.steps[:k] for k in range(1, len(n.steps) + 1)]
            _bump(self.steps, dict.fromkeys(prefixes, times))
            if times > 0 and n.steps:
                self.programs.setdefault(n.steps, n.program)
            for p in [p for p in self.programs if p not in self.steps]:
                del self.programs[p]
        if self.whole < 0 or self.count < 0:
            raise ValueError("removed a need that was never added")

    def remove(self, n: Needed) -> None:
        self.add(n, -1)

    def merge(self, other: "LinkPlan") -> None:
        """Add everything counted in ``other``."""
        self._cached = None
        self.whole += other.whole
        self.count += other.count
        for mine, theirs in ((self.keeps, other.keeps), (self.bindings, other.bindings),
                             (self.where, other.where), (self.steps, other.steps)):
            _bump(mine, theirs)
        for k, v in other.programs.items():
            self.programs.setdefault(k, v)

    def empty(self) -> bool:
        return not self.whole and not self.count

    def need(self) -> Needed:
        """The transformation query of what is counted: :data:`WHOLE` while anything
        needs the whole message, :data:`NOTHING` when nothing is counted."""
        if self._cached is None:
            self._cached = self._merged()
        return self._cached

    def _merged(self) -> Needed:
        if self.whole:
            return WHOLE
        if not self.count:
            return NOTHING
        keeps = frozenset(self.keeps)
        if len(self.bindings) != 1 or None in self.bindings:
            return Need(keeps)
        (binding,) = self.bindings
        where = frozenset(w for w, c in self.where.items() if c == self.count)
        steps = max((p for p, c in self.steps.items() if c == self.count), key=len, default=())
        program = None
        if steps:
            program = next(v for k, v in self.programs.items() if k[:len(steps)] == steps)
        return Need(keeps, binding, where, steps, program)

    def projection(self) -> Need | None:
        """The link's transformation query, or None when it can have none (something
        below needs the whole message, or nothing is below)."""
        n = self.need()
        return None if n is WHOLE or n == NOTHING else n


def _bump(counter: Counter, delta: Mapping) -> None:
    for k, n in delta.items():
        counter[k] += n
        if counter[k] <= 0:
            del counter[k]


def below(applied: Need | None, target: Need) -> bool:
    """Whether ``target`` can be applied to a message that had ``applied`` (and gives
    what ``target`` gives on the message): the same for path, fewer conjuncts, more
    paths kept, a prefix of the steps — what a parent's query is to its child's."""
    if applied is None:
        return True
    if applied.binding is None:  # a path projection: nothing dropped, no step run
        return target.keeps <= applied.keeps
    return (applied.binding == target.binding and applied.where <= target.where
            and target.keeps <= applied.keeps and target.steps[:len(applied.steps)] == applied.steps)


@lru_cache(maxsize=65536)  # asked per result of every message: the same pairs, message after message
def serves(applied: Need | None, profile: Needed) -> bool:
    """Whether a profile whose need is ``profile`` gives its results on a message that
    had ``applied`` (its remainder is the profile with the applied steps skipped)."""
    if applied is None:
        return True
    return profile is not WHOLE and below(applied, profile)


class Transformation:
    """What a link runs: ``target`` (the link's :class:`Need`), on a message that
    already had ``applied`` (its remainder: the conjuncts and steps ``applied`` did
    not have). :meth:`apply` works on the decoded message the broker routed (no
    second parse; only a binding that steps rewrite is built as a tree)."""

    def __init__(self, target: Need, applied: Need | None = None) -> None:
        if not below(applied, target):
            raise ValueError("the link's query does not extend what the message had")
        self.target = target
        done = applied.where if applied is not None else frozenset()
        self.where = sorted(target.where - done)
        self.steps_done = len(applied.steps) if applied is not None else 0
        self._engine = Engine()
        self._bindings = self._passing = None
        if target.binding is not None and (self.where or target.steps[self.steps_done:]):
            base = parse(target.binding)
            self._bindings = Nav(self._engine.intern_steps(base.steps))
            path = parse(target.binding + "".join(f"[{w}]" for w in self.where)) if self.where else base
            self._passing = Nav(self._engine.intern_steps(path.steps))
        self.steps: tuple[Step, ...] = ()
        if target.steps[self.steps_done:]:
            steps = binding_steps(parse_flwr(target.program))
            assert tuple(s.key for s in steps[:len(target.steps)]) == target.steps, "program without the steps"
            self.steps = steps[self.steps_done:len(target.steps)]
        self._keep = _Keeper(target.keeps)

    def __str__(self) -> str:
        lines = []
        if self.target.binding is not None:
            lines.append("for " + self.target.binding + "".join(f"[{w}]" for w in self.where))
        lines += [f"keep {render(k)}" for k in sorted(self._keep.paths, key=render)]
        lines += [f"step {s.key}" for s in self.steps]
        return "\n".join(lines)

    def apply(self, message: Message) -> Message:
        """The message the link carries."""
        dropped: list[int] = []
        passing: list[int] = []
        if self._bindings is not None:
            session = self._engine.start(message)
            bound = select(session, self._bindings)
            passing = select(session, self._passing) if self.where else bound
            if self.where:
                dropped = _droppable(message, bound, passing)
        return self._keep.project(message, dropped, passing if self.steps else (), self.steps)


class _Keeper:
    """A projection on kept paths, run over a message's element table by a lazy DFA."""

    def __init__(self, keeps: Iterable[Keep]) -> None:
        keeps = set(keeps)
        # A kept node keeps all its attributes, so an attribute path keeps its element;
        # a subtree keep subsumes the node keep of the same path.
        nodes = {(p[:-1] if p and p[-1][0] == "@" else p) for p, _ in keeps}
        whole = {p for p, w in keeps if w}
        self.paths: tuple[Keep, ...] = tuple(sorted((p, p in whole) for p in nodes))
        self._start = frozenset((i, 0) for i in range(len(self.paths)))
        self._moves: dict[tuple[frozenset, str], tuple[frozenset, int]] = {}

    def _move(self, states: frozenset, tag: str) -> tuple[frozenset, int]:
        """States after an element named ``tag`` and what it is: 0 not selected, 1
        selected (keep the node), 2 selected with its subtree. Cached: a lazy DFA."""
        key = (states, tag)
        hit = self._moves.get(key)
        if hit is not None:
            return hit
        nxt, kind = set(), 0
        for i, k in states:
            path = self.paths[i][0]
            axis, test = path[k]
            if axis == "//":
                nxt.add((i, k))
            if test == "*" or test == tag:
                if k + 1 == len(path):
                    kind = max(kind, 2 if self.paths[i][1] else 1)
                else:
                    nxt.add((i, k + 1))
        hit = self._moves[key] = (frozenset(nxt), kind)
        return hit

    def project(self, m: Message, dropped: list[int], bindings: Iterable[int], steps: tuple[Step, ...]) -> Message:
        """``m`` without the ``dropped`` elements (and their subtrees), projected on the
        kept paths, with ``steps`` run on each of the ``bindings``."""
        tags, depths, ends, parents = m.tags, m.depths, m.ends, m.parents
        n = len(tags)
        skip = dict.fromkeys(dropped, True)
        kept = bytearray(n)  # 0 no, 1 the node, 2 inside a kept subtree (all of it)
        states: list = [None] * n
        i = 0
        while i < n:
            if i in skip:
                i = ends[i]
                continue
            p = parents[i]
            sub, kind = self._move(self._start if p < 0 else states[p], tags[i])
            if kind == 2:
                end = ends[i]
                for j in range(i, end):
                    kept[j] = 2
                for j in dropped:  # dropped bindings inside a kept subtree stay dropped
                    if i < j < end:
                        for k in range(j, ends[j]):
                            kept[k] = 0
                _mark_up(kept, parents, p)
                i = end
                continue
            states[i] = sub
            if kind == 1:
                kept[i] = 1
                _mark_up(kept, parents, p)
            elif not sub:
                i = ends[i]
                continue
            i += 1
        rewritten = {b: _rewrite(m, b, steps) for b in bindings if kept[b]} if steps else {}
        tags2, depths2, attrs2, texts2, tails2, ns2 = [], [], [], [], [], []
        attrs, texts, tails, nsmaps = m.attrs, m.texts, m.tails, m.nsmaps
        i = 0
        while i < n:
            k = kept[i]
            if not k:
                i += 1
                continue
            if i in rewritten:
                sub = rewritten[i]
                base = depths[i] - 1
                tags2 += sub.tags
                depths2 += [d + base for d in sub.depths]
                attrs2 += sub.attrs
                texts2 += sub.texts
                tails2.append(tails[i] if kept[parents[i]] == 2 else "")
                tails2 += sub.tails[1:]
                scope = _scope(m, parents[i])
                ns2.append({k: v for k, v in sub.nsmaps[0].items() if scope.get(k) != v})
                ns2 += sub.nsmaps[1:]
                i = ends[i]
                continue
            tags2.append(tags[i])
            depths2.append(depths[i])
            attrs2.append(attrs[i])
            texts2.append(texts[i] if k == 2 else "")
            p = parents[i]
            tails2.append(tails[i] if p >= 0 and kept[p] == 2 else "")
            ns2.append(nsmaps[i])
            i += 1
        return Message(tags2, depths2, attrs2, texts2, tails2, nsmaps=ns2)


def _droppable(m: Message, bound: list[int], passing: list[int]) -> list[int]:
    """The bindings (element indexes) that fail and can go with their subtrees: none with a
    passing binding inside it or around it (a for path with ``//`` binds nested elements).

    >>> m = Message.from_xml(b"<r><n k='0'><n k='1'/></n><n k='0'/></r>")
    >>> _droppable(m, [1, 2, 3], [2])
    [3]
    """
    ok = sorted(passing)
    ends, out = m.ends, []
    for b in bound:
        if b in ok:
            continue
        i = bisect.bisect_right(ok, b)
        inside = i < len(ok) and ok[i] < ends[b]  # the next passing one starts in b's subtree
        around = any(p < b < ends[p] for p in ok[:i])
        if not inside and not around:
            out.append(b)
    return out


def _mark_up(kept: bytearray, parents: list[int], p: int) -> None:
    while p >= 0 and not kept[p]:
        kept[p] = 1
        p = parents[p]


def _scope(m: Message, i: int) -> dict:
    """The namespace declarations in scope at element ``i`` (-1: none)."""
    chain = []
    while i >= 0:
        chain.append(m.nsmaps[i])
        i = m.parents[i]
    out: dict = {}
    for d in reversed(chain):
        out.update(d)
    return out


def _rewrite(m: Message, b: int, steps: tuple[Step, ...]) -> Message:
    """The subtree of element ``b`` after ``steps``, as a message of its own (its root's
    declarations: those in scope at ``b``)."""
    end = m.ends[b]
    depth = m.depths[b] - 1
    nsmaps = [_scope(m, b)] + m.nsmaps[b + 1:end]
    sub = Message(m.tags[b:end], [d - depth for d in m.depths[b:end]], m.attrs[b:end],
                  m.texts[b:end], [""] + m.tails[b + 1:end], nsmaps=nsmaps)
    elements = [sub.to_element()]
    for s in steps:
        elements = s.apply(elements, None)
    if len(elements) != 1:
        raise ValueError("a binding step removed the binding")
    return Message.from_element(elements[0])


@lru_cache(maxsize=256)
def compiled(target: Need, applied: Need | None) -> Transformation:
    """The :class:`Transformation` of ``target`` after ``applied`` (kept: a link runs
    the same one on message after message)."""
    return Transformation(target, applied)
