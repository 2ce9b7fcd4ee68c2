"""XPath 1.0 value rules, bit-for-bit as libxml2 (lxml's XPath engine) applies them.

>>> number("  12 "), number("1e3"), number("+1")
(12.0, 1000.0, nan)
>>> compare_string("=", "5")("5.0"), compare_number("=", 5.0)("5.0")
(False, True)
"""

from __future__ import annotations

import operator
import re
from typing import Callable

NAN = float("nan")
_BLANK = " \t\n\r"
MAX_FRAC = 20  # libxml2 reads at most this many significant fraction digits
# ASCII digits only, as libxml2 reads them (\d would take any Unicode digit).
_NUMBER = re.compile(r"(-?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]*))?$")

OPS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def number(s: str) -> float:
    """XPath ``number(string)`` as libxml2 computes it (``xmlXPathStringEvalNumber``):
    digits are accumulated in a double, the fraction is divided by a power of ten and
    an exponent (a libxml2 extension) multiplies by ``pow(10, e)``; so ``'1.5e-1'``
    is ``0.15000000000000002`` there too."""
    m = _NUMBER.match(s.strip(_BLANK))
    if m is None:
        return NAN
    sign, whole, frac, esign, exp = m.groups()
    if not whole and not frac:
        return NAN  # '', '-', '.', '-.' and the like
    ret = 0.0
    for ch in whole:
        ret = ret * 10 + (ord(ch) - 48)
    if frac:
        digits = frac.lstrip("0")
        n = len(frac) - len(digits)  # leading zeros count towards the divisor
        fraction = 0.0
        for ch in digits[:MAX_FRAC]:
            fraction = fraction * 10 + (ord(ch) - 48)
        n += min(len(digits), MAX_FRAC)
        ret += fraction / 10.0**n
    if exp is not None:
        e = min(int(exp), 1000000) if exp else 0
        e = -e if esign == "-" else e
        try:
            scale = 10.0**e
        except OverflowError:
            scale = float("inf")
        ret = ret * scale
    return -ret if sign else ret


def compare_string(op: str, literal: str) -> Callable[[str], bool]:
    """Test a node's string-value against a string literal with ``op`` (XPath: ``=``
    and ``!=`` compare strings, the relational operators compare numbers)."""
    if op == "=":
        return literal.__eq__
    if op == "!=":
        return literal.__ne__
    return compare_number(op, number(literal))


def compare_number(op: str, value: float) -> Callable[[str], bool]:
    """Test a node's string-value, converted with ``number()``, against ``value``."""
    fn = OPS[op]
    return lambda s: fn(number(s), value)
