"""Where a node's entries are cut into pieces, by bytes (thesis section 4.1.2, the split
strategies of XXL's ``VariableLengthBPlusTree``):

* ``"simple"``: at the average load, the fixed-length B+-tree split moved to bytes;
* ``"shortest"``: among the cuts that leave every piece between the bounds, the one whose
  separator key is shortest (section 4.1.2: searched between ``b`` and ``B - b``);
* ``"prefix"``: the same with the shortest separating prefix as separator (simple
  prefix B+-tree; the caller measures that separator).

>>> partition([10] * 10, lo=20, hi=60, strategy="simple")
[5]
>>> partition([10] * 10, lo=20, hi=60, strategy="shortest", sep_len=lambda p: 1 if p == 4 else 5)
[4]
>>> partition([10] * 10, lo=10, hi=40, strategy="simple")
[2, 5, 7]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from bisect import bisect_left, bisect_right
from itertools import accumulate

from archive.errors import ParameterError

STRATEGIES = ("simple", "shortest", "prefix")


def check_strategy(name: str) -> str:
    if name not in STRATEGIES:
        raise ParameterError(f"unknown split strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return name


def pieces_for(total: float, lo: float, hi: float, target: float | None = None) -> int:
    """How many pieces of ``total`` bytes keep each between ``lo`` and ``hi``, aiming at ``target``."""
    if total <= hi:
        return 1
    target = target or (lo + hi) / 2
    n = max(2, round(total / target))
    while total / n > hi:
        n += 1
    while n > 2 and total / (n - 1) <= hi and total / n < lo:
        n -= 1
    return n


def partition(sizes: Sequence[int], lo: float, hi: float, strategy: str = "simple",
              sep_len: Callable[[int], int] | None = None, pieces: int | None = None,
              target: float | None = None) -> list[int]:
    """Cut positions (entry indexes where a new piece starts) splitting entries of
    ``sizes`` into pieces of ``lo``..``hi`` bytes each (best effort when the entries'
    granularity allows none); ``sep_len(p)`` is the separator length of a cut at ``p``."""
    total = sum(sizes)
    n = pieces or pieces_for(total, lo, hi, target)
    if n <= 1 or len(sizes) < 2:
        return []
    n = min(n, len(sizes))
    pre = [0, *accumulate(sizes)]
    cuts: list[int] = []
    start = 0
    for k in range(1, n):
        left = n - k                      # pieces still to come after this cut
        ideal = pre[start] + (total - pre[start]) / (left + 1)
        last = len(sizes) - left          # leave at least one entry per later piece
        # Only cuts whose piece is within [lo, hi] qualify: a window of the prefix sums.
        a = max(start + 1, bisect_left(pre, pre[start] + lo))
        b = min(last, bisect_right(pre, pre[start] + hi) - 1)
        ok = [p for p in range(a, b + 1) if left * lo <= total - pre[p] <= left * hi]
        if not ok:
            near = min(max(bisect_left(pre, ideal), start + 1), last)
            cands = [p for p in (near - 1, near, near + 1) if start < p <= last]
            p = min(cands, key=lambda q: abs(pre[q] - ideal))
        elif strategy == "simple" or sep_len is None:
            p = min(ok, key=lambda q: abs(pre[q] - ideal))
        else:
            p = min(ok, key=lambda q: (sep_len(q), abs(pre[q] - ideal)))
        cuts.append(p)
        start = p
    return cuts


def pieces(items: list, cuts: Sequence[int]) -> list[list]:
    """``items`` cut at ``cuts``."""
    bounds = [0, *cuts, len(items)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]
