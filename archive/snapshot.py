"""Reading an archive that a writer is filling: every partition archive and the profile
lifetimes under a directory, opened under shared locks (:mod:`archive.locks`) and so as
the writer's last flush left them. A reader writes nothing (a page file's metadata is
written only when it changed), and the writer waits while a snapshot is open: keep it
short, one request.

>>> import tempfile
>>> with snapshot(tempfile.mkdtemp()) as s:
...     s.archive.partitions(), s.profiles is None
([], True)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from archive.directory import Archive
from archive.locks import locked
from archive.profiles import ProfileHistory
from archive.writer import CATALOG_FOLDER, PROFILES_FOLDER


@dataclass
class Snapshot:
    """The archive's messages and, once the writer has met a profile change (a source's
    registration), the profiles' lifetimes (the sources' versions)."""

    archive: Archive
    profiles: ProfileHistory | None
    catalog: ProfileHistory | None = None


@contextmanager
def snapshot(root: str | os.PathLike) -> Iterator[Snapshot]:
    """The archive under ``root`` as last flushed, for the ``with`` block."""
    root = Path(root)
    with ExitStack() as stack:
        if root.is_dir():
            for source in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
                for part in sorted(p for p in source.iterdir() if p.is_dir() and p.name.isdigit()):
                    stack.enter_context(locked(part, shared=True))
        histories = {}
        for folder in (PROFILES_FOLDER, CATALOG_FOLDER):
            where = root / folder
            histories[folder] = None
            if (where / "profiles.pages").exists():
                stack.enter_context(locked(where, shared=True))
                histories[folder] = ProfileHistory(where)
                stack.callback(histories[folder].close)
        archive = Archive(root if root.is_dir() else None)
        stack.callback(archive.close)
        yield Snapshot(archive, histories[PROFILES_FOLDER], histories[CATALOG_FOLDER])
