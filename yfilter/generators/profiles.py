"""Seeded profile generator in the spirit of the YFilter XPath generator.

Parameters: ``depth`` (steps per path), ``p_star`` (probability a name test is
``*``), ``p_desc`` (probability a step is ``//``, which may skip levels),
``n_preds`` (value predicates per profile: an int or an inclusive ``(lo, hi)``),
``n_nested`` (nested paths per profile), ``nested_values`` (probability that a
nested path ends in a value comparison, ``[head/pubdata/@edition.area = 'SF']``,
rather than testing existence), ``skew`` (Zipf exponent of the choice
among an element's children; 0 is uniform), ``distinct`` (never repeat a profile).
``rich`` is the probability that a predicate uses the rest of the language
(comparisons of every kind, ``text()``, ``.``, functions, positions, ``and``,
``or``, ``not``) instead of a plain attribute equality; the differential tests
turn it up.

>>> from yfilter.generators.schema import Schema
>>> g = ProfileGenerator(Schema.nitf(), depth=4, n_preds=1, seed=3)
>>> p = g.generate(); p.startswith("/") and "[" in p
True
"""

from __future__ import annotations

import random

from yfilter.ast import quote
from yfilter.generators.schema import Schema
from yfilter.values import number

_NUMERIC_OPS = ["<", "<=", ">", ">=", "=", "!="]


class ProfileGenerator:
    """Generates profile texts over a :class:`Schema`."""

    def __init__(self, schema: Schema, *, depth: int = 6, p_star: float = 0.2,
                 p_desc: float = 0.2, n_preds: int | tuple[int, int] = 0, n_nested: int = 0,
                 nested_values: float = 0.5, skew: float = 0.0, distinct: bool = True,
                 rich: float = 0.0, seed: int = 0) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.schema = schema
        self.depth, self.p_star, self.p_desc = depth, p_star, p_desc
        self.n_preds = (n_preds, n_preds) if isinstance(n_preds, int) else tuple(n_preds)
        self.n_nested, self.skew, self.distinct, self.rich = n_nested, skew, distinct, rich
        self.nested_values = nested_values
        self.rnd = random.Random(seed)
        self._seen: set[str] = set()

    def generate(self) -> str:
        """One profile (a new one when ``distinct``; after 1000 tries it gives up
        with ``RuntimeError``: the schema and parameters allow too few)."""
        for _ in range(1000):
            p = self._profile()
            if not self.distinct or p not in self._seen:
                self._seen.add(p)
                return p
        raise RuntimeError("cannot generate another distinct profile with these parameters")

    def batch(self, n: int) -> list[str]:
        return [self.generate() for _ in range(n)]

    # -- choices ---------------------------------------------------------------
    def _pick(self, items: list):
        if self.skew <= 0 or len(items) == 1:
            return self.rnd.choice(items)
        weights = [1.0 / (i + 1) ** self.skew for i in range(len(items))]
        return self.rnd.choices(items, weights)[0]

    def _children(self, name: str) -> list[str]:
        return [c.name for c in self.schema.elements[name].children]

    def _descend(self, name: str | None) -> str | None:
        """An element a ``//`` step can reach from ``name`` (None: the document)."""
        rnd = self.rnd
        cur = self.schema.root if name is None else None
        if cur is None:
            kids = self._children(name)
            if not kids:
                return None
            cur = self._pick(kids)
        for _ in range(rnd.randint(0, 3)):
            kids = self._children(cur)
            if not kids:
                break
            cur = self._pick(kids)
        return cur

    # -- building ----------------------------------------------------------------
    def _path(self, start: str | None, length: int) -> list[list]:
        """Steps ``[axis, element, shown name, predicates]`` from ``start``."""
        steps: list[list] = []
        cur = start
        for _ in range(length):
            if self.rnd.random() < self.p_desc:
                axis, el = "//", self._descend(cur)
            else:
                kids = [self.schema.root] if cur is None else self._children(cur)
                axis, el = "/", (self._pick(kids) if kids else None)
            if el is None:
                break
            shown = "*" if self.rnd.random() < self.p_star else self.schema.qname(el)
            steps.append([axis, el, shown, []])
            cur = el
        return steps

    def _profile(self) -> str:
        rnd = self.rnd
        steps = self._path(None, self.depth)
        valued = [s for s in steps if self.schema.elements[s[1]].attrs
                  or self.schema.elements[s[1]].text] or steps
        for _ in range(rnd.randint(*self.n_preds)):
            st = rnd.choice(valued)  # a value predicate goes where there are values
            st[3].append(self._value_pred(st[1]))
        for _ in range(self.n_nested):
            candidates = [s for s in steps if self._children(s[1])]
            if candidates:
                st = rnd.choice(candidates)
                st[3].append(self._nested(st[1]))
        if self.rich and rnd.random() < self.rich / 2:
            st = rnd.choice(steps)
            st[3].append(self._rich_pred(st[1]))
        tail = ""
        if self.rich and rnd.random() < self.rich / 4:
            spec = self.schema.elements[steps[-1][1]]
            if spec.attrs and rnd.random() < 0.6:
                tail = "/@" + self.schema.qname(rnd.choice(list(spec.attrs)))
            else:
                tail = "/text()"
        return self._render(steps, absolute=True) + tail

    def _render(self, steps: list[list], absolute: bool) -> str:
        out = []
        for i, (axis, _, shown, preds) in enumerate(steps):
            if i == 0 and not absolute:
                axis = ".//" if axis == "//" else ""
            out.append(axis + shown + "".join(f"[{p}]" for p in preds))
        return "".join(out)

    def _literal(self, values: list[str]) -> str | None:
        v = self.rnd.choice(values)
        if "'" in v and '"' in v:
            return None
        return quote(v)

    def _attr_eq(self, el: str) -> str | None:
        spec = self.schema.elements[el]
        if not spec.attrs:
            return None
        a = self._pick(list(spec.attrs))
        lit = self._literal(spec.attrs[a])
        return None if lit is None else f"@{self.schema.qname(a)} = {lit}"

    def _value_pred(self, el: str) -> str:
        if self.rich and self.rnd.random() < self.rich:
            return self._rich_pred(el)
        p = self._attr_eq(el)
        if p is None:
            spec = self.schema.elements[el]
            if spec.text:
                lit = self._literal(spec.text)
                if lit is not None:
                    return f"text() = {lit}"
            kids = self._children(el)
            return self.schema.qname(kids[0]) if kids else "."
        return p

    def _nested(self, el: str) -> str:
        rnd = self.rnd
        rel = self._path(el, rnd.randint(1, 2))
        if not rel:
            return "."
        last = rel[-1][1]
        if rnd.random() < self.nested_values:
            spec = self.schema.elements[last]
            p = self._attr_eq(last)
            if p is not None and (not spec.text or rnd.random() < 0.7):
                if rnd.random() < 0.5:
                    return self._render(rel, absolute=False) + "/" + p
                rel[-1][3].append(p)
            elif spec.text:
                lit = self._literal(spec.text)
                if lit is not None:
                    return f"{self._render(rel, absolute=False)} = {lit}"
        return self._render(rel, absolute=False)

    def _rich_pred(self, el: str, depth: int = 0) -> str:
        rnd = self.rnd
        spec = self.schema.elements[el]
        q = self.schema.qname
        kind = rnd.randrange(12 if depth < 2 else 9)
        if kind == 0 and spec.attrs:
            a = rnd.choice(list(spec.attrs))
            v = rnd.choice(spec.attrs[a])
            op = rnd.choice(_NUMERIC_OPS)
            n = number(v)
            lit = (v.strip() if n == n and rnd.random() < 0.7 else self._literal([v]))
            if lit is None:
                return "."
            return f"{lit} {op} @{q(a)}" if rnd.random() < 0.2 else f"@{q(a)} {op} {lit}"
        if kind == 1 and spec.attrs:
            return f"@{q(rnd.choice(list(spec.attrs)))}"
        if kind == 2:
            if spec.text:
                lit = self._literal(spec.text + ["x"])
                part = self._literal([v[:2] for v in spec.text])
                if lit is not None and part is not None:
                    return rnd.choice([f"text() = {lit}", f"text() != {lit}", f". = {lit}",
                                       f"contains(., {part})", f"starts-with(text(), {part})"])
            return "text()"
        if kind == 3:  # a bare number is positional only as a whole predicate
            return str(rnd.randint(1, 3)) if depth == 0 else f"position() = {rnd.randint(1, 3)}"
        if kind == 4:
            return f"position() {rnd.choice(_NUMERIC_OPS)} {rnd.randint(1, 3)}"
        if kind == 5 and spec.attrs:
            a = rnd.choice(list(spec.attrs))
            lit = self._literal([v[:2] for v in spec.attrs[a]])
            if lit is not None:
                fn = rnd.choice(["contains", "starts-with"])
                return f"{fn}(@{q(a)}, {lit})"
        if kind == 6 and self._children(el):
            return self._nested(el)
        if kind == 7 and self._children(el):
            kid = rnd.choice(self._children(el))
            kspec = self.schema.elements[kid]
            if kspec.attrs:
                a = rnd.choice(list(kspec.attrs))
                lit = self._literal(kspec.attrs[a])
                if lit is not None:
                    return rnd.choice([f"{q(kid)}[{rnd.randint(1, 2)}]/@{q(a)} = {lit}",
                                       f"contains({q(kid)}/@{q(a)}, {lit})",
                                       f".//{q(kid)}/@{q(a)} != {lit}"])
            return f"{q(kid)}[{rnd.randint(1, 2)}]"
        if kind == 8:
            return "."
        if kind == 9:
            return f"not({self._rich_pred(el, depth + 1)})"
        if kind == 10:
            return f"{self._rich_pred(el, depth + 1)} or {self._rich_pred(el, depth + 1)}"
        if kind == 11:
            return f"({self._rich_pred(el, depth + 1)} or {self._rich_pred(el, depth + 1)})" \
                   f" and {self._rich_pred(el, depth + 1)}"
        return self._value_pred(el) if depth == 0 else "."
