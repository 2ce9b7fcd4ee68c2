"""Per-source dictionaries: element/attribute names as small integers, plus the zstd
dictionaries trained on the source's messages.

A :class:`Dictionary` is identified by ``(source_id, version)``; it travels through
the catalog as bytes (:meth:`Dictionary.to_bytes`), never inside messages. Each
``stream-dict`` payload names the version and a short digest of the dictionary it
was encoded with, so decoding with any other dictionary is a :class:`FormatError`
instead of silently wrong names.

>>> d = Dictionary("afp", 1, ["nitf", "head", "title"])
>>> d.index["head"], len(d)
(1, 3)
>>> Dictionary.from_bytes(d.to_bytes()) == d
True
>>> store = DictionaryStore([d])
>>> store.get("afp", 2)
Traceback (most recent call last):
...
formats.errors.FormatError: unknown dictionary version 2 for source 'afp' (known: 1)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping

from formats.errors import FormatError
from formats.names import check_name

_MAGIC = "onyx-dictionary/1"

MAX_NAMES = 1 << 16
"""Codes travel as 16-bit integers at most (see :mod:`formats.stream`)."""


class Dictionary:
    """Names -> codes for one version of one source's dictionary.

    ``names[code]`` is a Clark name; codes are positions, so a later version that
    only appends names keeps every earlier code. ``zstd`` maps a base format name
    (``'text'``, ``'stream'``, ``'stream-dict'``) to a zstd dictionary trained on
    that format's payloads, used by the ``+zstd-dict`` variants.
    """

    __slots__ = ("source_id", "version", "names", "zstd", "index", "digest")

    def __init__(
        self,
        source_id: str,
        version: int,
        names: Iterable[str],
        zstd: Mapping[str, bytes] | None = None,
    ) -> None:
        if type(source_id) is not str or not source_id:
            raise FormatError(f"dictionary source id must be a non-empty string, not {source_id!r}")
        if type(version) is not int or version < 0:
            raise FormatError(f"dictionary version must be an integer >= 0, not {version!r}")
        self.source_id = source_id
        self.version = version
        self.names: tuple[str, ...] = tuple(map(check_name, names))
        if len(self.names) > MAX_NAMES:
            raise FormatError(f"a dictionary holds at most {MAX_NAMES} names, not {len(self.names)}")
        self.index: dict[str, int] = {name: code for code, name in enumerate(self.names)}
        if len(self.index) != len(self.names):
            raise FormatError(f"dictionary {source_id!r} v{version} lists a name twice")
        self.zstd: dict[str, bytes] = {}
        for base, data in (zstd or {}).items():
            if type(base) is not str or not isinstance(data, (bytes, bytearray)) or not data:
                raise FormatError(f"bad zstd dictionary entry {base!r} in {source_id!r} v{version}")
            self.zstd[base] = bytes(data)
        self.digest = self._compute_digest()

    def _compute_digest(self) -> bytes:
        h = hashlib.sha256()
        h.update(json.dumps([self.source_id, self.version, self.names]).encode())
        for base in sorted(self.zstd):
            h.update(base.encode() + b"\0" + hashlib.sha256(self.zstd[base]).digest())
        return h.digest()[:4]

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dictionary):
            return NotImplemented
        return (self.source_id, self.version, self.digest) == (other.source_id, other.version, other.digest)

    def __hash__(self) -> int:
        return hash((self.source_id, self.version, self.digest))

    def __repr__(self) -> str:
        zstd = f", zstd={sorted(self.zstd)}" if self.zstd else ""
        return f"Dictionary({self.source_id!r}, v{self.version}, {len(self.names)} names{zstd})"

    def to_json(self) -> dict:
        """A JSON-compatible form for the catalog (zstd dictionaries in base64)."""
        return {
            "format": _MAGIC,
            "source_id": self.source_id,
            "version": self.version,
            "names": list(self.names),
            "zstd": {base: base64.b64encode(data).decode("ascii") for base, data in self.zstd.items()},
        }

    @classmethod
    def from_json(cls, obj: object) -> "Dictionary":
        """Inverse of :meth:`to_json`; :class:`FormatError` if ``obj`` is not one."""
        if not isinstance(obj, dict) or obj.get("format") != _MAGIC:
            raise FormatError("not an Onyx dictionary")
        names, zstd = obj.get("names"), obj.get("zstd", {})
        if not isinstance(names, list) or not isinstance(zstd, dict):
            raise FormatError("malformed Onyx dictionary")
        try:
            decoded = {base: base64.b64decode(data, validate=True) for base, data in zstd.items()}
        except (binascii.Error, TypeError, ValueError) as exc:
            raise FormatError(f"malformed zstd dictionary in Onyx dictionary: {exc}") from None
        return cls(obj.get("source_id"), obj.get("version"), names, decoded)

    def to_bytes(self) -> bytes:
        """Serialize for the catalog flow."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> "Dictionary":
        """Inverse of :meth:`to_bytes`; :class:`FormatError` on anything else."""
        try:
            obj = json.loads(data)
        except (ValueError, TypeError) as exc:
            raise FormatError(f"dictionary is not valid JSON: {exc}") from None
        return cls.from_json(obj)


class DictionaryStore:
    """The dictionaries a broker knows, by source and version (filled from the catalog)."""

    def __init__(self, dictionaries: Iterable[Dictionary] = ()) -> None:
        self._by_source: dict[str, dict[int, Dictionary]] = {}
        for d in dictionaries:
            self.add(d)

    def add(self, dictionary: Dictionary) -> None:
        """Add a dictionary; re-adding the same one is a no-op, a different one with the
        same source and version is refused (versions are immutable)."""
        versions = self._by_source.setdefault(dictionary.source_id, {})
        known = versions.get(dictionary.version)
        if known is not None and known != dictionary:
            raise FormatError(
                f"dictionary {dictionary.source_id!r} v{dictionary.version} already exists "
                "with different content; publish a new version instead"
            )
        versions[dictionary.version] = dictionary

    def get(self, source_id: str, version: int) -> Dictionary:
        """The dictionary for ``(source_id, version)``, or :class:`FormatError`."""
        versions = self._by_source.get(source_id, {})
        try:
            return versions[version]
        except (KeyError, TypeError):
            known = ", ".join(map(str, sorted(versions))) or "none"
            raise FormatError(
                f"unknown dictionary version {version} for source {source_id!r} (known: {known})"
            ) from None

    def latest(self, source_id: str) -> Dictionary | None:
        """The highest version known for a source, if any."""
        versions = self._by_source.get(source_id)
        return versions[max(versions)] if versions else None

    def __contains__(self, key: object) -> bool:
        source_id, version = key if isinstance(key, tuple) and len(key) == 2 else (None, None)
        return version in self._by_source.get(source_id, {})

    def __len__(self) -> int:
        return sum(map(len, self._by_source.values()))
