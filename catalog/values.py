"""Literal values: MDV stores every value and constant as a string and converts numbers when it
compares them (paper section 3.3.4); here the numeric reading is kept beside the string.

>>> number(" 92 "), number("6e2"), number("92 MB"), number("nan")
(92.0, 600.0, None, None)
>>> quote("it's"), constant_text(64.0), constant_text(0.5)
("'it''s'", '64', '0.5')
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def number(value: str) -> float | None:
    """The number a literal spells (decimal, optionally signed, optionally with an exponent;
    surrounding blanks ignored), or ``None``: ``inf``, ``nan`` and hex are not numbers here."""
    text = value.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def quote(text: str) -> str:
    """A string constant as rule text: single quotes, a quote inside doubled."""
    return "'" + text.replace("'", "''") + "'"


def constant_text(value: str | float) -> str:
    """The canonical text of a constant, so that ``64`` and ``64.0`` make one atomic rule."""
    if isinstance(value, str):
        return quote(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
