"""Seeded generator of transformation profiles (``for``/``where``/``return``).

Each profile comes as a :class:`FlwrSpec`: the same query clause by clause in XPath
(what an lxml reference evaluates: the for path, the where condition relative to the
binding, each projection's path relative to the binding, the steps with their raw
arguments, the literal text as it reads) and rendered as profile text (:meth:`text`,
with ``$var`` paths, XQuery string literals, escapes and formatting whitespace).
Paths, predicates and values come from a :class:`Schema` through
:class:`ProfileGenerator`'s machinery.

>>> from yfilter.generators.schema import Schema
>>> g = FlwrGenerator(Schema.nitf(), seed=2)
>>> s = g.spec()
>>> s.text().startswith("for $"), " return " in " ".join(s.text().split())
(True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

from yfilter.generators.profiles import ProfileGenerator
from yfilter.generators.schema import Schema

_VARS = ["$n", "$s", "$story", "$x"]
_NAMES = ["r", "result", "item", "story", "out", "part"]
_ATTR_NAMES = ["id", "kind", "src", "n"]
_WORDS = ["News", "about", "Tide", "x", "le café", "A-1", "q.e.d"]
_STR = re.compile(r"'[^']*'|\"[^\"]*\"")


@dataclass
class Text:
    """Literal text of a constructor: ``written`` as in the profile, ``value`` what it
    stands for; ``boundary`` when it is only literal whitespace (XQuery drops it)."""

    written: str
    value: str
    boundary: bool


@dataclass
class Proj:
    """A projection: ``path`` relative to the binding in XPath (``.`` is the binding),
    ``kind`` 'element' | 'attribute' | 'text', ``steps`` as (name, raw arguments)."""

    path: str
    kind: str
    steps: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass
class Elem:
    name: str
    attrs: list[tuple[str, list[Union[Text, list[Proj]]]]]
    content: list[Union[Text, "Elem", list[Proj]]]


@dataclass
class FlwrSpec:
    """A transformation profile clause by clause (see the module docstring)."""

    var: str
    for_path: str  # absolute XPath
    where: tuple | None  # ('atom', template, rel) | ('and'|'or', [c, ...]) | ('not', [c])
    ret: Elem
    layout: int = 0  # which whitespace layout text() uses

    def where_xpath(self) -> str | None:
        return None if self.where is None else _cond(self.where, lambda rel: rel, False)

    def text(self) -> str:
        """The profile as a subscriber would write it."""
        v = self.var
        parts = [f"for {v} in $msg{xq(self.for_path)}"]
        if self.where is not None:
            parts.append("where " + _cond(self.where, lambda rel: var_path(v, rel), True))
        parts.append("return " + _render(self.ret, v))
        return ("\n" if self.layout else " ").join(parts)


def var_path(var: str, rel: str) -> str:
    """An XPath path relative to the binding, written from the variable."""
    if rel == ".":
        return var
    if rel.startswith(".//"):
        return var + rel[1:]
    return f"{var}/{rel}"


def xq(xpath: str) -> str:
    """XPath text with its string literals written as XQuery literals (``&`` escaped)."""
    return _STR.sub(lambda m: m.group().replace("&", "&amp;"), xpath)


def xq_string(value: str) -> str:
    return '"' + value.replace("&", "&amp;").replace('"', '""') + '"'


def _cond(c: tuple, path, escape: bool) -> str:
    kind = c[0]
    if kind == "atom":
        _, template, rel = c
        text = template.format(p=path(rel))
        return xq(text) if escape else text
    if kind == "not":
        return f"not({_cond(c[1][0], path, escape)})"
    return f" {kind} ".join(f"({_cond(x, path, escape)})" for x in c[1])


def _render_proj(p: Proj, var: str) -> str:
    out = xq(var_path(var, p.path))
    for name, args in p.steps:
        out += f" => {name}({', '.join(xq_string(a) for a in args)})"
    return out


def _render(e: Elem, var: str) -> str:
    attrs = "".join(
        f' {name}="' + "".join(x.written if isinstance(x, Text)
                               else "{" + ", ".join(_render_proj(p, var) for p in x) + "}"
                               for x in parts) + '"'
        for name, parts in e.attrs)
    if not e.content:
        return f"<{e.name}{attrs}/>"
    body = "".join(x.written if isinstance(x, Text) else _render(x, var) if isinstance(x, Elem)
                   else "{" + ", ".join(_render_proj(p, var) for p in x) + "}"
                   for x in e.content)
    return f"<{e.name}{attrs}>{body}</{e.name}>"


class FlwrGenerator(ProfileGenerator):
    """Transformation profiles over ``schema``: for paths as :class:`ProfileGenerator`
    builds them (``depth``, ``p_star``, ``p_desc``, ``n_preds``, ``rich``), a where
    clause with probability ``p_where`` (up to three conditions), return constructors
    with up to ``max_content`` items per element and transformation steps on a
    projection with probability ``p_steps``."""

    def __init__(self, schema: Schema, *, depth: int = 4, p_star: float = 0.15,
                 p_desc: float = 0.3, n_preds: int | tuple[int, int] = (0, 1),
                 rich: float = 0.6, p_where: float = 0.8, p_steps: float = 0.3,
                 max_content: int = 4, seed: int = 0) -> None:
        super().__init__(schema, depth=depth, p_star=p_star, p_desc=p_desc, n_preds=n_preds,
                         rich=rich, distinct=False, seed=seed)
        self.p_where, self.p_steps, self.max_content = p_where, p_steps, max_content

    def specs(self, n: int) -> list[FlwrSpec]:
        return [self.spec() for _ in range(n)]

    def spec(self) -> FlwrSpec:
        rnd = self.rnd
        steps = self._path(None, rnd.randint(1, self.depth))
        for _ in range(rnd.randint(*self.n_preds)):
            st = rnd.choice(steps)
            st[3].append(self._value_pred(st[1]))
        el = steps[-1][1]
        where = self._condition(el, 0) if rnd.random() < self.p_where else None
        return FlwrSpec(rnd.choice(_VARS), self._render(steps, absolute=True), where,
                        self._element(el, 0), layout=rnd.randrange(2))

    # -- where ----------------------------------------------------------------------
    def _condition(self, el: str, depth: int) -> tuple:
        r = self.rnd.random()
        if depth < 2 and r < 0.15:
            return ("not", [self._condition(el, depth + 1)])
        if depth < 2 and r < 0.4:
            return (self.rnd.choice(["and", "or"]),
                    [self._condition(el, depth + 1) for _ in range(2)])
        return ("atom", *self._atom(el))

    def _atom(self, el: str) -> tuple[str, str]:
        """(template with ``{p}`` for the path, path relative to the binding)."""
        rnd = self.rnd
        spec = self.schema.elements[el]
        q = self.schema.qname
        kind = rnd.randrange(6)
        if kind == 0 and spec.attrs:
            a = rnd.choice(list(spec.attrs))
            lit = self._literal(spec.attrs[a])
            if lit is not None:
                op = rnd.choice(["=", "=", "!=", "<", ">="])
                return f"{{p}} {op} {lit}", f"@{q(a)}"
        if kind == 1 and spec.attrs:
            return "{p}", f"@{q(rnd.choice(list(spec.attrs)))}"
        if kind == 2 and spec.text:
            lit = self._literal(spec.text + ["x"])
            part = self._literal([v[:2] for v in spec.text])
            if lit is not None and part is not None:
                return rnd.choice([(f"{{p}} = {lit}", "text()"), (f"{{p}} = {lit}", "."),
                                   (f"contains({{p}}, {part})", "."),
                                   (f"starts-with({{p}}, {part})", "text()")])
        if kind in (3, 4) and self._children(el):
            rel = self._path(el, rnd.randint(1, 2))
            if rel and rnd.random() < 0.4:
                st = rnd.choice(rel)
                st[3].append(self._rich_pred(st[1]))
            if rel:
                text = self._render(rel, absolute=False)
                last = self.schema.elements[rel[-1][1]]
                if kind == 4 and last.attrs:
                    a = rnd.choice(list(last.attrs))
                    lit = self._literal(last.attrs[a])
                    if lit is not None:
                        return f"{{p}} = {lit}", f"{text}/@{q(a)}"
                if kind == 4 and last.text:
                    lit = self._literal(last.text)
                    if lit is not None:
                        return f"{{p}} = {lit}", text
                return "{p}", text
        if kind == 5 and spec.attrs:
            a = rnd.choice(list(spec.attrs))
            part = self._literal([v[:2] for v in spec.attrs[a]])
            if part is not None:
                return f"starts-with({{p}}, {part})", f"@{q(a)}"
        return "{p}", "."

    # -- return ---------------------------------------------------------------------
    def _element(self, el: str, depth: int) -> Elem:
        rnd = self.rnd
        names = rnd.sample(_ATTR_NAMES, rnd.randint(0, 2))
        attrs = [(n, self._attr_value(el)) for n in names]
        content: list = []
        spec = self.schema.elements[el]
        if spec.attrs and rnd.random() < 0.3:  # attribute projections come first
            a = rnd.choice(list(spec.attrs))
            if a not in names:
                content.append([Proj(f"@{self.schema.qname(a)}", "attribute")])
        for _ in range(rnd.randint(1, self.max_content)):
            r = rnd.random()
            if r < 0.3:
                item = self._text()
            elif r < 0.45 and depth < 2:
                item = self._element(el, depth + 1)
            else:
                item = [self._projection(el) for _ in range(rnd.choice([1, 1, 2]))]
            if isinstance(item, Text) and content and isinstance(content[-1], Text):
                prev = content[-1]
                content[-1] = Text(prev.written + item.written, prev.value + item.value,
                                   prev.boundary and item.boundary)
            else:
                content.append(item)
        return Elem(rnd.choice(_NAMES), attrs, content)

    def _attr_value(self, el: str) -> list:
        rnd = self.rnd
        parts: list = []
        for _ in range(rnd.randint(1, 3)):
            if rnd.random() < 0.3:
                parts.append([self._projection(el, atomic=True)])
            else:
                written, value = rnd.choice([
                    (w, w) for w in _WORDS] + [('""', '"'), ("'", "'"), ("\t", " "),
                                               ("&#9;", "\t"), ("&amp;", "&"), ("{{", "{"),
                                               (" ", " ")])
                if parts and isinstance(parts[-1], Text):
                    last = parts[-1]
                    parts[-1] = Text(last.written + written, last.value + value, False)
                else:
                    parts.append(Text(written, value, False))
        return parts

    def _text(self) -> Text:
        rnd = self.rnd
        pieces = [rnd.choice([(w, w, False) for w in _WORDS] + [
            ("\n  ", "\n  ", True), (" ", " ", True), ("&amp;", "&", False),
            ("&lt;", "<", False), ("{{", "{", False), ("}}", "}", False), (">", ">", False),
            ("&#233;", "\u00e9", False), ("&#x20;", " ", False)])
            for _ in range(rnd.randint(1, 3))]
        return Text("".join(p[0] for p in pieces), "".join(p[1] for p in pieces),
                    all(p[2] for p in pieces))

    def _projection(self, el: str, atomic: bool = False) -> Proj:
        rnd = self.rnd
        q = self.schema.qname
        rel = self._path(el, rnd.randint(1, 2)) if rnd.random() < 0.85 else []
        if rel and rnd.random() < 0.3:
            st = rnd.choice(rel)
            st[3].append(self._rich_pred(st[1]) if rnd.random() < 0.5
                         else str(rnd.randint(1, 2)))
        path = self._render(rel, absolute=False) if rel else "."
        last = self.schema.elements[rel[-1][1] if rel else el]
        r = rnd.random()
        if r < 0.2 and last.attrs and atomic:
            return Proj(("" if path == "." else path + "/") + f"@{q(rnd.choice(list(last.attrs)))}",
                        "attribute")
        if r < 0.4 and last.text:
            return Proj("text()" if path == "." else path + "/text()", "text")
        proj = Proj(path, "element")
        if not atomic and rnd.random() < self.p_steps:
            proj.steps = [self._step(rel[-1][1] if rel else el)
                          for _ in range(rnd.randint(1, 2))]
        return proj

    def _step(self, el: str) -> tuple[str, list[str]]:
        rnd = self.rnd
        q = self.schema.qname
        below = self._below(el)
        kind = rnd.randrange(4)
        if kind == 0 or not below:
            names = rnd.sample(below, min(len(below), rnd.randint(0, 2))) if below else []
            return "drop", [q(n) for n in names] + (["comment()"] if not names or
                                                     rnd.random() < 0.3 else [])
        if kind == 1:
            return "rename", [q(rnd.choice(below)), rnd.choice(["renamed", "item", "x"])]
        if kind == 2:
            return "table_to_list", []
        paths = []
        for _ in range(rnd.randint(1, 2)):
            rel = self._path(el, rnd.randint(1, 2))
            paths.append(self._render(rel, absolute=False) if rel else ".")
        return "project", paths

    def _below(self, el: str) -> list[str]:
        """Element names that can occur below ``el`` (children and grandchildren)."""
        kids = self._children(el)
        return sorted({*kids, *(g for k in kids for g in self._children(k))})
