"""Early restructuring: a link carries what the profiles below it bind, not the message
(ONYX section 4.2.2, incremental transformation plans; early projection is in
:mod:`routing.projection`).

A link can be restructured when the profiles below it meet three conditions:

1. every one is a transformation profile (a filter's subscriber receives the message
   itself, so a filter below the link needs the message);
2. they all have the same binding: the same for path, predicates included, compared
   in a normalized form (the parsed path's text), so an upstream broker evaluates the
   binding once for all of them;
3. their where and return clauses read only inside the bound element. This is checked
   on the need analysis (:func:`routing.projection.clause_keeps` run from a sentinel
   context: every path it reports must start there), not assumed from the grammar, so
   an extension that lets a clause read outside its binding turns restructuring off
   instead of breaking it.

The link's transformation query (:class:`Restructuring`) evaluates the shared for path
on the message with the yfilter engine (the engine's bindings, in document order, a
nested binding listed once as itself) and emits one document: a root element
:data:`WRAPPER`, in an Onyx namespace no publisher's element can be in, with one child
per binding — a copy of the bound element projected (:class:`routing.projection.Projection`
with paths relative to the binding) to what the profiles below read. Every profile
below gets a *remainder query* (:func:`remainder`): its where and return, unchanged,
over ``$msg/onyx:bindings/*``. On the restructured document it gives exactly the
results the original profile gives on the message. A broker further down restructures
what it received with its own link's plan (:meth:`Restructuring.again`: same binding,
fewer paths), which equals restructuring the message with that plan.

:class:`TransformPlan` is a link's plan: counted like :class:`~routing.projection.LinkPlan`
(deletions undo additions, children's plans merge at their parent), and
:meth:`TransformPlan.decision` restructures when the three conditions hold, else
projects, else forwards the whole message.

>>> q = "for $s in $msg/nitf/body where $s/@id = 'x' return <r>{$s/p[1]}</r>"
>>> plan = TransformPlan()
>>> plan.add(reads(q))
>>> print(plan.decision())
for /nitf/body
/*
/*/p (subtree)
>>> xml = b"<nitf><head/><body id='x'><p>one</p><p>two</p></body><body id='y'/></nitf>"
>>> doc = plan.decision().apply(xml)
>>> doc
b'<onyx:bindings xmlns:onyx="urn:onyx:restructured"><body id="x"><p>one</p><p>two</p></body><body id="y"/></onyx:bindings>'
>>> remainder(q)
"for $s in $msg/onyx:bindings/* where $s/@id = 'x' return <r>{$s/p[1]}</r>"
>>> from yfilter import Engine
>>> e = Engine(remainder_namespaces({}))
>>> e.add("q", remainder(q))
>>> e.run(doc)
{'q': [b'<r><p>one</p></r>']}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Iterable, Union

from lxml import etree

from formats import Message
from routing.projection import WHOLE, Keep, LinkPlan, Needed, Projection, clause_keeps, need
from yfilter import Engine, ast
from yfilter.flwr import Flwr, is_flwr, parse_flwr
from yfilter.navigate import Nav, select
from yfilter.steps import Step
from yfilter.transform import copy_node

NS = "urn:onyx:restructured"
PREFIX = "onyx"
WRAPPER = f"{{{NS}}}bindings"
"""The root element of a restructured document; its children are the bindings."""

BOUND = ("/", "*")
"""The first step of a path relative to a binding: the bound element itself."""

_MARK = ("/", "\0bound")  # a context no path of a profile can name


class RestructureError(ValueError):
    """A restructuring that cannot be done as asked."""


@dataclass(frozen=True)
class Shape:
    """A transformation profile seen from its binding: ``binding`` is the for path's
    normalized text, ``keeps`` what its where and return read (paths starting with
    :data:`BOUND`), ``inside`` whether they read nothing else (condition 3)."""

    binding: str
    keeps: frozenset[Keep]
    inside: bool
    path: ast.Path = field(compare=False, repr=False)


@dataclass(frozen=True)
class Reads:
    """What one profile reads of a message: its projection need and, for a
    transformation profile, its shape (None for a filter)."""

    need: Needed
    shape: Shape | None


def reads(text: str, namespaces: Mapping[str, str] | None = None) -> Reads:
    """Both analyses of profile ``text``.

    >>> r = reads("for $n in $msg/a[@k = 1] return <r>{$n/b}</r>")
    >>> r.shape.binding, sorted(r.shape.keeps), r.shape.inside
    ('/a[@k = 1]', [((('/', '*'),), False), ((('/', '*'), ('/', 'b')), True)], True)
    >>> reads("/a/b").shape is None
    True
    """
    if not is_flwr(text):
        return Reads(WHOLE, None)
    q = parse_flwr(text, namespaces)
    read = clause_keeps(q, (_MARK,))
    inside = all(p[:1] == (_MARK,) for p, _ in read)
    keeps = {((BOUND, *p[1:]), whole) for p, whole in read if p[:1] == (_MARK,)}
    keeps.add(((BOUND,), False))
    return Reads(need(text, namespaces), Shape(str(q.path), frozenset(keeps), inside, q.path))


def remainder(text: str, namespaces: Mapping[str, str] | None = None) -> str:
    """The remainder query of transformation profile ``text``: its where and return
    clauses as written, its for path replaced by the restructured document's bindings.
    Run it with :func:`remainder_namespaces` bound.

    >>> remainder('for $x in $msg//a[b = "where"] where $x/c return <r/>')
    'for $x in $msg/onyx:bindings/* where $x/c return <r/>'
    """
    q = parse_flwr(text, namespaces)  # the ProfileError of a bad profile, with its position
    start, end = q.span
    out = f"{text[:start]}$msg/{PREFIX}:bindings/* {text[end:]}"
    r = parse_flwr(out, remainder_namespaces(namespaces or {}))
    if _clauses(r) != _clauses(q):  # the splice must not change a clause
        raise RestructureError(f"cannot split the for path off profile {text!r}")
    return out


def _clauses(q: Flwr) -> tuple:
    """The variable, where and return of ``q`` in a comparable form (transformation
    steps compare by identity, so by their key here)."""
    def norm(x):
        if isinstance(x, Step):
            return x.key
        if isinstance(x, tuple):
            return tuple(norm(i) for i in x)
        if is_dataclass(x):
            return type(x).__name__, *(norm(getattr(x, f.name)) for f in fields(x))
        return x

    return q.var, q.where, norm(q.ret)


def remainder_namespaces(namespaces: Mapping[str, str]) -> dict[str, str]:
    """``namespaces`` with :data:`PREFIX` bound to :data:`NS`, for remainder queries."""
    if namespaces.get(PREFIX, NS) != NS:
        raise RestructureError(f"the prefix {PREFIX!r} is bound to {namespaces[PREFIX]!r}; remainder "
                               f"queries need it for {NS!r}: bind the publisher's namespace to another prefix")
    return {**namespaces, PREFIX: NS}


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, strip_cdata=False)
_EMPTY = etree.tostring(etree.Element(WRAPPER, nsmap={PREFIX: NS}))
_OPEN, _CLOSE = _EMPTY[:-2] + b">", f"</{PREFIX}:bindings>".encode()


class Restructuring:
    """A link's transformation query under restructuring: the bindings of ``path``,
    each projected to ``keeps`` (paths relative to the binding)."""

    def __init__(self, path: ast.Path, keeps: Iterable[Keep]) -> None:
        self.binding = str(path)
        self.projection = Projection(keeps)
        self._engine = Engine()
        self._nav = Nav(self._engine.intern_steps(path.steps))

    def __str__(self) -> str:
        return f"for {self.binding}\n{self.projection}"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Restructuring) and self.binding == other.binding
                and self.projection == other.projection)

    def __hash__(self) -> int:
        return hash((self.binding, self.projection))

    def apply(self, message: Union[bytes, Message]) -> bytes:
        """The restructured document of ``message`` (XML text, e.g. a projection of
        the message from a link above, or a decoded message)."""
        session = self._engine.start(message)
        copies = [self.projection.cut(copy_node(session, node)) for node in select(session, self._nav)]
        if not copies:
            return _EMPTY
        for el in (e for c in copies for e in c.iter()):
            # An empty text node (an empty CDATA section to the engine) would be
            # written as nothing and read back as no text node at all.
            if el.text == "":
                el.text = etree.CDATA("")
            if el.tail == "":
                el.tail = etree.CDATA("")
        # Each copy is written on its own: moving it under the wrapper would let lxml
        # rewrite its namespace prefixes (same names, other bytes in the results).
        return b"".join([_OPEN, *(etree.tostring(c, encoding="utf-8") for c in copies), _CLOSE])

    def again(self, restructured: bytes) -> bytes:
        """Restructure a document that is already restructured (by a plan with this
        binding and at least these paths, on a link above)."""
        root = etree.fromstring(restructured, _PARSER)
        if root.tag != WRAPPER:
            raise RestructureError(f"not a restructured document: its root is {root.tag!r}, not {WRAPPER!r}")
        for child in root:
            self.projection.cut(child)
        return etree.tostring(root, encoding="utf-8")


class TransformPlan:
    """The merged reads of the profiles below one link, counted (removing undoes
    adding): a projection plan, and what restructuring needs to decide the three
    conditions."""

    def __init__(self) -> None:
        self.projecting = LinkPlan()
        self.others = 0  # profiles failing condition 1 or 3
        self.bindings: Counter[str] = Counter()
        self.keeps: Counter[Keep] = Counter()
        self._paths: dict[str, ast.Path] = {}
        self._cached: Restructuring | None = None

    def add(self, r: Reads, times: int = 1) -> None:
        """Count ``r`` in (``times`` may be negative: :meth:`remove`)."""
        self.projecting.add(r.need, times)
        s = r.shape
        if s is None or not s.inside:
            self.others += times
        else:
            self._paths.setdefault(s.binding, s.path)
            self._count(Counter({s.binding: times}), Counter(dict.fromkeys(s.keeps, times)))
        if self.others < 0:
            raise ValueError("removed reads that were never added")

    def remove(self, r: Reads) -> None:
        self.add(r, -1)

    def merge(self, other: "TransformPlan") -> None:
        """Add everything counted in ``other`` (a child link's plan, at its parent)."""
        self.projecting.merge(other.projecting)
        self.others += other.others
        for b, p in other._paths.items():
            self._paths.setdefault(b, p)
        self._count(other.bindings, other.keeps)

    def _count(self, bindings: Counter, keeps: Counter) -> None:
        for counter, delta in ((self.bindings, bindings), (self.keeps, keeps)):
            for k, n in delta.items():
                counter[k] += n
                if counter[k] <= 0:
                    del counter[k]
        for b in [b for b in self._paths if b not in self.bindings]:
            del self._paths[b]
        self._cached = None

    def restructuring(self) -> Restructuring | None:
        """The link's restructuring, or None unless the three conditions hold."""
        if self.others or len(self.bindings) != 1:
            return None
        if self._cached is None:
            (binding,) = self.bindings
            self._cached = Restructuring(self._paths[binding], self.keeps)
        return self._cached

    def projection(self) -> Projection | None:
        return self.projecting.projection()

    def decision(self) -> Union[Restructuring, Projection, None]:
        """What the link carries: restructured, else projected, else (None) the message."""
        return self.restructuring() or self.projection()

    def state(self) -> tuple | None:
        """What the plan decides, comparable with a plan rebuilt from scratch; None
        when nothing is counted (every profile counts in ``others`` or ``bindings``)."""
        if not self.others and not self.bindings:
            return None
        return self.projecting.whole > 0, self.projection(), self.restructuring()
