"""Condition text to disjunctive normal form (thesis section 5.2: "predicates are always
converted to DNF, each conjunct handled separately").

The text is an XPath predicate of the profile language (DESIGN.md section 3), read by
:mod:`yfilter.parser`, so the cache accepts no other syntax than the engine. What the
cache can reason about is a Boolean combination (``and``, ``or``, ``not()``, parentheses)
of constant selections on the element's own attributes, string value and child paths:
``path op literal`` (either side), ``contains(path, 'literal')`` and existence ``path``.
Everything else (``position()`` and ``[n]``, ``starts-with()``, predicates inside a path,
``//`` and ``*`` steps, namespaced names, literals that do not survive being written
back) is refused with :class:`UnsupportedConstructError` naming the construct and its column.

>>> [[lit.text() for lit in conj] for conj in to_dnf("(@K = 'van Gogh' or @K = 'Monet') and @D = 'um 1600'")]
[["@K = 'van Gogh'", "@D = 'um 1600'"], ["@K = 'Monet'", "@D = 'um 1600'"]]
>>> to_dnf("not(@a < 5 or contains(hl1, 'x'))")[0][1].atom.column
Column(path='hl1', kind='first')
>>> to_dnf("@a = 1 and position() = 2")
Traceback (most recent call last):
...
cache.errors.UnsupportedConstructError: the cache cannot reason about position() at column 12
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from yfilter import ast
from yfilter.errors import ProfileError
from yfilter.parser import parse
from yfilter.values import FLIPPED, number

from cache import defaults
from cache.atoms import CONTAINS, EXISTS, FIRST, MULTI, ONE, SINGLE, Atom, Column, Lit
from cache.errors import ConditionSyntaxError, ConditionTooComplexError, UnsupportedConstructError

_WRAP = "/_["
"""The condition is parsed as the predicate of a one-step profile; columns shift by this."""

_CONSTRUCTS = {
    "position()": r"\bposition\s*\(",
    "starts-with()": r"\bstarts-with\s*\(",
    "a predicate inside a path": r"\[",
    "the descendant axis '//'": r"//",
    "the wildcard '*'": r"\*",
    "a namespaced name": r"\b[A-Za-z_][\w.\-]*:[A-Za-z_]",
    "contains() of a literal": r"\bcontains\s*\(\s*['\"]",
    "contains() with a path as its second argument": r"\bcontains\s*\([^,]*,\s*[^'\"\s]",
}
"""Where each refused construct starts: the first match outside string literals."""


def to_dnf(text: str) -> list[list[Lit]]:
    """The condition as a list of conjunctions of literals (not yet simplified)."""
    if not isinstance(text, str):
        raise ConditionSyntaxError(f"a condition is text, not {type(text).__name__}", None)
    if not text.strip():
        raise ConditionSyntaxError("empty condition (write '.' for every element)", 1)
    try:
        path = parse(f"{_WRAP}{text}]")
    except ProfileError as exc:
        message = str(exc).rsplit(" at column ", 1)[0]
        column = None if exc.column is None else min(max(exc.column - len(_WRAP), 1), len(text) + 1)
        raise ConditionSyntaxError(message, column) from None
    if len(path.steps) != 1 or len(path.steps[0].preds) != 1 or path.tail is not None:
        raise ConditionSyntaxError("unexpected ']' (the condition is one predicate)", _where(text, r"\]"))
    return _dnf(path.steps[0].preds[0], True, text)


def _where(text: str, pattern: str) -> int | None:
    masked = re.sub(r"'[^']*'|\"[^\"]*\"", lambda m: m.group()[0] + " " * (len(m.group()) - 2) + m.group()[0], text)
    m = re.search(pattern, masked)
    return None if m is None else m.start() + 1


def _refuse(text: str, construct: str, why: str = "") -> UnsupportedConstructError:
    return UnsupportedConstructError(construct, _where(text, _CONSTRUCTS[construct]) if construct in _CONSTRUCTS
                                     else None, why)


def _dnf(node, positive: bool, text: str) -> list[list[Lit]]:
    if isinstance(node, (ast.Or, ast.And)):
        union = isinstance(node, ast.Or) == positive
        parts = [_dnf(item, positive, text) for item in node.items]
        if union:
            out = [conj for part in parts for conj in part]
            _check_size(len(out))
            return out
        out = [[]]
        for part in parts:
            _check_size(len(out) * len(part))
            out = [a + b for a in out for b in part]
        return out
    if isinstance(node, ast.Not):
        return _dnf(node.item, not positive, text)
    atom = _atom(node, text)
    if atom is True:
        return [[]] if positive else []
    return [[Lit(atom, positive)]]


def _check_size(n: int) -> None:
    if n > defaults.MAX_CONJUNCTS:
        raise ConditionTooComplexError(n, defaults.MAX_CONJUNCTS)


def _atom(node, text: str) -> Atom | bool:
    """The atom of one condition (``True``: a condition every element meets)."""
    if isinstance(node, ast.Number):
        raise UnsupportedConstructError("a position [n]", len(text) - len(text.lstrip()) + 1)
    if isinstance(node, ast.RelPath):
        col = _column(node, text)
        return True if col.kind == ONE else Atom(col, EXISTS, None, "")
    if isinstance(node, ast.Call):
        if node.name != "contains":
            raise _refuse(text, f"{node.name}()")
        subject, needle = node.args
        if not isinstance(subject, ast.RelPath):
            raise _refuse(text, "contains() of a literal")
        if not isinstance(needle, ast.Literal):
            raise _refuse(text, "contains() with a path as its second argument")
        col = _column(subject, text)
        if col.kind == MULTI:
            col = Column(col.path, FIRST)      # contains() reads the string of the first node only
        # contains(x, '') holds for every x, an absent one too.
        return True if needle.value == "" else Atom(col, CONTAINS, needle.value, ast.quote(needle.value))
    if isinstance(node, ast.Compare):
        op, left, right = node.op, node.left, node.right
        if not isinstance(left, ast.RelPath):
            op, left, right = FLIPPED[op], right, left
        if isinstance(left, ast.Position) or isinstance(right, ast.Position):
            raise _refuse(text, "position()")
        col = _column(left, text)
        if isinstance(right, ast.Literal):
            if op in ("=", "!="):
                return Atom(col, op, right.value, ast.quote(right.value))
            # XPath compares <, <=, >, >= on numbers, a string literal too (NaN if it is none).
            return Atom(col, op, number(right.value), ast.quote(right.value))
        return Atom(col, op, right.value, _number_text(right.value, text))
    raise UnsupportedConstructError(type(node).__name__, None)


def _column(path: ast.RelPath, text: str) -> Column:
    for step in path.steps:
        if step.preds:
            raise _refuse(text, "a predicate inside a path")
        if step.axis != ast.CHILD:
            raise _refuse(text, "the descendant axis '//'")
        if step.test == "*":
            raise _refuse(text, "the wildcard '*'")
        if step.test.startswith("{"):
            raise _refuse(text, "a namespaced name")
    if isinstance(path.tail, ast.AttrTail) and path.tail.name.startswith("{"):
        raise _refuse(text, "a namespaced name")
    written = str(path)
    if not path.steps:
        if path.tail is None:
            return Column(written, ONE)
        if isinstance(path.tail, ast.AttrTail):
            return Column(written, SINGLE)
    return Column(written, MULTI)


def _number_text(value: float, text: str) -> str:
    """Text for a number literal that XPath reads back as the same double."""
    if math.isfinite(value):
        for candidate in (ast.number_text(value), format(Decimal(repr(value)), "f")):
            if number(candidate.lstrip("-")) == abs(value):
                return candidate
    raise UnsupportedConstructError(f"the number {value!r}", None, " (it does not survive being written back)")
