"""From the AST to shared automaton paths and operators.

A profile becomes one linear path of steps ``(axis, test, guard)`` for the NFA;
each nested path in a predicate becomes a :class:`operators.RelPath` of the same
kind of steps, evaluated from the element it branches from (a join, see
:class:`operators.Nested`).
Comparisons are normalised so the same condition always has the same key
(``'SF' = @a`` is ``@a = 'SF'``; ``b/@a = 'v'`` is the join ``b[@a = 'v']``), and
every guard and nested path is interned in a :class:`Registry`: profiles share
operators and automaton states whenever their keys agree.

Compilation only looks objects up; :meth:`Registry.commit` makes them live. So a
profile that fails to compile leaves nothing behind.
"""

from __future__ import annotations

from yfilter import ast
from yfilter.nfa import Step
from yfilter.operators import (Always, AndP, AttrTest, Func, Guard, Nested, NotP, OrP, PosTest,
                               Pred, RelPath, SelfTest, StrArg, TextTest)
from yfilter.values import FLIPPED, compare_number, compare_string, number


class Registry:
    """Interned guards and nested paths, reference-counted."""

    def __init__(self) -> None:
        self.guards: dict[str, Guard] = {}
        self.rels: dict[str, RelPath] = {}

    # -- lookup during compilation (nothing becomes live) ---------------------
    def guard(self, txn: dict, test: str, preds: tuple[Pred, ...]) -> Guard:
        g = Guard(test, preds)
        return self.guards.get(g.key) or txn.setdefault(("g", g.key), g)

    def rel(self, txn: dict, steps: tuple[Step, ...]) -> RelPath:
        key = "".join(axis + (test if g is None else g.key) for axis, test, g in steps)
        return self.rels.get(key) or txn.setdefault(("r", key), RelPath(key, steps))

    # -- making objects live / dead --------------------------------------------
    def ref_guard(self, g: Guard) -> None:
        g.refs += 1
        if g.refs == 1:
            self.guards[g.key] = g
            for r in g.rels():
                self._ref_rel(r)
            for sub in g.subguards():
                self.ref_guard(sub)

    def unref_guard(self, g: Guard) -> None:
        g.refs -= 1
        if g.refs == 0:
            del self.guards[g.key]
            for r in g.rels():
                self._unref_rel(r)
            for sub in g.subguards():
                self.unref_guard(sub)

    def _ref_rel(self, r: RelPath) -> None:
        r.refs += 1
        if r.refs == 1:
            self.rels[r.key] = r
            for _, _, g in r.steps:
                if g is not None:
                    self.ref_guard(g)

    def _unref_rel(self, r: RelPath) -> None:
        r.refs -= 1
        if r.refs == 0:
            del self.rels[r.key]
            for _, _, g in r.steps:
                if g is not None:
                    self.unref_guard(g)


def compile_path(path: ast.Path, reg: Registry, txn: dict) -> tuple[Step, ...]:
    """The main-NFA steps of a profile (objects looked up in ``reg`` or new in ``txn``)."""
    return _steps(path.steps, path.tail, reg, txn)


def path_key(steps: tuple[Step, ...]) -> str:
    """Canonical text of compiled steps: equal keys mean equal profiles."""
    return "".join(axis + (test if g is None else g.key) for axis, test, g in steps)


def _steps(steps, tail, reg, txn, last_extra: Pred | None = None) -> tuple[Step, ...]:
    out = []
    for i, st in enumerate(steps):
        preds = [_expr(p, reg, txn) for p in st.preds]
        if i == len(steps) - 1:
            if tail is not None:
                preds.append(_exists_on_self(tail))
            if last_extra is not None:
                preds.append(last_extra)
        guard = reg.guard(txn, st.test, tuple(preds)) if preds else None
        out.append((st.axis, st.test, guard))
    return tuple(out)


def _exists_on_self(tail) -> Pred:
    if isinstance(tail, ast.AttrTail):
        return AttrTest(tail.name, None, "@" + tail.name)
    if isinstance(tail, ast.TextTail):
        return TextTest(None, "text()")
    return Always()


def _expr(e, reg: Registry, txn: dict) -> Pred:
    if isinstance(e, ast.Or):
        return OrP(tuple(_expr(i, reg, txn) for i in e.items))
    if isinstance(e, ast.And):
        return AndP(tuple(_expr(i, reg, txn) for i in e.items))
    if isinstance(e, ast.Not):
        return NotP(_expr(e.item, reg, txn))
    if isinstance(e, ast.Number):
        return PosTest("=", e.value, f"position() = {e}")
    if isinstance(e, ast.RelPath):
        return _on_path(e, None, reg, txn)
    if isinstance(e, ast.Call):
        args = tuple(_str_arg(a, reg, txn) for a in e.args)
        return Func(e.name, args, f"{e.name}({', '.join(a.key for a in args)})")
    if isinstance(e, ast.Compare):
        return _compare(e, reg, txn)
    raise TypeError(f"not a predicate expression: {e!r}")  # the parser never builds one


def _compare(e: ast.Compare, reg: Registry, txn: dict) -> Pred:
    op, left, right = e.op, e.left, e.right
    if isinstance(left, (ast.Literal, ast.Number)):
        op, left, right = FLIPPED[op], right, left
    if isinstance(left, ast.Position):
        value = right.value if isinstance(right, ast.Number) else number(right.value)
        return PosTest(op, value, f"position() {op} {ast.number_text(value)}")
    if isinstance(right, ast.Literal):
        test = compare_string(op, right.value)
    else:
        test = compare_number(op, right.value)
    eq = right.value if op == "=" and isinstance(right, ast.Literal) else None
    return _on_path(left, (op, str(right), test, eq, right.value), reg, txn)


def _on_path(rel: ast.RelPath, cmp, reg: Registry, txn: dict) -> Pred:
    """Existence of (``cmp`` None) or comparison on the nodes a relative path selects."""
    tail = rel.tail
    if cmp is None:
        last = _exists_on_self(tail) if tail is not None else None
    else:
        op, lit, test, eq, value = cmp
        if isinstance(tail, ast.AttrTail):
            last = AttrTest(tail.name, test, f"@{tail.name} {op} {lit}", eq, (op, value))
        elif isinstance(tail, ast.TextTail):
            last = TextTest(test, f"text() {op} {lit}", eq, (op, value))
        else:
            last = SelfTest(test, f". {op} {lit}", eq, (op, value))
    if not rel.steps:
        return last if last is not None else Always()
    steps = _steps(rel.steps, None, reg, txn, last_extra=last)
    return Nested(reg.rel(txn, steps))


def _str_arg(a, reg: Registry, txn: dict) -> StrArg:
    if isinstance(a, ast.Literal):
        return StrArg(str(a), literal=a.value)
    tail = a.tail
    kind = (("attr", tail.name) if isinstance(tail, ast.AttrTail)
            else ("text", None) if isinstance(tail, ast.TextTail) else ("self", None))
    if not a.steps:
        return StrArg(str(a), tail=kind)
    steps = _steps(a.steps, None, reg, txn)
    key = path_key(steps) + ("" if tail is None else f"/{tail}")
    return StrArg(key, rel=RelPath(key, steps), tail=kind)


# -- or, split into alternatives ------------------------------------------------------

MAX_ALTERNATIVES = 8


def alternatives(path: ast.Path) -> list[ast.Path]:
    """Paths that together match exactly the messages ``path`` matches: an ``or`` at
    the top of a step's predicate (or under its ``and``) becomes one path per branch,
    since a path selects something with ``[A or B]`` on a step exactly when it
    selects something with ``[A]`` or with ``[B]`` there. Not when a later predicate
    of the same step reads position() (the positions would count other nodes), nor
    when a branch is a bare number (alone it would mean a position). At most
    ``MAX_ALTERNATIVES``; what would give more is left whole. The native matcher
    files each alternative by what it needs (the branch's value), so a profile with
    ``or`` is a candidate only for messages holding one of its branches' values.

    >>> from yfilter.parser import parse
    >>> [str(p) for p in alternatives(parse("/a[@x = '1' or @y = '2']/b[2]"))]
    ["/a[@x = '1']/b[2]", "/a[@y = '2']/b[2]"]
    >>> len(alternatives(parse("/a[@x = '1' or @y = '2'][1]")))
    1
    """
    variants = [path]
    for i, step in enumerate(path.steps):
        for j, pred in enumerate(step.preds):
            if any(_positional(q, top=True) for q in step.preds[j + 1:]):
                continue
            alts = _dnf(pred)
            if len(alts) < 2 or len(variants) * len(alts) > MAX_ALTERNATIVES:
                continue
            variants = [_with_pred(v, i, j, a) for v in variants for a in alts]
    return variants


def _with_pred(path: ast.Path, i: int, j: int, pred) -> ast.Path:
    st = path.steps[i]
    preds = st.preds[:j] + (pred,) + st.preds[j + 1:]
    steps = path.steps[:i] + (ast.Step(st.axis, st.test, preds),) + path.steps[i + 1:]
    return ast.Path(steps, path.tail)


def _dnf(e) -> list:
    """``e`` as alternatives (one: ``e`` itself), none of them a bare number."""
    if isinstance(e, ast.Or):
        out = []
        for item in e.items:
            out += _dnf(item)
    elif isinstance(e, ast.And):
        out = [()]
        for item in e.items:
            out = [acc + (a,) for acc in out for a in _dnf(item)]
            if len(out) > MAX_ALTERNATIVES:
                return [e]
        out = [ast.And(a) if len(a) > 1 else a[0] for a in out]
    else:
        return [e]
    if len(out) > MAX_ALTERNATIVES or any(isinstance(a, ast.Number) for a in out):
        return [e]
    return out


def _positional(e, top: bool = False) -> bool:
    """Does ``e`` read position() (a bare number predicate does)?"""
    if isinstance(e, ast.Position) or (top and isinstance(e, ast.Number)):
        return True
    if isinstance(e, (ast.Or, ast.And)):
        return any(_positional(i) for i in e.items)
    if isinstance(e, ast.Not):
        return _positional(e.item)
    if isinstance(e, ast.Compare):
        return _positional(e.left) or _positional(e.right)
    if isinstance(e, ast.Call):
        return any(_positional(a) for a in e.args)
    return False  # paths: their positions are their own steps'
