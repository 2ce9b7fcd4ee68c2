"""Queries at a local repository (paper section 2.2: "quite similar to the rule language"; here
it is the rule language): a rule evaluated on the repository's own data, translated into one SQL
query: a variable per search class over ``Held``, each comparison an ``EXISTS`` over the values
in ``HeldProperties`` (so set-valued properties and paths are existential, as in rules), and
``rule(N)`` a variable over what subscription ``N`` of this repository matched. Unlike a
subscription a query is not decomposed into atomic rules, so any comparisons go, cycles too.

>>> from catalog.parser import parse
>>> from catalog.normalize import normalize
>>> from catalog.schema import FIGURE_1_SCHEMA, Schema
>>> schema = Schema(); schema.add(FIGURE_1_SCHEMA)
>>> q = query_select(normalize(parse("search CycleProvider c register c where c.serverPort = 5874"), schema), "sqlite")
>>> " ".join(str(q).split()).split(" WHERE ", 1)[1]
'v0.class = :class_1 AND (EXISTS (SELECT :param_1 AS anon_1 FROM "HeldProperties" AS p0 WHERE p0.uri_reference = v0.uri_reference AND p0.property = :property_1 AND p0.num = :param_2))'
"""

from __future__ import annotations

from sqlalchemy import literal, select, union
from sqlalchemy.sql import Select

from catalog.normalize import Conjunct, Join, Selection, Term
from catalog.local_tables import HELD, HELD_PROPERTIES, MATCHES
from catalog.sqlops import compare


def query_select(conjuncts: list[Conjunct], dialect: str) -> Select:
    """One statement giving the URI references the conjuncts (an ``or`` of them) register."""
    return union(*(_conjunct(c, dialect) for c in conjuncts)) if len(conjuncts) > 1 else _conjunct(conjuncts[0], dialect)


def _conjunct(conj: Conjunct, dialect: str) -> Select:
    held = {v.name: HELD.alias(f"v{i}") for i, v in enumerate(conj.vars)}
    conds = []
    for v in conj.vars:
        conds.append(held[v.name].c["class"] == v.cls)
        if v.rule is not None:
            conds.append(select(MATCHES.c.sub_id).where(
                MATCHES.c.sub_id == v.rule, MATCHES.c.uri_reference == held[v.name].c.uri_reference)
                .correlate_except(MATCHES).exists())
    counter = iter(range(10**6))

    def side(term: Term, where: list, aliases: list) -> tuple:
        if term.prop is None:
            return held[term.var].c.uri_reference, None
        p = HELD_PROPERTIES.alias(f"p{next(counter)}")
        aliases.append(p)
        where += [p.c.uri_reference == held[term.var].c.uri_reference, p.c.property == term.prop]
        return p.c.value, p.c.num

    for pred in conj.predicates:
        where: list = []
        aliases: list = []
        if isinstance(pred, Selection):
            value, num = side(pred.term, where, aliases)
            numeric = isinstance(pred.value, float)
            const = literal(pred.value if not numeric else "")
            where.append(compare(dialect, pred.op, value, num, const, literal(pred.value) if numeric else None, numeric))
        else:
            assert isinstance(pred, Join)
            lv, ln = side(pred.left, where, aliases)
            rv, rn = side(pred.right, where, aliases)
            where.append(compare(dialect, pred.op, lv, ln, rv, rn, False))
        if aliases:
            # Explicitly correlated: inside a UNION (an ``or``) SQLAlchemy would not do it alone.
            conds.append(select(literal(1)).select_from(*aliases).where(*where).correlate_except(*aliases).exists())
        else:
            conds += where
    return select(held[conj.register].c.uri_reference).where(*conds)
