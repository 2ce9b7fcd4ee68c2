"""Errors raised by the engine.

``ProfileError`` is raised at registration for anything outside the profile
language; its message names the construct and the 1-based column where it starts::

    >>> from yfilter.parser import parse
    >>> parse("/nitf/head/parent::x")
    Traceback (most recent call last):
    ...
    yfilter.errors.ProfileError: unsupported axis 'parent::' at column 12
"""

from __future__ import annotations


class ProfileError(ValueError):
    """A profile that is malformed or outside the supported subset.

    ``column`` is 1-based (``None`` when the error is not tied to a position).
    """

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message if column is None else f"{message} at column {column}")
        self.column = column


class MessageError(ValueError):
    """A message that cannot be matched: malformed, too large or too deep, or
    using entity references (messages are untrusted)."""
