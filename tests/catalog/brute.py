"""The reference for the catalog's differential tests: a rule evaluated by brute force over a
dict of resources, straight from its syntax tree (every assignment of resources to the search
variables, every path followed value by value), with no normalization, decomposition or SQL.

Semantics it pins down (the catalog's documented choices): a path's values are a set and a
comparison holds if some pair of values satisfies it; passing through a reference needs the
referenced resource to exist with the property's range class; a number compares only with values
that read as numbers (``=`` numerically), a string as a string, ``contains`` is a substring test;
two paths compare as strings, ordered operators as numbers.
"""

from __future__ import annotations

from itertools import product

from catalog.document import Resource
from catalog.parser import parse
from catalog.schema import Schema
from catalog.syntax import And, Comparison, Const, Or, Path
from catalog.values import number

OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _values(path: Path, env: dict[str, str], store: dict[str, Resource], schema: Schema) -> set[str]:
    current = {env[path.var]}
    for i, step in enumerate(path.steps):
        nxt = set()
        for uri in current:
            res = store.get(uri)
            if res is None:
                continue
            prop = schema.properties[step.name]
            if i > 0:
                # reached through a reference: must be of the range class of the step before
                before = schema.properties[path.steps[i - 1].name]
                if res.cls != before.range:
                    continue
            nxt |= set(res.props.get(step.name, ()))
        current = nxt
        if i < len(path.steps) - 1:
            current = {u for u in current if u in store}
    return current


def _holds(c: Comparison, env, store, schema) -> bool:
    def vals(x):
        return {x.value} if isinstance(x, Const) else _values(x, env, store, schema)

    left, right = vals(c.left), vals(c.right)
    op = c.op
    for a in left:
        for b in right:
            if isinstance(c.left, Const) or isinstance(c.right, Const):
                const = c.right.value if isinstance(c.right, Const) else c.left.value
                val = a if isinstance(c.right, Const) else b
                if isinstance(const, float):
                    n = number(val)
                    if n is None:
                        continue
                    x, y = (n, const) if isinstance(c.right, Const) else (const, n)
                    if OPS[op](x, y):
                        return True
                    continue
            if op == "contains":
                if b in a:
                    return True
            elif op in ("<", "<=", ">", ">="):
                na, nb = number(a), number(b)
                if na is not None and nb is not None and OPS[op](na, nb):
                    return True
            elif OPS[op](a, b):
                return True
    return False


def _where(node, env, store, schema) -> bool:
    if node is None:
        return True
    if isinstance(node, Comparison):
        return _holds(node, env, store, schema)
    if isinstance(node, And):
        return all(_where(n, env, store, schema) for n in node.items)
    assert isinstance(node, Or)
    return any(_where(n, env, store, schema) for n in node.items)


def evaluate(text: str, store: dict[str, Resource], schema: Schema, rules: dict[int, str],
             domain: dict[str, Resource] | None = None) -> set[str]:
    """URI references ``text`` registers over ``store``; ``rule(N)`` is ``rules[N]`` evaluated on
    the backbone's ``store``; search classes range over ``domain`` (default: ``store``)."""
    rule = parse(text)
    domain = store if domain is None else domain
    choices = []
    for b in rule.bindings:
        if isinstance(b.extension, int):
            choices.append(sorted(evaluate(rules[b.extension], store, schema, rules) & domain.keys()))
        else:
            choices.append(sorted(u for u, r in domain.items() if r.cls == b.extension))
    names = [b.var for b in rule.bindings]
    out = set()
    for combo in product(*choices):
        env = dict(zip(names, combo))
        if env[rule.register] not in out and _where(rule.where, env, domain, schema):
            out.add(env[rule.register])
    return out


def strong_closure(uris: set[str], store: dict[str, Resource], schema: Schema) -> set[str]:
    """The existing resources ``uris`` reach by strong references, themselves included."""
    seen, todo = set(), [u for u in uris if u in store]
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        for name, values in store[u].props.items():
            if schema.properties[name].reference == "strong":
                todo += [v for v in values if v in store and v not in seen]
    return seen
