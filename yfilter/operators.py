"""The operator network that hangs off NFA transitions: value predicates, nested-path
joins, positions and ``and``/``or``/``not``.

A :class:`Guard` is everything the predicates of one location step require of the
element bound to that step, e.g. ``p[@x='a'][2]``. It is evaluated only for elements
the path automaton has already brought to that step (selection postponed until the
structure matches), at most once per element and message (memo in the run), and is
shared by every profile with the same step. A guard is indexed by an *anchor*, one
conjunct every match needs that a hash lookup on the element's own values can find:
an attribute equality (``@a = 'v'``: one lookup finds every guard on that attribute
of every state the element can be in), a text node or string-value equality, or an
attribute's presence; see :mod:`yfilter.dfa`. A guard without one is *lazy*: it is
evaluated only when something that depends on it is already a candidate.

A nested path is a *join*: ``/a[b/c]`` holds for an ``a`` element exactly when the
relative path ``b/c`` selects something from that very element. It is evaluated on
demand, from that element, once per message (memo in the run; see
:meth:`RelPath.exists`), so only elements where everything cheaper already held pay
for it.
"""

from __future__ import annotations

from typing import Callable

from yfilter.values import OPS


class Pred:
    """A compiled condition on one element. ``positional`` when it reads position()."""

    __slots__ = ("key",)
    positional = False

    def ev(self, run, node, pos: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def conjuncts(self) -> tuple["Pred", ...]:
        return (self,)

    def rels(self) -> list["RelPath"]:
        """The nested relative paths this condition joins with (for registration)."""
        return []

    def subguards(self) -> list["Guard"]:
        """Guards of paths evaluated directly (function arguments), for registration."""
        return []


Comparison = tuple[str, "str | float"]
"""``(op, value)``: what a test compares with (a string literal or a number), kept
beside the compiled ``test`` for :mod:`yfilter.native`."""


class AttrTest(Pred):
    """``@a`` (``test`` None) or ``@a op literal``; ``eq`` holds the literal of a
    string equality, which makes the test indexable."""

    __slots__ = ("name", "test", "eq", "cmp")

    def __init__(self, name: str, test: Callable[[str], bool] | None, key: str,
                 eq: str | None = None, cmp: Comparison | None = None) -> None:
        self.name, self.test, self.key, self.eq, self.cmp = name, test, key, eq, cmp

    def ev(self, run, node, pos):
        v = run.doc.attr(node, self.name)
        if v is None:
            return False
        return True if self.test is None else self.test(v)


class TextTest(Pred):
    """``text()`` or ``text() op literal``: each text node is compared on its own;
    ``eq`` as in :class:`AttrTest`."""

    __slots__ = ("test", "eq", "cmp")

    def __init__(self, test: Callable[[str], bool] | None, key: str,
                 eq: str | None = None, cmp: Comparison | None = None) -> None:
        self.test, self.key, self.eq, self.cmp = test, key, eq, cmp

    def ev(self, run, node, pos):
        texts = run.doc.text_nodes(node)
        if self.test is None:
            return bool(texts)
        test = self.test
        return any(test(t) for t in texts)


class SelfTest(Pred):
    """``. op literal``: the element's string-value (all descendant text); ``eq``
    as in :class:`AttrTest`."""

    __slots__ = ("test", "eq", "cmp")

    def __init__(self, test: Callable[[str], bool], key: str, eq: str | None = None,
                 cmp: Comparison | None = None) -> None:
        self.test, self.key, self.eq, self.cmp = test, key, eq, cmp

    def ev(self, run, node, pos):
        return self.test(run.string_value(node))


class Always(Pred):
    """``[.]``: the context element exists."""

    __slots__ = ()

    def __init__(self) -> None:
        self.key = "."

    def ev(self, run, node, pos):
        return True


class PosTest(Pred):
    """``[n]`` / ``position() op n``."""

    __slots__ = ("relation", "op", "value")
    positional = True

    def __init__(self, op: str, value: float, key: str) -> None:
        self.relation, self.op, self.value, self.key = op, OPS[op], value, key

    def ev(self, run, node, pos):
        return self.op(float(pos), self.value)


class Nested(Pred):
    """Existence of a nested relative path below the element (a join)."""

    __slots__ = ("rel",)

    def __init__(self, rel: "RelPath") -> None:
        self.rel, self.key = rel, rel.key

    def ev(self, run, node, pos):
        return run.nested(self.rel, node)

    def rels(self):
        return [self.rel]


class Func(Pred):
    """``contains(a, b)`` / ``starts-with(a, b)`` over ``string()`` of each argument
    (for a node-set: the string-value of its first node in document order)."""

    __slots__ = ("fn", "args")

    def __init__(self, name: str, args: tuple["StrArg", ...], key: str) -> None:
        self.fn = str.__contains__ if name == "contains" else str.startswith
        self.args, self.key = args, key

    def ev(self, run, node, pos):
        a, b = self.args
        return self.fn(a.string(run, node), b.string(run, node))

    def subguards(self) -> list["Guard"]:
        return [g for a in self.args if a.rel is not None
                for _, _, g in a.rel.steps if g is not None]


class NotP(Pred):
    __slots__ = ("item", "positional")

    def __init__(self, item: Pred) -> None:
        self.item, self.key, self.positional = item, f"not({item.key})", item.positional

    def ev(self, run, node, pos):
        return not self.item.ev(run, node, pos)

    def rels(self):
        return self.item.rels()

    def subguards(self):
        return self.item.subguards()


class AndP(Pred):
    __slots__ = ("items", "positional")

    def __init__(self, items: tuple[Pred, ...]) -> None:
        self.items = items
        self.key = " and ".join(f"({i.key})" for i in items)
        self.positional = any(i.positional for i in items)

    def ev(self, run, node, pos):
        for i in self.items:
            if not i.ev(run, node, pos):
                return False
        return True

    def conjuncts(self):
        return tuple(c for i in self.items for c in i.conjuncts())

    def rels(self):
        return [r for i in self.items for r in i.rels()]

    def subguards(self):
        return [g for i in self.items for g in i.subguards()]


class OrP(Pred):
    __slots__ = ("items", "positional")

    def __init__(self, items: tuple[Pred, ...]) -> None:
        self.items = items
        self.key = " or ".join(f"({i.key})" for i in items)
        self.positional = any(i.positional for i in items)

    def ev(self, run, node, pos):
        for i in self.items:
            if i.ev(run, node, pos):
                return True
        return False

    def rels(self):
        return [r for i in self.items for r in i.rels()]

    def subguards(self):
        return [g for i in self.items for g in i.subguards()]


class StrArg:
    """A function argument: a literal or ``string(relative path)``."""

    __slots__ = ("literal", "rel", "tail", "key")

    def __init__(self, key: str, literal: str | None = None, rel: "RelPath | None" = None,
                 tail: tuple[str, str | None] | None = None) -> None:
        # tail: ('self', None) | ('attr', name) | ('text', None)
        self.key, self.literal, self.rel, self.tail = key, literal, rel, tail

    def string(self, run, node) -> str:
        if self.literal is not None:
            return self.literal
        doc = run.doc
        nodes = [node] if self.rel is None else self.rel.select(run, node)
        kind, name = self.tail
        for n in nodes:
            if kind == "self":
                return run.string_value(n)
            if kind == "attr":
                v = doc.attr(n, name)
                if v is not None:
                    return v
            else:
                texts = doc.text_nodes(n)
                if texts:
                    return texts[0]
        return ""


_EMPTY: frozenset = frozenset()


class Need:
    """Values a message must contain somewhere for a condition to hold: ``base``,
    attribute pairs (each written as one string by :func:`attr_atom`), text nodes
    and element names; ``selves``, string-values of elements (kept apart: costlier to
    collect). Only conjuncts count (what sits under ``or`` / ``not`` is not needed),
    so a message lacking one of them cannot satisfy the condition: a necessary test,
    two set inclusions (see :class:`yfilter.document.Contents`).

    >>> from yfilter.document import TreeDoc
    >>> from lxml import etree
    >>> doc = TreeDoc(etree.fromstring(b"<a x='1'><b>hi</b></a>"))
    >>> Need(frozenset({attr_atom("x", "1")}), frozenset({"hi"})).met(doc.contents())
    True
    >>> Need(frozenset({"c"})).met(doc.contents())
    False
    """

    __slots__ = ("base", "selves")

    def __init__(self, base: frozenset = frozenset(), selves: frozenset = frozenset()) -> None:
        # One shared empty set: an empty frozenset costs as much as a small one.
        self.base, self.selves = base or _EMPTY, selves or _EMPTY

    def __or__(self, other: "Need") -> "Need":
        return Need(self.base | other.base, self.selves | other.selves)

    def __bool__(self) -> bool:
        return bool(self.base or self.selves)

    def met(self, values) -> bool:
        """Does a document with these :class:`~yfilter.document.Contents` hold it all?"""
        return self.base <= values.base and (not self.selves or self.selves <= values.selves())


NO_NEED = Need()


def attr_atom(name: str, value: str) -> str:
    """An attribute's name and value as one string (no name or value holds NUL, so
    distinct pairs never meet; strings hash once, tuples at every lookup).

    >>> attr_atom("a", "1")
    'a\\x001'
    """
    return f"{name}\x00{value}"


class Guard:
    """The predicates of one step (with its name test, which positions depend on)."""

    __slots__ = ("key", "test", "preds", "anchor", "_anchor_pred", "pure", "refs", "positional",
                 "need")

    def __init__(self, test: str, preds: tuple[Pred, ...]) -> None:
        self.test, self.preds = test, preds
        self.key = test + "".join(f"[{p.key}]" for p in preds)
        self.refs = 0
        self.positional = any(p.positional for p in preds)
        self._anchor_pred: Pred | None = None
        self.anchor = self._anchor()
        # The anchor is the whole guard: an index hit needs no further check.
        self.pure = len(preds) == 1 and self._anchor_pred is preds[0]
        self.need = _need(preds)

    def __repr__(self) -> str:
        return f"Guard({self.key})"

    def _anchor(self) -> tuple:
        # Any top-level conjunct of any predicate must hold at the element itself
        # (positions do not change what @a is), so it can stand for the whole guard
        # in an index. Prefer the most selective kind; nested paths, positions and
        # functions cannot be looked up: such a guard is lazy.
        found: dict[str, tuple] = {}
        for p in self.preds:
            for c in p.conjuncts():
                if isinstance(c, AttrTest):
                    if c.eq is not None:
                        found.setdefault("eq", (("eq", c.name, c.eq), c))
                    elif c.test is None:
                        found.setdefault("has", (("has", c.name), c))
                elif isinstance(c, TextTest) and c.eq is not None:
                    found.setdefault("text", (("text", c.eq), c))
                elif isinstance(c, SelfTest) and c.eq is not None:
                    found.setdefault("text", (("self", c.eq), c))
        for kind in ("eq", "text", "has"):
            if kind in found:
                anchor, self._anchor_pred = found[kind]
                return anchor
        return ("lazy",)

    def rels(self) -> list["RelPath"]:
        return [r for p in self.preds for r in p.rels()]

    def subguards(self) -> list["Guard"]:
        return [g for p in self.preds for g in p.subguards()]

    def check(self, run, node) -> bool:
        """Do the predicates hold at ``node`` (evaluated once per message)?"""
        memo = run.memo
        key = (self, node)
        r = memo.get(key)
        if r is None:
            if self.positional:
                r = self._holds(run, node, len(self.preds))
            else:
                r = True
                for p in self.preds:
                    if not p.ev(run, node, 0):
                        r = False
                        break
            memo[key] = r
        return r

    def _holds(self, run, node, k: int) -> bool:
        """Do the first ``k`` predicates hold at ``node``, each with the position the
        element has among the siblings that passed the predicates before it?"""
        preds = self.preds
        for j in range(k):
            p = preds[j]
            pos = self._position(run, node, j) if p.positional else 0
            if not p.ev(run, node, pos):
                return False
        return True

    def _position(self, run, node, k: int) -> int:
        doc, memo, test = run.doc, run.memo, self.test
        pos = 1
        for sib in doc.preceding_siblings(node):
            if test != "*" and doc.tag(sib) != test:
                continue
            key = (self, sib, k)
            ok = memo.get(key)
            if ok is None:
                ok = memo[key] = self._holds(run, sib, k)
            if ok:
                pos += 1
        return pos


def _need(preds: tuple[Pred, ...]) -> Need:
    base, selves = set(), set()
    for p in preds:
        for c in p.conjuncts():
            if isinstance(c, AttrTest) and c.eq is not None:
                base.add(attr_atom(c.name, c.eq))
            elif isinstance(c, TextTest) and c.eq is not None:
                base.add(c.eq)
            elif isinstance(c, SelfTest) and c.eq is not None:
                selves.add(c.eq)
            elif isinstance(c, Nested):
                base |= c.rel.names
                for _, _, g in c.rel.steps:
                    if g is not None:
                        base |= g.need.base
                        selves |= g.need.selves
    if not (base or selves):
        return NO_NEED
    return Need(frozenset(base), frozenset(selves))


class RelPath:
    """A nested relative path, e.g. ``head/pubdata[@edition.area = 'SF']``, as steps
    ``(axis, test, guard)``; ``refs`` counts the guards that use it, ``names`` are
    the element names it needs."""

    __slots__ = ("key", "steps", "refs", "names")

    def __init__(self, key: str, steps: tuple[tuple[str, str, Guard | None], ...]) -> None:
        self.key, self.steps = key, steps
        self.refs = 0
        self.names = frozenset(t for _, t, _ in steps if t != "*")

    def exists(self, run, node) -> bool:
        """Does the path select anything from ``node``? Depth first, stopping at the
        first hit (the run memoises the answer per element)."""
        return _exists(run, self.steps, 0, node)

    def select(self, run, node) -> list:
        """The nodes the path selects from ``node``, in document order (used for
        ``string()`` of function arguments, where the first node counts)."""
        doc = run.doc
        current = [node]
        for axis, test, guard in self.steps:
            seen = set()
            nxt = []
            for c in current:
                for n in (doc.children(c) if axis == "/" else doc.descendants(c)):
                    if (test == "*" or doc.tag(n) == test) and n not in seen \
                            and (guard is None or guard.check(run, n)):
                        seen.add(n)
                        nxt.append(n)
            current = nxt
            if not current:
                return current
        if len(current) > 1:
            current.sort(key=doc.order)
        return current


def _exists(run, steps, i: int, node) -> bool:
    axis, test, guard = steps[i]
    doc = run.doc
    last = i + 1 == len(steps)
    for n in (doc.named_children(node, test) if axis == "/"
              else doc.named_descendants(node, test)):
        if (guard is None or guard.check(run, n)) and (last or _exists(run, steps, i + 1, n)):
            return True
    return False
