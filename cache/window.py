"""The time window of a query: one more interval attribute of every region (the notes,
section 7), so that "the last hour" is interval containment and a region is complete for
its window. Items carry their time, given by the source.

>>> w = Window.of((100, 200))
>>> w.contains(100), w.contains(200.5)
(True, False)
>>> [(lit.atom.op, lit.atom.value) for lit in w.lits()]
[('>=', 100.0), ('<=', 200.0)]
>>> Window(100, 200, lo_open=True).closed_integers()
(101, 200)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cache.atoms import TIME, Atom, Column, Lit
from cache.errors import WindowError
from cache.numbers import NumRange

TIME_COLUMN = Column("", TIME)
UNBOUNDED = 1 << 62
"""An integer beyond any time (milliseconds since 1970 included)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The times from ``lo`` to ``hi``, each bound closed unless marked open."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False

    @classmethod
    def of(cls, window: "Window | tuple[float, float]") -> "Window":
        """A window from a ``Window`` or a closed ``(t1, t2)``; :class:`WindowError` if it
        holds no time."""
        w = window if isinstance(window, Window) else cls(*_pair(window))
        if any(math.isnan(x) for x in (w.lo, w.hi)) or w.lo > w.hi or (w.lo == w.hi and (w.lo_open or w.hi_open)):
            raise WindowError(f"the window {w} holds no time")
        return w

    @classmethod
    def from_range(cls, r: NumRange) -> "Window":
        """The window of a time range (build-ranges of a conjunction's time literals)."""
        return cls(r.lo, r.hi, r.lo_open, r.hi_open)

    def contains(self, t: float) -> bool:
        above = t > self.lo or (t == self.lo and not self.lo_open)
        return above and (t < self.hi or (t == self.hi and not self.hi_open))

    def lits(self) -> tuple[Lit, ...]:
        """The window as time literals (an infinite bound says nothing)."""
        out = []
        if self.lo != -math.inf:
            out.append(Lit(Atom(TIME_COLUMN, ">" if self.lo_open else ">=", float(self.lo), _text(self.lo))))
        if self.hi != math.inf:
            out.append(Lit(Atom(TIME_COLUMN, "<" if self.hi_open else "<=", float(self.hi), _text(self.hi))))
        return tuple(out)

    def closed_integers(self) -> tuple[int, int]:
        """The first and last integer time inside (for a source with integer times, such
        as the archive's milliseconds); an infinite bound becomes :data:`UNBOUNDED`."""
        lo = -UNBOUNDED if self.lo == -math.inf else (
            math.floor(self.lo) + 1 if self.lo_open or self.lo != math.floor(self.lo) else int(self.lo))
        hi = UNBOUNDED if self.hi == math.inf else (
            math.ceil(self.hi) - 1 if self.hi_open or self.hi != math.ceil(self.hi) else int(self.hi))
        return lo, hi

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"


def _pair(window) -> tuple[float, float]:
    try:
        t1, t2 = window
        return float(t1), float(t2)
    except (TypeError, ValueError):
        raise WindowError(f"a window is (t1, t2) or a Window, not {window!r}") from None


def _text(x: float) -> str:
    return repr(float(x))
