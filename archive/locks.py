"""One writer or many readers per archive folder: an advisory ``flock`` on its
``.lock`` file, so that a reader (the registration service answering a replay) sees the
archive as the writer's last flush left it, never a batch half written.

>>> import tempfile
>>> with locked(tempfile.mkdtemp(), shared=True):
...     pass
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"


@contextmanager
def locked(folder: str | os.PathLike, *, shared: bool = False) -> Iterator[None]:
    """Hold ``folder``'s lock (created with the folder if missing): exclusive for the
    writer, ``shared`` for readers."""
    where = Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
