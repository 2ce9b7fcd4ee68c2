"""match-type of two conjunctions and the staged remainder ``q AND NOT c`` (thesis
sections 3.4, 5.1 and 5.3).

``q`` and ``c`` are disjoint when ``q AND c`` is unsatisfiable, and ``q`` implies ``c``
when ``q AND NOT c`` is (Fig. 8: containing when match-type(q, NOT c) is disjoint).
``NOT c`` of a conjunction ``b1 AND ... AND bl`` is taken *staged* (section 5.3): the
parts ``q AND b1 AND ... AND b(i-1) AND NOT bi`` are pairwise disjoint and together are
``q AND NOT c``; unsatisfiable parts are dropped, the others reduced to minimal form.

>>> from cache.condition import Condition
>>> from cache.conjunct import text
>>> [c] = Condition.parse("@K = 'Gogh' and @M = 'Blumen' and @T = 'Malerei'").dnf
>>> [q] = Condition.parse("@K = 'Gogh'").dnf
>>> conjunct_match(q, c)
'contained'
>>> [text(p) for p in subtract(q, c)]
["@K = 'Gogh' and not(@M = 'Blumen')", "@K = 'Gogh' and @M = 'Blumen' and not(@T = 'Malerei')"]
"""

from __future__ import annotations

from collections.abc import Sequence

from cache.conjunct import Conjunct, by_column, column_satisfiable, meet, simplify
from cache.errors import ConditionTooComplexError

EXACT, CONTAINING, CONTAINED, OVERLAPPING, DISJOINT = "exact", "containing", "contained", "overlapping", "disjoint"
MATCH_TYPES = (EXACT, CONTAINING, CONTAINED, OVERLAPPING, DISJOINT)
"""The five outcomes, best first (section 3.3, Table 1)."""


def _pieces(q: Conjunct, c: Conjunct) -> list[Conjunct]:
    """The satisfiable staged parts of ``q AND NOT c``, for ``q AND c`` satisfiable: then
    part i is satisfiable exactly when the column of ``bi`` is (:func:`column_satisfiable`)."""
    groups = by_column(q)
    out = []
    for i, b in enumerate(c):
        col = b.atom.column
        group = groups.setdefault(col, [])
        if column_satisfiable(col, group + [b.negate()]):
            out.append(q + c[:i] + (b.negate(),))
        group.append(b)
    return out


def relate(q: Conjunct, c: Conjunct) -> tuple[str, list[Conjunct]]:
    """match-type(q, c) and the remainder ``q AND NOT c`` (as :func:`subtract`) at once,
    for two satisfiable conjunctions."""
    if not meet(q, c):
        return DISJOINT, [q]
    rest = _pieces(q, c)
    c_in_q = not _pieces(c, q)
    if not rest:
        return (EXACT if c_in_q else CONTAINING), []
    return (CONTAINED if c_in_q else OVERLAPPING), [simplify(p) for p in rest]


def conjunct_match(q: Conjunct, c: Conjunct) -> str:
    """match-type(q, c) of two conjunctions: one of :data:`MATCH_TYPES` ("containing":
    ``c`` contains ``q``)."""
    return relate(q, c)[0]


def subtract(q: Conjunct, c: Conjunct) -> list[Conjunct]:
    """``q AND NOT c`` as staged, pairwise disjoint conjunctions in minimal form
    (``[q]`` itself when the two are disjoint, ``[]`` when ``c`` contains ``q``), for two
    satisfiable conjunctions."""
    if not meet(q, c):
        return [q]
    return [simplify(p) for p in _pieces(q, c)]


def subtract_all(parts: Sequence[Conjunct], minus: Sequence[Conjunct]) -> list[Conjunct]:
    """What of ``parts`` no conjunction of ``minus`` covers, as disjoint conjunctions."""
    out = list(parts)
    for c in minus:
        out = [p for part in out for p in subtract(part, c)]
        if not out:
            break
    return out


def disjoint_dnf(conjuncts: Sequence[Conjunct], limit: int) -> list[Conjunct]:
    """A query's own disjuncts made pairwise disjoint, by staged negation of the ones
    before (the notes, section 7: they may overlap, and each becomes a region);
    :class:`ConditionTooComplexError` beyond ``limit`` of them."""
    out: list[Conjunct] = []
    for d in conjuncts:
        out += subtract_all([d], out)
        if len(out) > limit:
            raise ConditionTooComplexError(len(out), limit)
    return out


def condition_match(q: Sequence[Conjunct], c: Sequence[Conjunct]) -> str:
    """match-type of two conditions in disjunctive normal form (either may have
    several conjunctions): the same five outcomes, on the sets of items they select."""
    if not any(meet(a, b) for a in q for b in c):
        return DISJOINT
    q_in_c, c_in_q = not subtract_all(q, c), not subtract_all(c, q)
    if q_in_c and c_in_q:
        return EXACT
    if q_in_c:
        return CONTAINING
    if c_in_q:
        return CONTAINED
    return OVERLAPPING
