"""build-ranges for numbers: the thesis' integer ranges (section 3.4, Figs. 8-9) as real
intervals with open and closed bounds, because XPath compares ``<``, ``<=``, ``>``, ``>=``
(and ``=`` with a number) on ``number(value)``, a double.

A range is the interval between ``lo`` and ``hi`` (each bound open or closed; the
infinities are values a double can hold, so the full range is the closed ``[-inf, +inf]``),
minus the points in ``uneq``, plus NaN when ``nan`` is set: ``number('abc')`` is NaN, which
no comparison but ``!=`` accepts. A range is kept canonical (an excluded point on a closed
bound opens the bound, one outside the interval is forgotten), so two ranges are equal
exactly when they hold the same numbers; ``None`` is the empty range.

>>> compare(">", 1800).meet(compare("<=", 1900))
NumRange(lo=1800, lo_open=True, hi=1900, hi_open=False, uneq=frozenset(), nan=False)
>>> compare("<", 5, negated=True)          # not(@a < 5): NaN, or at least 5
NumRange(lo=5, lo_open=False, hi=inf, hi_open=False, uneq=frozenset(), nan=True)
>>> compare(">=", 5).meet(compare("<", 5)) is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

INF = math.inf
OPS = ("=", "!=", "<", "<=", ">", ">=")
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
"""The complementary operator on non-NaN numbers (section 5.3's negation)."""


@dataclass(frozen=True, slots=True)
class NumRange:
    lo: float = -INF
    lo_open: bool = False
    hi: float = INF
    hi_open: bool = False
    uneq: frozenset[float] = field(default_factory=frozenset)
    nan: bool = True

    @property
    def interval_empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open))

    def meet(self, other: "NumRange") -> "NumRange | None":
        """The numbers both ranges hold (``None``: none)."""
        if other == EVERY or other == self:
            return self
        if self.lo > other.lo or (self.lo == other.lo and self.lo_open):
            lo, lo_open = self.lo, self.lo_open
        else:
            lo, lo_open = other.lo, other.lo_open
        if self.hi < other.hi or (self.hi == other.hi and self.hi_open):
            hi, hi_open = self.hi, self.hi_open
        else:
            hi, hi_open = other.hi, other.hi_open
        return _canonical(lo, lo_open, hi, hi_open, self.uneq | other.uneq, self.nan and other.nan)

    def allows(self, x: float) -> bool:
        """Is ``x`` (a double, perhaps NaN) in the range?"""
        if math.isnan(x):
            return self.nan
        if self.interval_empty or x in self.uneq:
            return False
        above = x > self.lo or (x == self.lo and not self.lo_open)
        below = x < self.hi or (x == self.hi and not self.hi_open)
        return above and below


EVERY = NumRange()
"""Every double and NaN: what a value's ``number()`` may be before any subgoal."""

REAL = NumRange(nan=False)
"""Every double but NaN: a time, which is always a number."""

_EMPTY_INTERVAL = (INF, True, -INF, True)


def compare(op: str, c: float, negated: bool = False) -> NumRange | None:
    """The numbers ``n`` for which XPath's ``n op c`` is true (``negated``: false).
    A NaN literal (``number('abc')``) makes every comparison false but ``!=``.

    >>> compare("!=", 3)
    NumRange(lo=-inf, lo_open=False, hi=inf, hi_open=False, uneq=frozenset({3}), nan=True)
    """
    if op not in OPS:
        raise ValueError(f"unknown numeric operator {op!r}")
    if math.isnan(c):
        true = op == "!="
        return EVERY if true != negated else None
    if negated:
        # On numbers not(n op c) is the complementary operator; it also holds for NaN,
        # except not(n != c), which only c satisfies.
        inner = compare(NEGATED[op], c)
        return NumRange(inner.lo, inner.lo_open, inner.hi, inner.hi_open, inner.uneq, op != "!=")
    if op == "=":
        return NumRange(c, False, c, False, nan=False)
    if op == "!=":
        return NumRange(uneq=frozenset({c}))
    if op == "<":
        return NumRange(hi=c, hi_open=True, nan=False)
    if op == "<=":
        return NumRange(hi=c, nan=False)
    if op == ">":
        return NumRange(lo=c, lo_open=True, nan=False)
    return NumRange(lo=c, nan=False)


def _canonical(lo: float, lo_open: bool, hi: float, hi_open: bool, uneq: frozenset[float], nan: bool
               ) -> NumRange | None:
    if lo > hi or (lo == hi and (lo_open or hi_open)):
        return NumRange(*_EMPTY_INTERVAL, frozenset(), True) if nan else None
    if lo in uneq:
        lo_open = True
    if hi in uneq:
        hi_open = True
    if lo == hi and (lo_open or hi_open):
        return NumRange(*_EMPTY_INTERVAL, frozenset(), True) if nan else None
    inside = frozenset(z for z in uneq if lo < z < hi)
    return NumRange(lo, lo_open, hi, hi_open, inside, nan)
