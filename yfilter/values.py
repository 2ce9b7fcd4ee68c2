"""XPath 1.0 value rules, bit-for-bit as libxml2 (lxml's XPath engine) applies them.

:func:`number` is XPath ``number(string)`` as libxml2 computes it
(``xmlXPathStringEvalNumber``: ASCII digits accumulated in a double, at most 20
significant fraction digits divided by a power of ten, an exponent, a libxml2
extension, multiplying by ``pow(10, e)``; so ``'1.5e-1'`` is
``0.15000000000000002`` there too). It is defined once, in C
(``yfilter/csrc/number.c``), and both runtimes call it; the relational operators are
numbered once too, in ``yfilter/csrc/matcher.c`` (:data:`RELATIONS`, read from the C
module). ``tests/yfilter/test_one_definition.py`` checks them against a Python
transcription of libxml2 and against lxml itself.

>>> number("  12 "), number("1e3"), number("+1")
(12.0, 1000.0, nan)
>>> compare_string("=", "5")("5.0"), compare_number("=", 5.0)("5.0")
(False, True)
"""

from __future__ import annotations

import operator
from typing import Callable

from yfilter._matcher import CODES
from yfilter._matcher import number as number  # the one definition: csrc/number.c

NAN = float("nan")

OPS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# The relational operators as the C matcher numbers them (its REL_* enum).
RELATIONS: dict[str, int] = dict(CODES["rel"])
assert set(RELATIONS) == set(OPS), "yfilter/csrc/matcher.c and OPS name other operators"
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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
