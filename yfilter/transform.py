"""Evaluating transformation profiles: bindings, projections and element construction.

A :class:`Transform` is a parsed :class:`~yfilter.flwr.Flwr` compiled against an
engine's operator network. Matching is not done here: ``for``/``where`` is registered
in the engine as the filtering path :meth:`Flwr.filter_path`, so it shares the NFA and
the predicate operators with every filter, and :meth:`results` runs only for profiles
the automaton has matched. Then the bindings are that same compiled path's nodes
(navigation over guards whose results the walk has already memoised, see
:mod:`yfilter.navigate`), and each ``return`` projection is navigated from its binding
only. Projections are not put in the automaton: they need nodes, not a yes/no, and only
for matched bindings, so the automaton would make every message pay for the return
paths of every profile, matched or not.

Results are built as lxml trees and serialised as UTF-8 without a declaration.
Copied elements keep their attributes, text, comments and processing instructions;
namespace declarations that nothing in the result uses are dropped.
XQuery raises XQDY0025 when a projection yields one attribute name twice for the same
element (``{$n/p/@id}`` over several ``p``); here the first in document order is kept,
so that a message still produces a result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from lxml import etree

from yfilter import ast
from yfilter.document import TableDoc
from yfilter.flwr import Constructor, Enclosed, Flwr, Projection
from yfilter.navigate import Nav, Session, select
from yfilter.steps import append_text

Intern = Callable[[tuple[ast.Step, ...]], tuple]
Release = Callable[[tuple], None]


class _Proj:
    """A compiled projection."""

    __slots__ = ("kind", "nav", "attr", "steps", "keys")

    def __init__(self, p: Projection, nav: Nav, skip: tuple[str, ...] = ()) -> None:
        """``skip``: the keys of steps already applied to the nodes (see
        :meth:`Transform.results`); the rest run, cached apart from full pipelines."""
        self.kind, self.nav, self.steps = p.kind, nav, p.steps[len(skip):]
        tail = p.path.tail
        self.attr = tail.name if isinstance(tail, ast.AttrTail) else None
        keys, acc = [], [f"done({' => '.join(skip)})"] if skip else []
        for s in self.steps:
            acc.append(s.key)
            keys.append(" => ".join(acc))
        self.keys = tuple(keys)


class _Element:
    __slots__ = ("name", "attrs", "content")

    def __init__(self, name: str, attrs: list, content: list) -> None:
        self.name, self.attrs, self.content = name, attrs, content


class Transform:
    """A transformation profile compiled against an operator network: ``binding_steps``
    are the compiled steps of its filter path (for + where), ``intern`` compiles the
    return clause's paths into the same network (see :meth:`yfilter.Engine.intern_steps`)."""

    def __init__(self, query: Flwr, binding_steps: tuple, intern: Intern) -> None:
        self.query = query
        self.bindings = Nav(binding_steps)
        self._interned: list[tuple] = []
        self._intern = intern
        if isinstance(query.ret, Projection):  # copy $c := $n modify ... return $c
            self.template = None
            self.top = self._enclosed(Enclosed((query.ret,)))[0]
        else:
            self.template = self._compile(query.ret)
            self.top = None
        del self._intern
        self.binding = str(query.path)
        """The for path's text: what :meth:`yfilter.Engine.run`'s ``done`` names."""
        self.keys = tuple(s.key for s in query.ret.steps) if self.top is not None else ()
        """The keys of the steps applied to each binding as a whole (a top-level copy)."""

    def _compile(self, c: Constructor) -> _Element:
        attrs = [(a.name, [self._enclosed(p) if isinstance(p, Enclosed) else p
                           for p in a.parts]) for a in c.attrs]
        content = [self._enclosed(x) if isinstance(x, Enclosed)
                   else self._compile(x) if isinstance(x, Constructor) else x
                   for x in c.content]
        return _Element(c.name, attrs, content)

    def _enclosed(self, e: Enclosed) -> list[_Proj]:
        out = []
        for p in e.items:
            steps = self._intern(p.path.steps) if p.path.steps else ()
            if steps:
                self._interned.append(steps)
            out.append(_Proj(p, Nav(steps)))
        return out

    def release(self, release: Release) -> None:
        """Give back everything the return clause interned."""
        for steps in self._interned:
            release(steps)
        self._interned = []

    # -- evaluation --------------------------------------------------------------------
    def results(self, session: Session, skip: int = 0) -> list[bytes]:
        """One result per binding, in document order. ``skip``: for a top-level copy,
        the bindings already hold the result of its first ``skip`` steps (applied
        upstream), so only the rest are applied."""
        if skip:
            top = _Proj(self.query.ret, self.top.nav, self.keys[:skip])
            return [_serialized(_fragments(session, b, top)[0])
                    for b in select(session, self.bindings)]
        return [self.build(session, b) for b in select(session, self.bindings)]

    def build(self, session: Session, binding) -> bytes:
        if self.top is not None:
            return _serialized(_fragments(session, binding, self.top)[0])
        root = self._element(session, binding, self.template)
        etree.cleanup_namespaces(root)
        return etree.tostring(root, encoding="utf-8")

    def _element(self, session: Session, binding, c: _Element):
        session.ops += 1
        el = etree.Element(c.name)
        for name, parts in c.attrs:
            el.set(name, "".join(p if isinstance(p, str) else _atomized(session, binding, p)
                                 for p in parts))
        doc = session.doc
        for item in c.content:
            if isinstance(item, str):
                append_text(el, item)
            elif isinstance(item, _Element):
                el.append(self._element(session, binding, item))
            else:
                for p in item:
                    session.ops += 1
                    nodes = select(session, p.nav, binding)
                    if p.kind == "attribute":
                        for n in nodes:
                            v = doc.attr(n, p.attr)
                            if v is not None and el.get(p.attr) is None:
                                el.set(p.attr, v)
                    elif p.kind == "text":
                        for t in text_nodes(doc, nodes):
                            append_text(el, t)
                    else:
                        for n in nodes:
                            for frag in _fragments(session, n, p):
                                el.append(frag)
        return el


def _serialized(root) -> bytes:
    etree.cleanup_namespaces(root)
    return etree.tostring(root, encoding="utf-8")


def _atomized(session: Session, binding, projections: list[_Proj]) -> str:
    """An enclosed expression in an attribute value: its values joined by spaces."""
    doc = session.doc
    values: list[str] = []
    for p in projections:
        session.ops += 1
        nodes = select(session, p.nav, binding)
        if p.kind == "text":
            values.extend(text_nodes(doc, nodes))
            continue
        for n in nodes:
            if p.kind == "attribute":
                v = doc.attr(n, p.attr)
                if v is not None:
                    values.append(v)
            else:
                values.append(session.run.string_value(n))
    return " ".join(values)


def _fragments(session: Session, node, p: _Proj) -> list:
    """Copies of ``node`` after the projection's steps. Every prefix of a pipeline is
    kept per message and element, so profiles whose pipelines start alike share it."""
    if not p.steps:
        return [copy_node(session, node)]
    cache = session.frags
    els = None
    for step, key in zip(p.steps, p.keys):
        hit = cache.get((node, key))
        if hit is not None:
            els = hit
            continue
        els = [copy_node(session, node)] if els is None else [copy.deepcopy(e) for e in els]
        session.ops += 1
        els = cache[(node, key)] = step.apply(els, session)
    return [copy.deepcopy(e) for e in els]


def text_nodes(doc, nodes: list) -> list[str]:
    """The text-node children of ``nodes`` (elements in document order) in document
    order: where one element holds another, their text nodes interleave."""
    if len(nodes) < 2:
        return doc.text_nodes(nodes[0]) if nodes else []
    chosen = set(nodes)
    out: list[str] = []
    if isinstance(doc, TableDoc):
        texts, tails, ends = doc.texts, doc.tails, doc.ends

        def visit(n: int) -> None:
            mine = n in chosen
            if mine and texts[n]:
                out.append(texts[n])
            j = n + 1
            while j < ends[n]:
                visit(j)
                if mine and tails[j]:
                    out.append(tails[j])
                j = ends[j]
    else:
        def visit(n) -> None:
            mine = n in chosen
            if mine and n.text is not None:
                out.append(n.text)
            for c in n:
                if isinstance(c.tag, str):
                    visit(c)
                if mine and c.tail is not None:
                    out.append(c.tail)

    top = nodes[0]
    visit(top)
    for n in nodes[1:]:
        if not _inside(doc, n, top):
            top = n
            visit(top)
    return out


def _inside(doc, n, top) -> bool:
    if isinstance(doc, TableDoc):
        return top < n < doc.ends[top]
    p = n.getparent()
    while p is not None:
        if p is top:
            return True
        p = p.getparent()
    return False


def copy_node(session: Session, node):
    """A detached lxml copy of the element ``node``, with its content. A decoded
    Message is rebuilt as an lxml tree once per message (the first time a copy is
    needed), so that a copy carries the same namespace declarations and prefixes
    whether the message came as text or decoded."""
    doc = session.doc
    if isinstance(doc, TableDoc):
        if session.tree is None:
            session.tree = list(doc.msg.to_element().iter(etree.Element))
        node = session.tree[node]
    c = copy.deepcopy(node)
    c.tail = None
    return c
