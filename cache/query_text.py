"""A query written as one XPath, ``concept[condition]``: the element path the query
selects (the thesis' concept, section 4.2) and one predicate over that element (its
conjunction of constant selections, section 5.2), as the query service takes it
(``POST /queries``, ``onyx query``). Without a predicate the query asks for every
element of the concept (the condition ``.``). Errors name the column in the whole text.

>>> concept, condition = split_query("/nitf/head/pubdata[@edition.area = 'SF' and @position.sequence <= 3]")
>>> concept, str(condition)
('/nitf/head/pubdata', "@edition.area = 'SF' and @position.sequence <= 3")
>>> split_query("$msg/nitf")[0], str(split_query("$msg/nitf")[1])
('/nitf', '.')
>>> split_query("/nitf/head/pubdata[@a = 1 and position() = 2]")
Traceback (most recent call last):
...
cache.errors.UnsupportedConstructError: the cache cannot reason about position() at column 31
"""

from __future__ import annotations

from cache.concept import concept_path
from cache.condition import Condition
from cache.errors import ConditionError, ConditionSyntaxError

EVERY_ELEMENT = "."
"""The condition of a query without a predicate."""


def split_query(text: str) -> tuple[str, Condition]:
    """The canonical concept and the parsed condition of ``text``; a
    :class:`cache.errors.ConceptError` for a bad path, a
    :class:`cache.errors.ConditionError` (with the column in ``text``) for a bad predicate."""
    if not isinstance(text, str):
        raise ConditionSyntaxError(f"a query is XPath text, not {type(text).__name__}", None)
    start = text.find("[")
    if start < 0:
        return concept_path(text), Condition.parse(EVERY_ELEMENT)
    body = text.rstrip()
    if not body.endswith("]"):
        raise ConditionSyntaxError("a query is an element path and one predicate: it ends with the predicate's ']'",
                                   len(body) + 1)
    concept = concept_path(text[:start])
    try:
        return concept, Condition.parse(body[start + 1:-1])
    except ConditionError as exc:
        raise exc.shifted(start + 1) from None
