"""Interval conventions and the temporal difference of thesis section 2.1 (the notes'
worked example of the point and interval models).

The archive's lifespans and the RI-tree's intervals are half-open ``[a, b)``: two of
them meet when ``a1 < b2 and a2 < b1``. Closed ``[a, b]`` meet when ``a1 <= b2 and
a2 <= b1``. Under the point model an interval stands for its set of time points, so a
difference is taken point by point; under the interval model a row is an atomic value
and a difference removes only equal rows.

>>> meet_half_open((1, 5), (5, 9)), meet_closed((1, 5), (5, 9))
(False, True)
>>> r1 = [(20, 30), (31, 40), (41, 50)]
>>> difference_points(r1, [(26, 32)])
[(20, 25), (33, 40), (41, 50)]
>>> coalesce(difference_points(r1, [(26, 32)]))
[(20, 25), (33, 50)]
>>> difference_intervals(r1, [(26, 32)])
[(20, 30), (31, 40), (41, 50)]
"""

from __future__ import annotations

Interval = tuple[int, int]


def meet_half_open(x: Interval, y: Interval) -> bool:
    return x[0] < y[1] and y[0] < x[1]


def meet_closed(x: Interval, y: Interval) -> bool:
    return x[0] <= y[1] and y[0] <= x[1]


def difference_points(rows: list[Interval], minus: list[Interval]) -> list[Interval]:
    """Point-model difference of closed integer intervals, row by row (uncoalesced):
    each row loses the points any row of ``minus`` covers."""
    out = []
    for lo, hi in rows:
        parts = [(lo, hi)]
        for mlo, mhi in minus:
            nxt = []
            for a, b in parts:
                if mhi < a or b < mlo:
                    nxt.append((a, b))
                    continue
                if a < mlo:
                    nxt.append((a, mlo - 1))
                if mhi < b:
                    nxt.append((mhi + 1, b))
            parts = nxt
        out.extend(parts)
    return out


def coalesce(rows: list[Interval]) -> list[Interval]:
    """Merge closed integer intervals that overlap or touch (snapshot-equivalent)."""
    out: list[list[int]] = []
    for a, b in sorted(rows):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def difference_intervals(rows: list[Interval], minus: list[Interval]) -> list[Interval]:
    """Interval-model difference: rows equal to a row of ``minus`` go, the rest stay."""
    gone = set(minus)
    return [r for r in rows if r not in gone]
