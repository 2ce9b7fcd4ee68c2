"""One conjunction of literals: build-ranges over it (is it satisfiable?), its minimal
form, and its XPath text (thesis sections 3.4, 5.1 and 5.4).

build-ranges collects, per column, what *every* value must be (the negated literals:
``not(A)`` on a node set fails for each of its values) and what *some* value must be
(each positive literal). A column is satisfiable when

* ``single`` / ``first`` (no value or one): no positive literal (the value may be
  absent), or one value meets them all and every negation;
* ``one`` / ``time`` (exactly one value): one value meets everything;
* ``multi`` (any number of values): each positive literal has a value meeting it and
  every negation; distinct literals may use distinct values.

Columns are reasoned about independently, and a value's string and number apart
(:mod:`cache.values`): "unsatisfiable" is always right, "satisfiable" may be a false
alarm, which costs a region or a remainder that holds nothing, never an answer.

>>> from cache.atoms import Atom, Column, SINGLE
>>> d = Column("@D", SINGLE)
>>> q = (Lit(Atom(d, ">=", 1700.0, "1700")), Lit(Atom(d, "<=", 1900.0, "1900")))
>>> part = q + (Lit(Atom(d, "<=", 1800.0, "1800"), False),)      # q AND NOT c, thesis T1
>>> satisfiable(part), text(simplify(part))
(True, '@D > 1800 and @D <= 1900')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from cache.atoms import CONTAINS, EXISTS, FIRST, MULTI, SINGLE, TIME, Atom, Column, Lit
from cache.numbers import REAL, NumRange
from cache.values import EVERY, ValueSet

Conjunct = tuple[Lit, ...]

TRUE_TEXT = "."
"""XPath predicate text that every element satisfies (the empty conjunction)."""

_BASE = {TIME: ValueSet(numbers=REAL)}
"""What a column's values are before any literal (a time is never NaN)."""


def satisfiable(lits: Iterable[Lit]) -> bool:
    """build-ranges: ``False`` only if no item can satisfy every literal."""
    return all(column_satisfiable(col, group) for col, group in by_column(lits).items())


def by_column(lits: Iterable[Lit]) -> dict[Column, list[Lit]]:
    out: dict[Column, list[Lit]] = {}
    for lit in lits:
        out.setdefault(lit.atom.column, []).append(lit)
    return out


@lru_cache(maxsize=1 << 14)
def _columns(conj: Conjunct) -> dict[Column, frozenset[Lit]]:
    # Remembered: a lookup meets every region's conjunction with every part of the query.
    return {col: frozenset(group) for col, group in by_column(conj).items()}


def meet(q: Conjunct, c: Conjunct) -> bool:
    """Is ``q AND c`` satisfiable, for ``q`` and ``c`` each satisfiable? Only a column both
    constrain can fail."""
    qc, cc = _columns(q), _columns(c)
    if len(cc) < len(qc):
        qc, cc = cc, qc
    return all(_both_satisfiable(col.kind, group, cc[col]) for col, group in qc.items() if col in cc)


@lru_cache(maxsize=1 << 16)
def _both_satisfiable(kind: str, a: frozenset[Lit], b: frozenset[Lit]) -> bool:
    return _column_satisfiable(kind, a | b)


def column_satisfiable(column: Column, lits: Iterable[Lit]) -> bool:
    """build-ranges of one column's literals. Columns are independent, so a satisfiable
    conjunction with literals added on one column stays satisfiable exactly when that
    column does: the staged remainder and the minimal form test one column at a time."""
    return _column_satisfiable(column.kind, frozenset(lits))


@lru_cache(maxsize=1 << 16)
def _column_satisfiable(kind: str, lits: frozenset[Lit]) -> bool:
    # Remembered: lookups test the same few columns' literals over and over.
    every: ValueSet | None = _BASE.get(kind, EVERY)
    some: list[ValueSet | None] = []
    for lit in lits:
        values = lit.values()
        if lit.positive:
            some.append(values)
        elif every is not None:
            every = None if values is None else every.meet(values)
    if kind == MULTI:
        return all(s is not None and every is not None and every.meet(s) is not None for s in some)
    if kind in (SINGLE, FIRST) and not some:
        return True
    merged = every
    for s in some:
        merged = None if merged is None or s is None else merged.meet(s)
    return merged is not None


def simplify(lits: Sequence[Lit]) -> Conjunct:
    """The minimal form of a conjunction: duplicates and every literal the others imply
    are dropped (section 5.4: subgoal order and redundancy do not matter). Each drop is
    exact, whatever the precision of :func:`satisfiable`; an unsatisfiable conjunction
    is left as it is."""
    out = list(dict.fromkeys(lits))
    if not satisfiable(out):
        return tuple(out)
    dropped: set[Lit] = set()
    for col, group in by_column(out).items():
        i = 0
        while i < len(group):
            if column_satisfiable(col, group[:i] + group[i + 1:] + [group[i].negate()]):
                i += 1
            else:
                dropped.add(group.pop(i))
    return tuple(lit for lit in out if lit not in dropped)


def written(lit: Lit, context: Sequence[Lit]) -> Atom | None:
    """The positive atom that says the same as the negated ``lit`` in the satisfiable
    conjunction ``context`` + ``lit`` (the thesis' ``M != 'Menschen'`` for
    ``not(M = 'Menschen')``), or ``None`` where only ``not(...)`` is right: for a column
    with at most one value, when the others already require a value there (and a
    number, for numeric operators)."""
    col = lit.atom.column
    if lit.positive or col.kind in (MULTI, TIME):
        return None
    other = lit.atom.complement()
    same = [x for x in context if x.atom.column == col]
    if other is None or column_satisfiable(col, [*same, lit, Lit(other, False)]):
        return None
    return other


_GROUP = {EXISTS: 0, "=": 1, ">": 2, ">=": 2, "<": 3, "<=": 3, "!=": 4, CONTAINS: 5}


def text(lits: Sequence[Lit]) -> str:
    """XPath predicate text of the conjunction (its time literals left out): negations
    written with the thesis' operators where :func:`written` allows, the minimal form of
    that, then per column in order of appearance: equalities, lower bounds, upper
    bounds, inequalities, substrings, negations; :data:`TRUE_TEXT` when nothing is left."""
    out = [lit for lit in lits if lit.atom.column.kind != TIME]
    for i, lit in enumerate(out):
        atom = written(lit, out[:i] + out[i + 1:])
        if atom is not None:
            out[i] = Lit(atom)
    columns: dict[Column, int] = {}
    keyed = []
    for i, lit in enumerate(simplify(out)):
        order = columns.setdefault(lit.atom.column, len(columns))
        keyed.append(((order, _GROUP[lit.atom.op] if lit.positive else 6, i), lit.text()))
    return " and ".join(t for _, t in sorted(keyed)) or TRUE_TEXT


def time_range(lits: Iterable[Lit]) -> NumRange | None:
    """The times the conjunction allows (``None``: none)."""
    out: NumRange | None = REAL
    for lit in lits:
        if lit.atom.column.kind == TIME and out is not None:
            values = lit.values()
            out = None if values is None else out.meet(values.numbers)
    return out
