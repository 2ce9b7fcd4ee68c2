"""``Map()``: a profile's matching part as a routing query in disjunctive normal form.

A routing query is a set of conjunctions; each conjunction is a set of *atoms*, and
an atom is an absolute linear path (no nested paths) that may carry value predicates
on its steps — the kind of path a YFilter NFA shares best. ``map_profile`` relaxes a
profile into such a query: whenever the profile matches a message, the query matches
it too (no false negatives); the query may match more (false positives), because

* a nested path ``/a[b/c = 'x']/d`` becomes two atoms ``/a/b/c[. = 'x']`` and ``/a/d``
  (the join on the same ``a`` element is dropped: a relaxation, never a restriction);
* ``not(...)`` over nested paths and position predicates are dropped;
* an ``or`` that would expand past :data:`MAX_DISJUNCTS` conjunctions is dropped.

Predicates that only test the step's own element (``[@a = 'v']``, ``[. > 3]``,
``[contains(text(), 'x') or @b]``, even under ``not``) stay on the step, each once.

Atoms are written with element names in Clark notation (``{uri}local``), the
engine's canonical form; :func:`engine_text` turns one into profile text for an
:class:`yfilter.Engine` with a prefix map.

>>> q = map_profile("/nitf[head/pubdata/@edition.area = 'SF']//hl1")
>>> sorted(sorted(c) for c in q)
[['/nitf//hl1', "/nitf/head/pubdata[@edition.area = 'SF']"]]
>>> sorted(sorted(c) for c in map_profile("/a[b = 1 or c]"))
[['/a/b[. = 1]'], ['/a/c']]
"""

from __future__ import annotations

from itertools import product

from yfilter import ast
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse

Conjunction = frozenset[str]
RoutingQuery = frozenset[Conjunction]

MAX_DISJUNCTS = 16
"""Bound on the conjunctions one profile maps to; beyond it an ``or`` is relaxed away."""

TRUE: RoutingQuery = frozenset({frozenset()})
"""The query that matches every message (one empty conjunction)."""


def map_profile(profile: str | ast.Path) -> RoutingQuery:
    """The routing query of a profile: a filter (text or parsed :class:`ast.Path`) or
    a transformation profile's text, whose for/where is its matching part."""
    if isinstance(profile, str):
        path = parse_flwr(profile).filter_path() if is_flwr(profile) else parse(profile)
    else:
        path = profile
    return frozenset(_prune(c) for c in _spine(path.steps, path.tail, ""))


def _prune(conj: Conjunction) -> Conjunction:
    """Drop atoms implied by a longer atom of the same conjunction: ``/a`` by ``/a/b``
    or ``/a[@x]`` (the longer path was built by extending the shorter one's text)."""
    return frozenset(x for x in conj
                     if not any(len(y) > len(x) and y.startswith(x) and y[len(x)] in "/[" for y in conj))


def _or(parts: list[RoutingQuery]) -> RoutingQuery:
    if any(p == TRUE for p in parts):
        return TRUE
    out = frozenset().union(*parts)
    return TRUE if len(out) > MAX_DISJUNCTS else out


def _and(parts: list[RoutingQuery]) -> RoutingQuery:
    out = TRUE
    for part in sorted(parts, key=len):
        combined = frozenset(a | b for a, b in product(out, part))
        if len(combined) > MAX_DISJUNCTS:
            continue  # leaving a factor out only weakens the conjunction
        out = combined
    return out


def _is_local(expr: ast.Expr) -> bool:
    """True if ``expr`` tests only the context element itself (no steps, no position)."""
    if isinstance(expr, ast.RelPath):
        return not expr.steps
    if isinstance(expr, (ast.Literal, ast.Number)):
        return True
    if isinstance(expr, ast.Position):
        return False
    if isinstance(expr, ast.Compare):
        return _is_local(expr.left) and _is_local(expr.right) and not _is_constant(expr)
    if isinstance(expr, ast.Call):
        return all(_is_local(a) for a in expr.args)
    if isinstance(expr, ast.Not):
        return _is_local(expr.item)
    if isinstance(expr, (ast.And, ast.Or)):
        return all(_is_local(i) for i in expr.items)
    return False


def _is_constant(expr: ast.Compare) -> bool:
    return all(isinstance(x, (ast.Literal, ast.Number)) for x in (expr.left, expr.right))


def _step_text(step: ast.Step, local: list[str]) -> str:
    return step.axis + step.test + "".join(f"[{p}]" for p in local)


def _steps(steps: tuple[ast.Step, ...], base: str, last_test: str | None) -> RoutingQuery:
    """Atoms for ``base`` followed by ``steps``; ``last_test`` is a predicate put on the
    final step (or appended to ``base`` itself when there are no steps)."""
    factors: list[RoutingQuery] = []
    text = base
    for i, step in enumerate(steps):
        local = [p for p in step.preds if _is_local(p) and not isinstance(p, ast.Number)]
        if i == len(steps) - 1 and last_test is not None:
            local.append(last_test)
        text += _step_text(step, list(dict.fromkeys(map(str, local))))  # [p][p] is [p]: no positions here
        for pred in step.preds:
            if not _is_local(pred):
                factors.append(_pred(pred, text))
    if not steps and last_test is not None:
        text += f"[{last_test}]"
    return _and([frozenset({frozenset({text})}), *factors])


def _spine(steps: tuple[ast.Step, ...], tail: ast.Tail, base: str) -> RoutingQuery:
    return _steps(steps, base, str(tail) if tail is not None else None)


def _pred(expr: ast.Expr, base: str) -> RoutingQuery:
    """DNF of a predicate evaluated at the element ``base`` ends on."""
    if _is_local(expr) and not isinstance(expr, ast.Number):
        return frozenset({frozenset({f"{base}[{expr}]"})})
    if isinstance(expr, (ast.Number, ast.Position, ast.Not, ast.Literal)):
        return TRUE
    if isinstance(expr, ast.And):
        return _and([_pred(i, base) for i in expr.items])
    if isinstance(expr, ast.Or):
        return _or([_pred(i, base) for i in expr.items])
    if isinstance(expr, ast.RelPath):
        return _relpath(expr, base, None)
    if isinstance(expr, ast.Compare):
        return _compare(expr, base)
    if isinstance(expr, ast.Call):
        return _call(expr, base)
    raise TypeError(f"unexpected predicate node {type(expr).__name__}")


def _relpath(path: ast.RelPath, base: str, test: str | None) -> RoutingQuery:
    """Atoms for a nested path; ``test`` (written against ``.``) moves to its last step."""
    tail = str(path.tail) if path.tail is not None else None
    if test is None:
        last = tail
    elif tail is None:
        last = test
    else:
        last = test.replace("{ctx}", tail)
    return _steps(path.steps, base, last.replace("{ctx}", ".") if last else None)


def _compare(expr: ast.Compare, base: str) -> RoutingQuery:
    left, right, op = expr.left, expr.right, expr.op
    if isinstance(left, (ast.Literal, ast.Number)) and isinstance(right, ast.RelPath):
        left, right, op = right, left, _FLIP[op]
    if isinstance(left, ast.RelPath) and isinstance(right, (ast.Literal, ast.Number)):
        return _relpath(left, base, f"{{ctx}} {op} {right}")
    return _exists([left, right], base)


def _call(expr: ast.Call, base: str) -> RoutingQuery:
    first, *rest = expr.args
    if isinstance(first, ast.RelPath) and first.steps and all(isinstance(a, ast.Literal) for a in rest):
        args = ", ".join(str(a) for a in rest)
        return _relpath(first, base, f"{expr.name}({{ctx}}, {args})")
    return _exists(list(expr.args), base)


def _exists(operands: list, base: str) -> RoutingQuery:
    """Any comparison or call over paths implies that the paths it reads are non-empty."""
    parts = []
    for op in operands:
        if isinstance(op, ast.RelPath) and op.steps:
            parts.append(_relpath(op, base, None))
        elif isinstance(op, ast.Call):
            parts.append(_exists(list(op.args), base))
    return _and(parts)


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def engine_text(atom: str, prefixes: dict[str, str]) -> str:
    """Profile text for ``atom`` with each ``{uri}`` replaced by a prefix from
    ``prefixes`` (uri -> prefix; new URIs get ``ns0``, ``ns1``, ...). String literals
    are left alone.

    >>> p = {}
    >>> engine_text("/{http://x}a[@b = '{not a name}']", p), p
    ("/ns0:a[@b = '{not a name}']", {'http://x': 'ns0'})
    """
    if "{" not in atom:
        return atom
    out, i, quote = [], 0, None
    while i < len(atom):
        ch = atom[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            end = atom.index("}", i)
            uri = atom[i + 1:end]
            prefix = prefixes.setdefault(uri, f"ns{len(prefixes)}")
            out.append(prefix + ":")
            i = end + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
