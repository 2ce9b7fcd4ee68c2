"""Errors raised by the wire formats."""


class FormatError(ValueError):
    """A payload cannot be decoded: unknown format or dictionary version, truncated
    or corrupted bytes, or XML that is malformed or breaks the message limits."""
