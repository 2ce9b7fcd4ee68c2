"""The equality predicates of a profile that every match must satisfy, read from
the engine's parsed profile (:mod:`yfilter.parser`, :mod:`yfilter.ast`).

An exclusiveness pattern (ONYX section 4.4) is a *structure* and a *target*: the
absolute path skeleton of the element a predicate tests (steps with their axes and
name tests, predicates stripped, the step's context included) and what is compared
on it: ``@attr``, ``text()`` or ``.`` (the element's string value). Profiles that
compare the same pattern with ``=`` to different values can never both match a
message in which the pattern occurs at most once.

Only *required* equalities count: those on the steps of the profile's path and
inside ``and``; ones under ``or`` or ``not`` do not constrain every match, so a
profile is never placed by a value it does not need.

The engine shares one NFA accepting state among profiles with the same absolute
linear path skeleton; :class:`Pattern` uses exactly that skeleton (the profile's
canonical text without predicates), read from the parser's AST rather than from
the automaton, so the partitioner stays independent of how the engine is built.

Values are canonical: a literal that reads as an XPath number is the number (XPath
compares ``@v = 5`` and ``@v = '5.0'`` numerically or as strings, and both hold
for the message value ``5.0``, so they must land in the same bucket).

>>> [str(e) for e in equalities("/nitf[head/pubdata/@edition.area = 'SF']//p[@n = '3' or @x]")]
["/nitf/head/pubdata/@edition.area = 'SF'"]
>>> equalities("/m[e1/@v = 7][e2 = 'x']")[0].value
7.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple, Union

from yfilter import ast
from yfilter.parser import parse
from yfilter.values import number

Value = Union[str, float]


class Pattern(NamedTuple):
    """A structure (absolute path skeleton) and a target (``@a``, ``text()`` or ``.``)."""

    path: str
    target: str

    def __str__(self) -> str:
        return self.path if self.target == "." else f"{self.path}/{self.target}"


class Equality(NamedTuple):
    """``pattern = value`` required by a profile."""

    pattern: Pattern
    value: Value

    def __str__(self) -> str:
        shown = ast.number_text(self.value) if isinstance(self.value, float) else ast.quote(self.value)
        return f"{self.pattern} = {shown}"


def canonical(value: str | float) -> Value:
    """A literal as a bucket key: its XPath number when it has one, else the string.

    >>> canonical("5.0"), canonical(" 5"), canonical("SF")
    (5.0, 5.0, 'SF')
    """
    if isinstance(value, float):
        return value
    n = number(value)
    return value if math.isnan(n) else n


def equalities(profile: str | ast.Path, namespaces: Mapping[str, str] | None = None) -> tuple[Equality, ...]:
    """The required equality predicates of a filtering profile, in order, without
    repeats; raises :class:`yfilter.ProfileError` for a profile the engine rejects."""
    path = parse(profile, namespaces) if isinstance(profile, str) else profile
    found: dict[Equality, None] = {}
    skeleton = ""
    for step in path.steps:
        skeleton += step.axis + step.test
        for pred in step.preds:
            _collect(pred, skeleton, found)
    return tuple(found)


def _relative(context: str, rel: ast.RelPath) -> str:
    return context + "".join(s.axis + s.test for s in rel.steps)


def _target(rel: ast.RelPath) -> str:
    if isinstance(rel.tail, ast.AttrTail):
        return "@" + rel.tail.name
    return "text()" if isinstance(rel.tail, ast.TextTail) else "."


def _collect(expr: ast.Expr, context: str, found: dict[Equality, None]) -> None:
    if isinstance(expr, ast.And):
        for item in expr.items:
            _collect(item, context, found)
    elif isinstance(expr, ast.RelPath):
        _nested(expr, context, found)
    elif isinstance(expr, ast.Compare):
        for side in (expr.left, expr.right):
            if isinstance(side, ast.RelPath):
                _nested(side, context, found)
        path, lit = expr.left, expr.right
        if isinstance(path, (ast.Literal, ast.Number)):
            path, lit = lit, path
        if expr.op == "=" and isinstance(path, ast.RelPath) and isinstance(lit, (ast.Literal, ast.Number)):
            pattern = Pattern(_relative(context, path), _target(path))
            found[Equality(pattern, canonical(lit.value))] = None
    # Or, Not, function calls and positions constrain no single value every match needs.


def _nested(rel: ast.RelPath, context: str, found: dict[Equality, None]) -> None:
    """Predicates on the steps of a nested path are required too: the path must
    reach a node that satisfies them."""
    for step in rel.steps:
        context += step.axis + step.test
        for pred in step.preds:
            _collect(pred, context, found)
