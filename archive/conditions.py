"""The MVBT's version conditions and the checks on its parameters (thesis section 3.2.1
for fixed-length entries, section 4.1.3 for the variable-length version).

Fixed length: ``B = k * d`` entries per page; the weak version condition asks every
non-root node for 0 or at least ``d`` live entries per version, the strong one for
``(1 + e) d`` to ``(k - e) d`` live entries right after a version split; a key split
needs ``k >= 1/c + (1 + 1/c) e - 1/d`` and a merge ``e <= 1 - 1/d`` (``c = 0.5``).

>>> fixed(6, 2, 0.5)
Conditions(capacity=6, weak=2, strong_lo=3.0, strong_hi=5.0)
>>> fixed(6, 2, 0.6)
Traceback (most recent call last):
...
archive.errors.ParameterError: e = 0.6 breaks the key split constraint k >= 1/c + (1 + 1/c) e - 1/d (3 < 3.3)

Variable length: ``d`` is a fraction of the page's bytes (``0 < d < 0.5``); the bounds
become ``(1 + e) d`` and ``1 - e d`` of the page, a key split needs
``1 - e d > (1/c)(1 + e) d`` and a merge ``e < 1``.

>>> v = variable(4000, 0.25, 0.5)
>>> v.strong_lo / 4000, v.strong_hi / 4000
(0.375, 0.875)
"""

from __future__ import annotations

from typing import NamedTuple

from archive.errors import ParameterError

FILL = 0.5
"""``c``: the B+-tree fill factor a key split must guarantee."""


class Conditions(NamedTuple):
    """Bounds in the node's measure (entries or bytes): ``capacity`` per page, ``weak``
    live minimum of a non-root node, ``strong_lo``..``strong_hi`` after a version split."""

    capacity: float
    weak: float
    strong_lo: float
    strong_hi: float


def fixed(capacity: int, d: int, e: float) -> Conditions:
    """Conditions of the fixed-length MVBT with ``B = capacity = k d`` entries per page."""
    if d < 1 or capacity % d:
        raise ParameterError(f"B = {capacity} is not a multiple k * d of d = {d}")
    k = capacity // d
    need = 1 / FILL + (1 + 1 / FILL) * e - 1 / d
    if k < need - 1e-12:
        raise ParameterError(f"e = {e} breaks the key split constraint k >= 1/c + (1 + 1/c) e - 1/d "
                             f"({k} < {need:g})")
    if e > 1 - 1 / d + 1e-12:
        raise ParameterError(f"e = {e} breaks the merge constraint e <= 1 - 1/d = {1 - 1 / d:g}")
    return Conditions(capacity, d, (1 + e) * d, (k - e) * d)


def variable(capacity: float, d: float, e: float) -> Conditions:
    """Conditions of the variable-length MVBT with ``capacity`` data bytes per page."""
    if not 0 < d < 0.5:
        raise ParameterError(f"d = {d} must be a fraction of a page in (0, 0.5)")
    if not 0 < e < 1:
        raise ParameterError(f"e = {e} breaks the merge constraint 0 < e < 1")
    if not 1 - e * d > (1 + e) * d / FILL:
        raise ParameterError(f"d = {d}, e = {e} break the key split constraint 1 - e d > (1/c)(1 + e) d "
                             f"({1 - e * d:g} <= {(1 + e) * d / FILL:g})")
    return Conditions(capacity, d * capacity, (1 + e) * d * capacity, (1 - e * d) * capacity)


def max_entry(c: Conditions) -> int:
    """The largest entry (bytes) for which every split and merge can meet the bounds:
    a merge of two nodes at ``weak`` minus one entry must reach ``strong_lo``, and the
    halves of a key split must each reach it."""
    merge = 2 * c.weak - c.strong_lo
    split = c.strong_hi - 2 * c.strong_lo
    return int(min(merge, split))
