"""Comparisons as SQL expressions, the same for triggering rules (a ``FilterData`` row against a
``FilterRules_*`` row), join rules and local queries. Strings compare as strings; a number
compares only with values that read as numbers (the ``num`` columns), so ``92`` equals ``92.0``
but never ``'92 MB'``; ``contains`` is a case-sensitive substring test.

>>> from sqlalchemy import column, create_engine, literal, select
>>> e = create_engine("sqlite://")
>>> with e.connect() as con:
...     con.execute(select(contains(e.dialect.name, column("a"), column("b")))
...                 .select_from(select(literal("uni-passau.de").label("a"), literal("passau").label("b")).subquery())).scalar()
1
"""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.sql import ColumnElement


def contains(dialect: str, haystack, needle) -> ColumnElement:
    """``needle`` occurs in ``haystack`` (a plain substring test; LIKE would read ``%`` and ``_``
    in the needle as wildcards)."""
    position = func.strpos(haystack, needle) if dialect == "postgresql" else func.instr(haystack, needle)
    return position > 0


def compare(dialect: str, op: str, left_value, left_num, right_value, right_num, numeric: bool) -> ColumnElement:
    """``left op right``: ``numeric`` compares the ``num`` readings (a missing one never matches),
    else the strings (ordered operators always compare numbers)."""
    if op == "contains":
        return contains(dialect, left_value, right_value)
    if numeric or op in ("<", "<=", ">", ">="):
        left, right = left_num, right_num
    else:
        left, right = left_value, right_value
    return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[op]

