"""Errors of the archive, all under :class:`ArchiveError` (a ``ValueError``), so a caller
catches one class and reads the message."""

from __future__ import annotations


class ArchiveError(ValueError):
    """Root of every error the archive raises on a bad call or bad data."""


class VersionError(ArchiveError):
    """A version that does not strictly increase (versions are one writer's clock)."""


class KeyStateError(ArchiveError):
    """Inserting a key that is live, or deleting one that is not."""


class KeyTypeError(ArchiveError):
    """A key that is not a tuple of numbers, strings and bytes comparable with the others."""


class EntryTooLargeError(ArchiveError):
    """An entry (key + value) larger than a page can hold under the structure's conditions."""


class IntervalError(ArchiveError):
    """An empty or negative interval (``lo >= hi``) or a bound outside the domain."""


class ParameterError(ArchiveError):
    """Parameters that break a structure's conditions (e.g. MVBT ``d``/``e``)."""


class StorageError(ArchiveError):
    """A page file that is not one of ours, was written with other parameters, or is damaged."""
