"""Decomposition of a normalized rule into atomic rules (paper section 3.3.1): every comparison
with a constant becomes a triggering rule, a class left without one gets a triggering rule with an
empty ``where``, several inputs of one variable are joined by identity (``a = b``), and the
remaining comparisons become join rules, one each, until the rule is itself a join rule.

A join rule registers one variable, so the comparisons between variables must form a tree
around the registered variable (every ``and`` of paths does): it is reduced from the leaves,
each leaf joined into its neighbour. Comparisons that close a cycle, or compare two properties
of one variable, have no decomposition into atomic rules and are refused (:class:`RuleError`).

The order is canonical, so equal rules make equal atomic rules (section 3.3.2 shares them):
triggering rules are made in the order the rule states them, inputs of one variable are joined
in the order of their rule ids, children of a variable in the order of their result's rule id.

Section 3.3.1's example (ids are assigned by the :class:`Interner`; here in creation order):

>>> from catalog.parser import parse
>>> from catalog.normalize import normalize
>>> from catalog.schema import FIGURE_1_SCHEMA, Schema
>>> schema = Schema(); schema.add(FIGURE_1_SCHEMA)
>>> [n] = normalize(parse("search CycleProvider c register c where c.serverHost contains 'uni-passau.de' "
...                       "and c.serverInformation.memory > 64 and c.serverInformation.cpu > 500"), schema)
>>> names = Interner()
>>> end = decompose(n, {}, names)
>>> for i, text in enumerate(names.texts, 1): print(i, text)
1 search CycleProvider c register c where c.serverHost contains 'uni-passau.de'
2 search ServerInformation s register s where s.memory > 64
3 search ServerInformation s register s where s.cpu > 500
4 search view(2, ServerInformation) a, view(3, ServerInformation) b register a where a = b
5 search view(4, ServerInformation) a, view(1, CycleProvider) c register c where c.serverInformation = a
>>> end
5
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog import defaults
from catalog.errors import RuleError
from catalog.normalize import MIRROR, Conjunct, Join, Term
from catalog.syntax import ORDERED
from catalog.values import constant_text

TABLES = {None: "FilterRules", "=": "FilterRules_EQ", "!=": "FilterRules_NE", "<": "FilterRules_LT",
          "<=": "FilterRules_LE", ">": "FilterRules_GT", ">=": "FilterRules_GE", "contains": "FilterRules_CON"}
"""Where a triggering rule is kept (section 3.3.4): one table per operator; the plain
``FilterRules`` holds the rules with an empty ``where`` (every instance of a class)."""


def initial(cls: str) -> str:
    """A class's variable in canonical rule text: its initial, lower case (as the paper writes)."""
    return cls[0].lower()


@dataclass(frozen=True)
class Trigger:
    """A triggering rule: one class and at most one comparison with a constant. ``prop`` is
    :data:`~catalog.defaults.SUBJECT` when the resource itself is compared (``c = 'doc.rdf#host'``)."""

    cls: str
    prop: str | None = None
    op: str | None = None
    value: str | float | None = None

    @property
    def table(self) -> str:
        return TABLES[self.op]

    def text(self) -> str:
        v = initial(self.cls)
        head = f"search {self.cls} {v} register {v}"
        if self.op is None:
            return head
        term = v if self.prop == defaults.SUBJECT else f"{v}.{self.prop}"
        return f"{head} where {term} {self.op} {constant_text(self.value)}"


@dataclass(frozen=True)
class Template:
    """The ``where`` of a join rule, the same for every rule of its group (section 3.3.3):
    ``left`` and ``right`` are parameters (1 or 2), ``*_prop`` their properties
    (:data:`~catalog.defaults.SUBJECT`: the resource itself), ``register`` the parameter whose
    resources the rule registers."""

    cls1: str
    cls2: str
    left: int
    left_prop: str
    op: str
    right: int
    right_prop: str
    register: int

    def names(self) -> tuple[str, str]:
        """The parameters' variables: ``a``, then ``b`` for the same class, else its initial
        (which gives Figure 7's texts exactly)."""
        second = initial(self.cls2)
        return "a", ("b" if self.cls2 == self.cls1 or second == "a" else second)

    def text(self, ext1: str, ext2: str) -> str:
        names = self.names()

        def term(param: int, prop: str) -> str:
            return names[param - 1] + ("" if prop == defaults.SUBJECT else f".{prop}")

        return (f"search {ext1} {names[0]}, {ext2} {names[1]} register {names[self.register - 1]} "
                f"where {term(self.left, self.left_prop)} {self.op} {term(self.right, self.right_prop)}")

    def group_text(self) -> str:
        return self.text(f"group({self.cls1})", f"group({self.cls2})")

    @property
    def type(self) -> str:
        return self.cls1 if self.register == 1 else self.cls2


def template(cls1: str, prop1: str, op: str, cls2: str, prop2: str, register: int) -> Template:
    """The canonical template of ``param1.prop1 op param2.prop2``: a symmetric comparison puts
    the side with a property first (Figure 7: ``c.serverInformation = a``), else parameter 1;
    an ordered one is turned to put parameter 1 first; ``contains`` keeps its sides."""
    if op in ("=", "!="):
        if prop2 != defaults.SUBJECT and prop1 == defaults.SUBJECT:
            return Template(cls1, cls2, 2, prop2, op, 1, prop1, register)
        return Template(cls1, cls2, 1, prop1, op, 2, prop2, register)
    return Template(cls1, cls2, 1, prop1, op, 2, prop2, register)


class Interner:
    """Gives atomic rules ids; this one keeps texts in a list (the backbone's keeps tables)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.types: list[str] = []

    def _intern(self, text: str, type_: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
            self.types.append(type_)
        return self.texts.index(text) + 1

    def trigger(self, t: Trigger) -> int:
        return self._intern(t.text(), t.cls)

    def join(self, tpl: Template, rule1: int, rule2: int) -> int:
        return self._intern(tpl.text(f"view({rule1}, {tpl.cls1})", f"view({rule2}, {tpl.cls2})"), tpl.type)


def _side(term: Term) -> str:
    return term.prop if term.prop is not None else defaults.SUBJECT


def _tree(conj: Conjunct) -> dict[str, list[tuple[Join, str]]]:
    """Adjacency of the join graph, checked to be a tree spanning every variable."""
    adj: dict[str, list[tuple[Join, str]]] = {v.name: [] for v in conj.vars}
    for j in conj.joins:
        if j.left.var == j.right.var:
            raise RuleError(f"{j.left.text()} {j.op} {j.right.text()} compares one variable with itself, "
                            "which no atomic rule can", j.pos, "comparison")
        adj[j.left.var].append((j, j.right.var))
        adj[j.right.var].append((j, j.left.var))
    seen, stack = {conj.register}, [(conj.register, None)]
    while stack:
        v, via = stack.pop()
        for j, w in adj[v]:
            if j is via:
                continue
            if w in seen:
                raise RuleError("the comparisons between variables form a cycle, which join rules (each "
                                "registering one variable) cannot express", j.pos, "comparison")
            seen.add(w)
            stack.append((w, j))
    for v in conj.vars:
        if v.name not in seen:
            raise RuleError(f"variable {v.name} is not connected to {conj.register} by any comparison",
                            v.pos, "variable")
    return adj


def decompose(conj: Conjunct, views: dict[str, int], interner: Interner) -> int:
    """Intern the atomic rules of ``conj`` and return its end rule's id; ``views`` gives the
    end rule a ``rule(N)`` variable ranges over."""
    adj = _tree(conj)
    triggers: dict[str, list[int]] = {v.name: [] for v in conj.vars}
    for s in conj.selections:
        cls = conj.var(s.term.var).cls
        triggers[s.term.var].append(interner.trigger(Trigger(cls, _side(s.term), s.op, s.value)))
    for v in conj.vars:
        if v.rule is not None:
            triggers[v.name].append(views[v.name])
        elif not triggers[v.name]:
            triggers[v.name].append(interner.trigger(Trigger(v.cls)))

    def build(var: str, via: Join | None) -> int:
        cls = conj.var(var).cls
        inputs = sorted(set(triggers[var]))
        rule = inputs[0]
        for other in inputs[1:]:
            rule = interner.join(template(cls, defaults.SUBJECT, "=", cls, defaults.SUBJECT, 1), rule, other)
        children = sorted((build(w, j), j, w) for j, w in adj[var] if j is not via)
        for child_rule, j, w in children:
            mine, theirs = (j.left, j.right) if j.left.var == var else (j.right, j.left)
            op = j.op if mine is j.left else MIRROR.get(j.op, j.op)
            if j.op == "contains":
                tpl = Template(conj.var(w).cls, cls, 1 if j.left.var == w else 2, _side(j.left), "contains",
                               2 if j.left.var == w else 1, _side(j.right), 2)
            else:
                # param 1: the child, param 2: this variable; ``op`` reads mine-op-theirs.
                flipped = MIRROR[op] if op in ORDERED else op
                tpl = template(conj.var(w).cls, _side(theirs), flipped, cls, _side(mine), 2)
            rule = interner.join(tpl, child_rule, rule)
        return rule

    return build(conj.register, None)
