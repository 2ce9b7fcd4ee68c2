"""Append-only storage of large values (message bytes, profile texts): each is written
once at the end of a log file (or a memory buffer) and found by ``(offset, length)``,
which an index keeps; nothing is rewritten, as in a transaction-time store.

>>> b = Blobs(None)
>>> ref = b.append(b"<a/>")
>>> b.read(ref)
b'<a/>'
"""

from __future__ import annotations

import os
from pathlib import Path


class Blobs:
    """A log at ``path`` (``None``: in memory)."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = None if path is None else Path(path)
        self._mem = bytearray()
        self._file = None if self.path is None else open(self.path, "a+b")  # noqa: SIM115 - kept open

    def append(self, data: bytes) -> tuple[int, int]:
        if self._file is None:
            at = len(self._mem)
            self._mem += data
        else:
            self._file.seek(0, os.SEEK_END)
            at = self._file.tell()
            self._file.write(data)
        return at, len(data)

    def read(self, ref: tuple[int, int]) -> bytes:
        at, length = ref
        if self._file is None:
            return bytes(self._mem[at:at + length])
        self._file.flush()
        self._file.seek(at)
        return self._file.read(length)

    def truncate(self, size: int) -> None:
        """Drop what was appended after ``size`` bytes (an unfinished batch)."""
        if self._file is None:
            del self._mem[size:]
        else:
            self._file.flush()
            self._file.truncate(size)

    def size(self) -> int:
        if self._file is None:
            return len(self._mem)
        self._file.seek(0, os.SEEK_END)
        return self._file.tell()

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
