"""Errors of the semantic cache, all under :class:`CacheError` (a ``ValueError``), so
that a caller catches one class and reads the message.

>>> raise UnsupportedConstructError("position()", 4)
Traceback (most recent call last):
...
cache.errors.UnsupportedConstructError: the cache cannot reason about position() at column 4
"""

from __future__ import annotations


class CacheError(ValueError):
    """Root of every error the cache raises on a bad call or bad data."""


class ConditionError(CacheError):
    """A condition the cache refuses; ``construct`` names what, ``column`` (1-based,
    ``None`` when not tied to a place) where it starts."""

    def __init__(self, message: str, construct: str, column: int | None) -> None:
        super().__init__(message if column is None else f"{message} at column {column}")
        self.construct, self.column = construct, column

    def shifted(self, by: int) -> "ConditionError":
        """The same error, of the same class, in a longer text where the condition starts
        ``by`` characters further on (its column, in the message too, moved by ``by``).

        >>> ConditionSyntaxError("unexpected ']'", 3).shifted(10).column
        13
        """
        if self.column is None:
            return self
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.column = self.column + by
        out.args = (f"{str(self).rsplit(' at column ', 1)[0]} at column {out.column}",)
        return out


class ConditionSyntaxError(ConditionError):
    """A condition that is not XPath predicate text of the profile language."""

    def __init__(self, message: str, column: int | None) -> None:
        super().__init__(message, "syntax", column)


class UnsupportedConstructError(ConditionError):
    """Valid XPath the cache cannot reason about (positions, ``starts-with()``, nested
    predicates, ``//`` and ``*`` steps, ...)."""

    def __init__(self, construct: str, column: int | None, why: str = "") -> None:
        super().__init__(f"the cache cannot reason about {construct}{why}", construct, column)


class ConditionTooComplexError(ConditionError):
    """A condition whose disjunctive normal form is too large to keep."""

    def __init__(self, conjuncts: int, limit: int) -> None:
        super().__init__(f"the condition expands to more than {limit} conjunctions in disjunctive normal form "
                         f"({conjuncts} so far)", "disjunctive normal form", None)


class ConceptError(CacheError):
    """A concept that is not an absolute element path without predicates."""


class WindowError(CacheError):
    """A time window the cache cannot use: empty, on a cache without times, or missing on one with them."""


class SourceError(CacheError):
    """A source that answered with something other than ``(item_id, xml_bytes[, time])``."""
