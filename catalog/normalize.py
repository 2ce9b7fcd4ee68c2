"""Validation against the schema and normalization (paper section 3.3): ``or`` is split into
several conjunctive rules (section 2.3), the search clause is extended by a variable for every
class a path passes through, and paths are split into one-step property accesses. A prefix
without ``?`` is one resource (single-valued), so paths sharing it share its variable; every
``?`` is an existential of its own, so paths through it do not share.

Example 1 normalized (section 3.3): ``search CycleProvider c, ServerInformation s register c
where c.serverHost contains 'uni-passau.de' and c.serverInformation = s and s.memory > 64``:

>>> from catalog.parser import parse
>>> from catalog.schema import FIGURE_1_SCHEMA, Schema
>>> schema = Schema(); schema.add(FIGURE_1_SCHEMA)
>>> [n] = normalize(parse("search CycleProvider c register c where c.serverHost contains "
...                       "'uni-passau.de' and c.serverInformation.memory > 64"), schema)
>>> print(n)
search CycleProvider c, ServerInformation s register c where c.serverHost contains 'uni-passau.de' and c.serverInformation = s and s.memory > 64
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from catalog import defaults
from catalog.errors import RuleError
from catalog.schema import Schema
from catalog.syntax import ORDERED, Comparison, Const, Or, Path, Rule
from catalog.values import constant_text

MIRROR = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
"""The operator with its operands swapped (``5 < c.x`` is ``c.x > 5``)."""


@dataclass(frozen=True)
class Var:
    """A search variable: its class, and the subscription it ranges over (``rule(N)``) if any."""

    name: str
    cls: str
    rule: int | None
    pos: int


@dataclass(frozen=True)
class Term:
    """``var.prop``, or the resource itself when ``prop`` is ``None``; ``literal``: its values are
    literals (else URI references of resources of class ``cls``)."""

    var: str
    prop: str | None
    literal: bool
    cls: str | None

    def text(self) -> str:
        return self.var if self.prop is None else f"{self.var}.{self.prop}"


@dataclass(frozen=True)
class Selection:
    """A comparison of a term with a constant (``str``, or ``float`` for a number)."""

    term: Term
    op: str
    value: str | float
    pos: int


@dataclass(frozen=True)
class Join:
    """A comparison of two terms of different variables or of one."""

    left: Term
    op: str
    right: Term
    pos: int


@dataclass(frozen=True)
class Conjunct:
    """One normalized conjunctive rule."""

    vars: tuple[Var, ...]
    register: str
    predicates: tuple[Selection | Join, ...]
    text: str

    @property
    def selections(self) -> tuple[Selection, ...]:
        return tuple(p for p in self.predicates if isinstance(p, Selection))

    @property
    def joins(self) -> tuple[Join, ...]:
        return tuple(p for p in self.predicates if isinstance(p, Join))

    def var(self, name: str) -> Var:
        return next(v for v in self.vars if v.name == name)

    def __str__(self) -> str:
        search = ", ".join(f"{v.cls if v.rule is None else f'rule({v.rule})'} {v.name}" for v in self.vars)
        where = " and ".join(f"{p.term.text()} {p.op} {constant_text(p.value)}" if isinstance(p, Selection)
                             else f"{p.left.text()} {p.op} {p.right.text()}" for p in self.predicates)
        return f"search {search} register {self.register}" + (f" where {where}" if where else "")


def _dnf(node) -> list[list[Comparison]]:
    if node is None:
        return [[]]
    if isinstance(node, Comparison):
        return [[node]]
    if isinstance(node, Or):
        out = [c for item in node.items for c in _dnf(item)]
    else:
        out = [[]]
        for item in node.items:
            out = [a + b for a in out for b in _dnf(item)]
            if len(out) > defaults.MAX_DISJUNCTS:
                break
    if len(out) > defaults.MAX_DISJUNCTS:
        first = node.items[0]
        raise RuleError(f"the where clause splits into more than {defaults.MAX_DISJUNCTS} rules",
                        getattr(first, "pos", 0), "or")
    return out


class _Builder:
    """Normalizes one conjunct: variables for path prefixes, terms, type checks."""

    def __init__(self, rule: Rule, schema: Schema, bound: dict[str, Var]) -> None:
        self.rule, self.schema = rule, schema
        self.vars = dict(bound)
        self.prefix_vars: dict[str, str] = {}
        self.predicates: list[Selection | Join] = []

    def fresh(self, cls: str) -> str:
        """A new variable named as section 3.3 names them: the class's initial (``s`` for
        ServerInformation), numbered when taken."""
        base = cls[0].lower()
        name, n = base, 1
        while name in self.vars or name in (b.var for b in self.rule.bindings):
            n += 1
            name = f"{base}{n}"
        return name

    def term(self, path: Path) -> Term:
        if path.var not in self.vars:
            raise RuleError(f"variable {path.var} is not bound in the search clause", path.pos, "variable")
        var = self.vars[path.var]
        name, cls, key = var.name, var.cls, var.name
        for i, step in enumerate(path.steps):
            prop = self.schema.property(cls, step.name)
            if prop is None:
                raise RuleError(f"class {cls} has no property {step.name}", step.pos, "property")
            if prop.set_valued and not step.any:
                raise RuleError(f"{step.name} is set-valued: write {step.name}? (any element)", step.pos, "property")
            if step.any and not prop.set_valued:
                raise RuleError(f"{step.name} is not set-valued: ? applies to set-valued properties only",
                                step.pos, "any operator")
            if i == len(path.steps) - 1:
                return Term(name, step.name, prop.range is None, prop.range)
            if prop.range is None:
                raise RuleError(f"{step.name} is a literal; a path can only go on through a reference",
                                path.steps[i + 1].pos, "path")
            key = f"{key}.{step.name}" + (f"?@{step.pos}" if step.any else "")
            if key not in self.prefix_vars:
                fresh = self.fresh(prop.range)
                self.vars[fresh] = Var(fresh, prop.range, None, step.pos)
                self.prefix_vars[key] = fresh
                self.predicates.append(Join(Term(name, step.name, False, prop.range), "=",
                                       Term(fresh, None, False, prop.range), step.pos))
            name, cls = self.prefix_vars[key], prop.range
        return Term(name, None, False, cls)

    def comparison(self, c: Comparison) -> None:
        left, op, right = c.left, c.op, c.right
        if isinstance(left, Const) and isinstance(right, Const):
            raise RuleError("a comparison of two constants", c.pos, "comparison")
        if isinstance(left, Const):
            if op == "contains":
                raise RuleError("contains needs a path on its left", c.pos, "comparison")
            left, op, right = right, MIRROR[op], left
        lt = self.term(left)
        if isinstance(right, Const):
            self.selection(lt, op, right, c.pos)
        else:
            self.join(lt, op, self.term(right), c.pos)

    def selection(self, term: Term, op: str, const: Const, pos: int) -> None:
        if op in ORDERED and not isinstance(const.value, float):
            raise RuleError(f"{op} compares numbers only, not the string {constant_text(const.value)}",
                            const.pos, "comparison")
        if not term.literal and (op in ORDERED or op == "contains" or isinstance(const.value, float)):
            raise RuleError(f"{term.text()} is a resource: compare it with = or != and a URI reference string",
                            pos, "comparison")
        if op == "contains" and not isinstance(const.value, str):
            raise RuleError("contains needs a string", const.pos, "comparison")
        self.predicates.append(Selection(term, op, const.value, pos))

    def join(self, a: Term, op: str, b: Term, pos: int) -> None:
        if a.literal != b.literal:
            raise RuleError(f"{a.text()} and {b.text()}: a literal is never a resource", pos, "comparison")
        if not a.literal:
            if op not in ("=", "!="):
                raise RuleError("resources compare with = and != only", pos, "comparison")
            if a.cls != b.cls:
                raise RuleError(f"{a.text()} is a {a.cls} and {b.text()} a {b.cls}: never the same resource",
                                pos, "comparison")
        self.predicates.append(Join(a, op, b, pos))


def normalize(rule: Rule, schema: Schema, rule_type: Callable[[int], str | None] = lambda n: None) -> list[Conjunct]:
    """The normalized conjunctive rules ``rule`` stands for (one per disjunct of its where
    clause); ``rule_type(n)`` is the type of subscription ``n`` (``None``: no such rule)."""
    bound: dict[str, Var] = {}
    for b in rule.bindings:
        if b.var in bound:
            raise RuleError(f"variable {b.var} is bound twice", b.pos, "variable")
        if isinstance(b.extension, int):
            cls = rule_type(b.extension)
            if cls is None:
                raise RuleError(f"there is no subscription rule {b.extension}", b.pos, "extension")
            bound[b.var] = Var(b.var, cls, b.extension, b.pos)
        else:
            if b.extension not in schema.classes:
                raise RuleError(f"unknown class {b.extension}", b.pos, "class")
            bound[b.var] = Var(b.var, b.extension, None, b.pos)
    if rule.register not in bound:
        raise RuleError(f"register names {rule.register}, which the search clause does not bind",
                        rule.register_pos, "register clause")
    out = []
    for comparisons in _dnf(rule.where):
        builder = _Builder(rule, schema, bound)
        for c in comparisons:
            builder.comparison(c)
        out.append(Conjunct(tuple(builder.vars.values()), rule.register, tuple(dict.fromkeys(builder.predicates)),
                            rule.text))
    return out
