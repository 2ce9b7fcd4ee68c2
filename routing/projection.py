"""Early projection: what a link must carry for the transformation profiles below it
(ONYX section 4.2.2, incremental transformation plans).

A transformation profile reads only parts of a message: the nodes its for path and
where clause test, and the subtrees its return clause copies. When *every* profile
below a link is such a profile, the link can carry a projection of the message —
the root-to-node skeleton of the parts some profile reads, those parts' subtrees
where values or copies are needed — instead of the whole message.

* :func:`need` reads one profile: a :class:`Need` (paths to keep, each with or
  without its subtree), or :data:`WHOLE` for a filter, whose subscriber receives the
  message itself.
* :class:`LinkPlan` merges the needs of the profiles below a link, counted so that
  deletions undo additions; a broker's plan for its parent link is the merge of its
  children's plans and its own profiles' needs, so plans propagate up a tree like
  routing deltas do. :meth:`LinkPlan.projection` is the link's transformation query.
* :meth:`Projection.apply` projects a message. The projection keeps every node
  any kept path selects (predicates ignored, so a superset of what the profiles
  select) together with its ancestors and attributes, so each profile's paths select
  the same nodes in the projection as in the message — positions too, since a
  step's node-set (the children its name test selects) is kept whole — so the
  *remainder query* of every
  profile below the link is the profile itself. Projecting a projection again with
  a plan of a link further down (a subset of the paths) equals projecting the
  original with it, so each hop projects what it received.

>>> q = ("for $n in $msg/nitf where $n/head/@id = 'x' "
...       "return <r>{$n/body/body.head/hedline}</r>")
>>> plan = LinkPlan()
>>> plan.add(need(q))
>>> print(plan.projection())
/nitf
/nitf/body/body.head/hedline (subtree)
/nitf/head
>>> xml = (b"<nitf><head id='x'><title>T</title></head><body><body.head><hedline>H</hedline>"
...        b"<byline>B</byline></body.head><body.content>long</body.content></body></nitf>")
>>> plan.projection().apply(xml)
b'<nitf><head id="x"/><body><body.head><hedline>H</hedline></body.head></body></nitf>'
>>> plan.add(need("/nitf/head"))   # a filter below the link: the whole message again
>>> plan.projection() is None
True
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Iterable, Union

from lxml import etree

from formats import Message
from yfilter import ast
from yfilter.flwr import Constructor, Enclosed, Flwr, Projection as Proj, is_flwr, parse_flwr

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
    """The parts of a message one profile reads (see :func:`need`)."""

    keeps: frozenset[Keep]


Needed = Union[Need, _Whole]
"""What :func:`need` returns."""


def need(text: str, namespaces: Mapping[str, str] | None = None) -> Needed:
    """What profile ``text`` reads of a message: :data:`WHOLE` for a filter, else the
    kept paths of a transformation profile.

    >>> need("/nitf//hl1") is WHOLE, need("for $n in $msg/a[2] return <r/>").keeps
    (True, frozenset({((('/', 'a'),), False)}))
    >>> sorted(render(k) for k in need("for $n in $msg/a return <r>{$n/b/@c}{$n//d}</r>").keeps)
    ['/a', '/a//d (subtree)', '/a/b/@c']
    """
    if not is_flwr(text):
        return WHOLE
    q = parse_flwr(text, namespaces)
    out: set[Keep] = set()
    binding = _path(q.path.steps, (), out)
    out.add((binding, False))
    out |= clause_keeps(q, binding)
    return Need(frozenset(out))


def need_to_json(n: Needed) -> list | None:
    """``n`` as JSON (what a routing delta carries up the trees): ``None`` for
    :data:`WHOLE`, else its kept paths as ``[[[axis, test], ...], subtree]``.

    >>> need_to_json(need("for $n in $msg/a return <r>{$n/b}</r>"))
    [[[['/', 'a']], False], [[['/', 'a'], ['/', 'b']], True]]
    >>> need_from_json(need_to_json(need("/a"))) is WHOLE
    True
    """
    if n is WHOLE:
        return None
    return [[[list(step) for step in path], subtree] for path, subtree in sorted(n.keeps)]


def need_from_json(data: list | None) -> Needed:
    """The inverse of :func:`need_to_json`; ``ValueError`` for anything else."""
    if data is None:
        return WHOLE
    try:
        return Need(frozenset((tuple((str(axis), str(test)) for axis, test in path), bool(subtree))
                              for path, subtree in data))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a profile's need: {data!r}") from exc


def clause_keeps(q: Flwr, binding: Skeleton) -> set[Keep]:
    """What the where and return clauses of ``q`` read, as paths from ``binding``
    (the for path's skeleton, or a context of the caller's choosing: see
    :mod:`routing.restructure`)."""
    out: set[Keep] = set()
    if q.where is not None:
        _expr(q.where, binding, out)
    if isinstance(q.ret, Proj):  # a top-level copy: read as a subtree, like an enclosed one
        _projection(q.ret, binding, out)
    else:
        _constructor(q.ret, binding, out)
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


class Projection:
    """A link's transformation query: the kept paths of every profile below it."""

    def __init__(self, keeps: Iterable[Keep]) -> None:
        keeps = set(keeps)
        # A kept node keeps all its attributes, so an attribute path keeps its element;
        # a subtree keep subsumes the node keep of the same path.
        nodes = {(p[:-1] if p and p[-1][0] == "@" else p) for p, _ in keeps}
        whole = {p for p, w in keeps if w}
        self.paths: tuple[Keep, ...] = tuple(sorted((p, p in whole) for p in nodes))
        self._start = frozenset((i, 0) for i in range(len(self.paths)))
        self._moves: dict[tuple[frozenset, str], tuple[frozenset, int]] = {}

    def __str__(self) -> str:
        return "\n".join(sorted(render(k) for k in self.paths))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Projection) and self.paths == other.paths

    def __hash__(self) -> int:
        return hash(self.paths)

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

    def apply(self, message: Union[bytes, Message, etree._Element]) -> bytes:
        """The projection of ``message`` (XML text, a decoded message or an element,
        which is not modified) as XML text."""
        if isinstance(message, (bytes, str)):
            # CDATA sections stay as they are: an empty one is an empty text node to
            # the engine, which would otherwise become no text node at all.
            parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                                     strip_cdata=False)
            root = etree.fromstring(message, parser)
        elif isinstance(message, Message):
            root = message.to_element()
        else:
            root = copy.deepcopy(message)
        return etree.tostring(self.cut(root), encoding="utf-8")

    def cut(self, root: etree._Element) -> etree._Element:
        """Project the element ``root`` in place, as the root of what the kept paths
        start from (a message's root, or a bound element: :mod:`routing.restructure`);
        returns it."""
        states, kind = self._move(self._start, root.tag)
        if kind < 2:
            self._prune(root, states)
        return root

    def _prune(self, el: etree._Element, states: frozenset) -> bool:
        """Cut from ``el`` what no kept path needs; whether something below is kept."""
        el.text = None
        kept = False
        for child in list(el):
            keep = False
            if isinstance(child.tag, str) and states:
                sub, kind = self._move(states, child.tag)
                keep = kind == 2 or self._prune(child, sub) or kind == 1
            if keep:
                child.tail = None
                kept = True
            else:
                el.remove(child)
        return kept


class LinkPlan:
    """The merged needs of the profiles below one link (counted, so removing a need
    undoes adding it): :meth:`projection` is None while any of them needs the whole
    message, or when there is none."""

    def __init__(self) -> None:
        self.whole = 0
        self.keeps: Counter[Keep] = Counter()
        self._cached: Projection | None = None

    def add(self, n: Needed, times: int = 1) -> None:
        """Count ``n`` in (``times`` may be negative: :meth:`remove`)."""
        if n is WHOLE:
            self.whole += times
        else:
            for k in n.keeps:
                self.keeps[k] += times
                if self.keeps[k] <= 0:
                    del self.keeps[k]
            self._cached = None
        if self.whole < 0:
            raise ValueError("removed a need that was never added")

    def remove(self, n: Needed) -> None:
        self.add(n, -1)

    def merge(self, other: "LinkPlan") -> None:
        """Add every need counted in ``other`` (a child link's plan, at its parent)."""
        self.whole += other.whole
        self.keeps.update(other.keeps)
        self._cached = None

    def projection(self) -> Projection | None:
        if self.whole or not self.keeps:
            return None
        if self._cached is None:
            self._cached = Projection(self.keeps)
        return self._cached
