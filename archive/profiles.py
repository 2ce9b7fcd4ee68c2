"""Profiles' lifetimes: each version of a profile (registered, updated, deleted) is a
valid-time interval ``[from, to)`` in an RI-tree (thesis section 3.2.2; open-ended while
it is current) and a lifespan of the key ``(profile id,)`` in an MVBT whose value points
at the text (section 4.1.3), so that "which profiles were active at T" is an interval
stabbing query and a profile's history a pure-key query.

Times are the caller's (milliseconds, say), never going back; the MVBT's version of a
change at time ``t`` is ``t << 10`` plus how many changes came at ``t`` before it, so
versions strictly increase and an update ends the old text and starts the new one at
the same time.

>>> h = ProfileHistory(None)
>>> h.register("q1", "/nitf", 10); h.update("q1", "/nitf/head", 20); h.delete("q1", 30)
>>> [(s, e, t) for s, e, t in h.history("q1")]
[(10, 20, '/nitf'), (20, 30, '/nitf/head')]
>>> h.active(15), h.active(30), h.text_at("q1", 25)
({'q1': '/nitf'}, {}, '/nitf/head')
"""

from __future__ import annotations

import os
from pathlib import Path

import msgpack

from archive import defaults
from archive.blobs import Blobs
from archive.errors import ArchiveError, KeyStateError
from archive.mvbt import MVBT
from archive.pages import PageStore
from archive.ritree import RITree


_STEP_BITS = 10


def _time(version: int) -> int:
    return version >> _STEP_BITS


class ProfileHistory:
    """Profile versions in ``directory`` (``None``: in memory)."""

    def __init__(self, directory: str | os.PathLike | None, *, page_size: int = defaults.PAGE_SIZE) -> None:
        d = None if directory is None else Path(directory)
        if d is not None:
            d.mkdir(parents=True, exist_ok=True)
        # One durable store for the versions and the lifetimes: a flush makes both (and the
        # profile-log offsets in its metadata) durable together.
        self.store = PageStore(None if d is None else d / "profiles.pages", page_size, durable=True)
        self.versions = MVBT(store=self.store, name="profiles")
        self.lifetimes = RITree(store=self.store)
        self.texts = Blobs(None if d is None else d / "texts.log")
        self.meta = self.store.meta.setdefault("profile_texts", {"blobs": 0})
        self.log_offsets: dict = self.store.meta.setdefault("profile_log", {})
        if self.texts.size() > self.meta["blobs"]:
            self.texts.truncate(self.meta["blobs"])

    def _version(self, at: int) -> int:
        return max(int(at) << _STEP_BITS, self.versions.last + 1)

    def _current(self, pid: str) -> tuple[int, tuple[int, int]] | None:
        hist = self.versions.history((pid,))
        if hist and hist[-1][1] is None:
            return hist[-1][0], tuple(msgpack.unpackb(hist[-1][2]))
        return None

    def current(self, pid: str) -> str | None:
        """``pid``'s text now (``None``: not registered)."""
        cur = self._current(pid)
        return None if cur is None else self.texts.read(cur[1]).decode()

    def record(self, pid: str, text: str | None, at: int) -> bool:
        """What a profile log says of ``pid`` at ``at``: its text (registered or updated)
        or ``None`` (deleted). A text it has already, or a deletion of a profile it does
        not hold, changes nothing (returns ``False``), so the log can be read again.

        >>> h = ProfileHistory(None)
        >>> h.record("q1", "/a", 5), h.record("q1", "/a", 6), h.record("q1", None, 7), h.record("q1", None, 8)
        (True, False, True, False)
        """
        now = self.current(pid)
        if text is None:
            if now is None:
                return False
            self.delete(pid, at)
        elif now is None:
            self.register(pid, text, at)
        elif now != text:
            self.update(pid, text, at)
        else:
            return False
        return True

    def register(self, pid: str, text: str, at: int) -> None:
        """``pid`` starts with ``text`` at time ``at``."""
        if self._current(pid) is not None:
            raise KeyStateError(f"profile {pid!r} is registered; update or delete it")
        v = self._version(at)
        ref = self.texts.append(text.encode())
        self.meta["blobs"] = self.texts.size()
        self.versions.insert((pid,), v, msgpack.packb(ref))
        self.lifetimes.insert(_time(v), None, f"{pid}\0{v}")

    def update(self, pid: str, text: str, at: int) -> None:
        """``pid``'s text becomes ``text`` at ``at`` (the old version ends there)."""
        self.delete(pid, at)
        self.register(pid, text, _time(self.versions.last))

    def delete(self, pid: str, at: int) -> None:
        """``pid`` ends at ``at``."""
        cur = self._current(pid)
        if cur is None:
            raise KeyStateError(f"profile {pid!r} is not registered")
        start, _ = cur
        v = self._version(at)
        self.versions.delete((pid,), v)
        self.lifetimes.delete(_time(start), None, f"{pid}\0{start}")
        if _time(start) < _time(v):      # a version that lived no time was never active
            self.lifetimes.insert(_time(start), _time(v), f"{pid}\0{start}")

    def history(self, pid: str) -> list[tuple[int, int | None, str]]:
        """Every version of ``pid``: ``(from, to, text)`` (``to`` is ``None`` while current)."""
        return [(_time(s), None if e is None else _time(e), self.texts.read(tuple(msgpack.unpackb(v))).decode())
                for s, e, v in self.versions.history((pid,))]

    def text_at(self, pid: str, at: int) -> str | None:
        for s, e, text in self.history(pid):
            if s <= at and (e is None or at < e):
                return text
        return None

    def active(self, at: int) -> dict[str, str]:
        """The profiles active at time ``at`` with their text then (an RI-tree query)."""
        if at < 0:
            raise ArchiveError(f"time {at} is before any profile")
        out = {}
        for ident in self.lifetimes.intersecting(at, at + 1):
            pid, start = ident.rsplit("\0", 1)
            out[pid] = self.text_at(pid, _time(int(start)))
        return out

    def flush(self) -> None:
        self.texts.flush()
        self.store.flush()

    def close(self) -> None:
        self.flush()
        self.texts.close()
        self.store.close()
