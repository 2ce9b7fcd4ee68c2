"""The algebra of routing atoms: what an atom implies and how it can be made weaker.

An *atom* (see :mod:`routing.dnf`) is an absolute linear path whose steps carry only
*local* predicates — tests of the step's own element (``[@a = 'v']``, ``[. > 3]``,
``[contains(text(), 'x')]``), never positions or nested paths. That makes every
weakening below sound: the weakened atom matches every message the atom matches.

* :func:`skeleton` drops every predicate, :func:`strip_steps` those of one step
  (generalization (b) of issue 6);
* :func:`shorten` keeps the first and last step and joins them with ``//``
  (``/a/b/c/d`` -> ``/a//d``; a two-step path becomes ``//last``), generalization (d);
* :class:`PredSummary` merges the predicates that several atoms put on the same
  step and operand into one value set, one numeric range or a plain existence
  test, generalization (c);
* :func:`closure` lists the atoms an atom implies (its prefixes, with and without
  predicates), from which :func:`common` keeps the atoms shared by every
  conjunction of a link, generalization (a).

Atoms are strings with Clark names (``{uri}local``); :func:`parse_atom` splits
them into steps (cached), :func:`parse_predicate` parses a predicate when a merge
needs its structure.

>>> skeleton("/nitf/head/pubdata[@edition.area = 'SF']")
'/nitf/head/pubdata'
>>> strip_steps("/nitf[@v = '1']/head[title]")
('/nitf/head[title]', "/nitf[@v = '1']/head")
>>> shorten("/nitf/body/body.head/hedline[@x = '1']"), shorten("/nitf/head")
("/nitf//hedline[@x = '1']", '//head')
>>> sorted(closure("/a[@x = '1']/b"))
['/a', '/a/b', "/a[@x = '1']", "/a[@x = '1']/b"]
>>> sorted(common([{"/a/b/c", "/a/d"}, {"/a/b[@k = 1]"}]))
['/a/b']
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, NamedTuple

from yfilter import ast
from yfilter.parser import parse

from routing.dnf import engine_text

_CACHED = 1 << 20
"""Atoms whose parse and rewrites are remembered (a 100-broker simulation with 100,000
profiles holds about half a million distinct atoms, and plans ask about each one
many times)."""


class Step(NamedTuple):
    """One step of an atom: axis (``/`` or ``//``), name test (Clark name or ``*``)
    and predicate texts."""

    axis: str
    test: str
    preds: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.axis + self.test + "".join(f"[{p}]" for p in self.preds)


@lru_cache(maxsize=_CACHED)
def parse_atom(atom: str) -> tuple[Step, ...]:
    """The steps of an atom (an absolute path of steps with predicates, no tail).

    >>> parse_atom("/{http://x/a[1]}a[@b = ']']//*")
    (Step(axis='/', test='{http://x/a[1]}a', preds=("@b = ']'",)), Step(axis='//', test='*', preds=()))
    """
    steps, i, n = [], 0, len(atom)
    while i < n:
        if atom.startswith("//", i):
            axis, i = "//", i + 2
        elif atom[i] == "/":
            axis, i = "/", i + 1
        else:
            raise ValueError(f"not a routing atom (expected '/' at {i + 1}): {atom!r}")
        j = i
        while j < n and atom[j] not in "/[":
            j = atom.index("}", j) + 1 if atom[j] == "{" else j + 1
        test, i, preds = atom[i:j], j, []
        while i < n and atom[i] == "[":
            j = _close(atom, i)
            preds.append(atom[i + 1:j])
            i = j + 1
        if not test:
            raise ValueError(f"not a routing atom (empty step at {i + 1}): {atom!r}")
        steps.append(Step(axis, test, tuple(preds)))
    if not steps:
        raise ValueError("an empty routing atom")
    return tuple(steps)


def _close(text: str, i: int) -> int:
    """Index of the ``]`` closing the ``[`` at ``i`` (quotes and ``{uri}`` skipped)."""
    depth, quote = 0, None
    while True:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            i = text.index("}", i)
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if not depth:
                return i
        i += 1


@lru_cache(maxsize=1 << 16)
def parse_predicate(pred: str) -> ast.Expr:
    """A predicate text of an atom as a :mod:`yfilter.ast` expression."""
    prefixes: dict[str, str] = {}
    text = engine_text(f"/x[{pred}]", prefixes)
    return parse(text, {p: uri for uri, p in prefixes.items()}).steps[0].preds[0]


def render(steps: Iterable[Step]) -> str:
    """Atom text for ``steps``."""
    return "".join(str(s) for s in steps)


def has_predicates(atom: str) -> bool:
    return any(s.preds for s in parse_atom(atom))


@lru_cache(maxsize=_CACHED)
def skeleton(atom: str) -> str:
    """The atom without any predicate."""
    return render(Step(s.axis, s.test) for s in parse_atom(atom))


@lru_cache(maxsize=_CACHED)
def strip_steps(atom: str) -> tuple[str, ...]:
    """The atom without the predicates of one step, for each step that has some
    (a finer generalization (b) than :func:`skeleton`)."""
    steps = parse_atom(atom)
    return tuple(render((*steps[:i], Step(s.axis, s.test), *steps[i + 1:]))
                 for i, s in enumerate(steps) if s.preds)


@lru_cache(maxsize=_CACHED)
def shorten(atom: str) -> str | None:
    """First and last step joined by ``//`` (two steps: ``//last``); None if the
    atom cannot get shorter."""
    steps = parse_atom(atom)
    last = steps[-1]
    if len(steps) >= 3:
        return render((steps[0], Step("//", last.test, last.preds)))
    if len(steps) == 2:
        return render((Step("//", last.test, last.preds),))
    return None


@lru_cache(maxsize=_CACHED)
def prefixes(atom: str) -> tuple[str, ...]:
    """Texts of the atom's step prefixes, shortest first (the atom itself last)."""
    steps = parse_atom(atom)
    return tuple(render(steps[:i]) for i in range(1, len(steps) + 1))


@lru_cache(maxsize=_CACHED)
def closure(atom: str) -> frozenset[str]:
    """Atoms implied by ``atom``: its prefixes, with and without predicates."""
    return frozenset(prefixes(atom)) | frozenset(prefixes(skeleton(atom)))


def common(conjunctions: Iterable[Iterable[str]]) -> frozenset[str]:
    """The strongest conjunction of implied atoms shared by every conjunction
    (empty: only the always-true query is common)."""
    shared: set[str] | None = None
    for conj in conjunctions:
        implied = set().union(*(closure(a) for a in conj)) if conj else set()
        shared = implied if shared is None else shared & implied
        if not shared:
            return frozenset()
    return prune(shared or ())


def prune(conj: Iterable[str]) -> frozenset[str]:
    """Drop atoms implied by another atom of the same conjunction."""
    conj = set(conj)
    return frozenset(x for x in conj if not any(y != x and x in closure(y) for y in conj))


# -- merging predicates on one step (generalization (c)) ---------------------------

def _operand(expr: ast.Expr) -> ast.RelPath | None:
    return expr if isinstance(expr, ast.RelPath) and not expr.steps else None


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def simple_predicate(expr: ast.Expr) -> tuple[str, ast.Expr] | None:
    """``(operand text, expr)`` when ``expr`` tests one operand of the context
    element (``@a``, ``text()`` or ``.``) against a literal, else None."""
    if isinstance(expr, ast.Compare):
        left, right, op = expr.left, expr.right, expr.op
        if isinstance(left, (ast.Literal, ast.Number)):
            left, right, op = right, left, _FLIP[op]
        if _operand(left) is not None and isinstance(right, (ast.Literal, ast.Number)):
            return str(left), ast.Compare(op, left, right)
    if isinstance(expr, ast.Call) and len(expr.args) == 2:
        first, lit = expr.args
        if _operand(first) is not None and isinstance(lit, ast.Literal):
            return str(first), expr
    return None


@dataclass(frozen=True)
class PredSummary:
    """A predicate on one operand weakened to a form that merges: ``kind`` is
    ``values`` (string equality with any of ``values``), ``range`` (numeric value
    within ``lo``/``hi``, ``None`` for unbounded, ``*_open`` for strict), ``exists``
    (the operand is present) or ``any`` (no test at all)."""

    operand: str
    kind: str
    values: frozenset[str] = frozenset()
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False

    @classmethod
    def of(cls, operand: str, expr: ast.Expr) -> "PredSummary":
        """The summary of one simple predicate (see :func:`simple_predicate`)."""
        exists = cls(operand, "any" if operand == "." else "exists")
        if isinstance(expr, ast.Compare):
            lit = expr.right
            if isinstance(lit, ast.Literal):
                return cls(operand, "values", frozenset({lit.value})) if expr.op == "=" else exists
            v, op = lit.value, expr.op
            if op == "!=" or v != v:
                return exists
            return cls(operand, "range",
                       lo=v if op in (">", ">=", "=") else None, lo_open=op == ">",
                       hi=v if op in ("<", "<=", "=") else None, hi_open=op == "<")
        lit = expr.args[1]
        return exists if lit.value else cls(operand, "any")  # contains(x, '') is always true

    def join(self, other: "PredSummary") -> "PredSummary":
        """The weakest-needed summary implied by either side."""
        kinds = {self.kind, other.kind}
        if "any" in kinds:
            return PredSummary(self.operand, "any")
        if kinds == {"values"}:
            return PredSummary(self.operand, "values", self.values | other.values)
        if kinds == {"range"}:
            lo, lo_open = _bound(self.lo, self.lo_open, other.lo, other.lo_open, min)
            hi, hi_open = _bound(self.hi, self.hi_open, other.hi, other.hi_open, max)
            if lo is None and hi is None:
                return PredSummary(self.operand, "any" if self.operand == "." else "exists")
            return PredSummary(self.operand, "range", lo=lo, lo_open=lo_open, hi=hi, hi_open=hi_open)
        return PredSummary(self.operand, "any" if self.operand == "." else "exists")

    def covers(self, other: "PredSummary") -> bool:
        return self.join(other) == self

    def expr(self) -> ast.Expr | None:
        """The merged predicate (None: no predicate left)."""
        op = _operand_node(self.operand)
        if self.kind == "values":
            items = tuple(ast.Compare("=", op, ast.Literal(v)) for v in sorted(self.values))
            return items[0] if len(items) == 1 else ast.Or(items)
        if self.kind == "range":
            if self.lo is not None and self.lo == self.hi:
                return ast.Compare("=", op, ast.Number(self.lo))
            parts = []
            if self.lo is not None:
                parts.append(ast.Compare(">" if self.lo_open else ">=", op, ast.Number(self.lo)))
            if self.hi is not None:
                parts.append(ast.Compare("<" if self.hi_open else "<=", op, ast.Number(self.hi)))
            return parts[0] if len(parts) == 1 else ast.And(tuple(parts))
        return op if self.kind == "exists" else None


def _bound(a, a_open, b, b_open, pick):
    if a is None or b is None:
        return None, False
    if a == b:
        return a, a_open and b_open
    return (a, a_open) if pick(a, b) == a else (b, b_open)


def _operand_node(text: str) -> ast.RelPath:
    if text == ".":
        return ast.RelPath(())
    if text == "text()":
        return ast.RelPath((), ast.TextTail())
    return ast.RelPath((), ast.AttrTail(text[1:]))


@lru_cache(maxsize=_CACHED)
def merge_key(atom: str) -> tuple[str, int, str] | None:
    """``(skeleton, step index, operand)`` when the atom's only predicate is a simple
    one (see :func:`simple_predicate`); atoms with equal keys can be merged."""
    steps = parse_atom(atom)
    with_preds = [(i, s) for i, s in enumerate(steps) if s.preds]
    if len(with_preds) != 1 or len(with_preds[0][1].preds) != 1:
        return None
    i, step = with_preds[0]
    simple = simple_predicate(parse_predicate(step.preds[0]))
    return None if simple is None else (skeleton(atom), i, simple[0])


def summary(atom: str) -> PredSummary:
    """The :class:`PredSummary` of an atom that has a :func:`merge_key`."""
    key = merge_key(atom)
    if key is None:
        raise ValueError(f"atom {atom!r} has no single simple predicate to merge")
    step = parse_atom(atom)[key[1]]
    return PredSummary.of(*simple_predicate(parse_predicate(step.preds[0])))


def merged(key: tuple[str, int, str], merged_summary: PredSummary) -> str:
    """The atom with skeleton ``key[0]`` carrying ``merged_summary`` on step ``key[1]``."""
    steps = list(parse_atom(key[0]))
    pred = merged_summary.expr()
    step = steps[key[1]]
    steps[key[1]] = Step(step.axis, step.test, () if pred is None else (str(pred),))
    return render(steps)
