"""Errors of the catalog, all under :class:`CatalogError` (a ``ValueError``), so that a caller
catches one class and reads the message."""

from __future__ import annotations


class CatalogError(ValueError):
    """Root of every error the catalog raises on a bad call or bad input."""


class SchemaError(CatalogError):
    """An RDF Schema that cannot be read, or that contradicts what is registered already."""


class DocumentError(CatalogError):
    """An RDF document that cannot be read or does not conform to the schema."""


class RuleError(CatalogError):
    """A rule that is not in the language or not valid against the schema.

    ``position`` is the 0-based character offset in the rule text, ``construct`` names what is
    wrong there (``"class"``, ``"property"``, ``"comparison"``, ...).

    >>> str(RuleError("unknown class Foo", 7, "class"))
    'unknown class Foo (class at position 7)'
    """

    def __init__(self, message: str, position: int, construct: str) -> None:
        super().__init__(f"{message} ({construct} at position {position})")
        self.message = message
        self.position = position
        self.construct = construct


class SubscriptionError(CatalogError):
    """An unknown subscription id or repository name, or one that is taken already."""
