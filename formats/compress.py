"""Compression layers over a base format: ``zlib`` (as in ONYX), ``zstd`` and
``zstd-dict`` (zstd primed with a dictionary trained on the source's payloads of
that base format, carried by :class:`formats.Dictionary`).

Decompression is bounded: output larger than :data:`MAX_MESSAGE_BYTES`, truncated
or trailing data and checksum failures are :class:`FormatError`.

>>> ZLIB.decompress(ZLIB.compress(b"<a/>" * 100, None, "text"), None, "text")[:8]
b'<a/><a/>'
"""

from __future__ import annotations

import threading
import zlib
from typing import TYPE_CHECKING

import zstandard

from formats.errors import FormatError
from formats.message import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from formats.dictionary import Dictionary

ZLIB_LEVEL = 6  # zlib's default, as in ONYX
ZSTD_LEVEL = 6
"""zstd level for both variants: on news-sized messages with a trained dictionary,
6 is about 10% smaller than zstd's default 3 for twice the (still sub-millisecond) time."""
_MAX_WINDOW = 1 << 25  # refuse frames that ask for more decoder memory than any message needs


class Zlib:
    """zlib (deflate with an Adler-32 checksum)."""

    name = "zlib"
    needs_dictionary = False

    def compress(self, raw: bytes, dictionary: Dictionary | None, base: str) -> bytes:
        return zlib.compress(raw, ZLIB_LEVEL)

    def decompress(self, payload: bytes, dictionary: Dictionary | None, base: str) -> bytes:
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(payload, MAX_MESSAGE_BYTES + 1)
        except zlib.error as exc:
            raise FormatError(f"corrupt zlib payload: {exc}") from None
        if len(raw) > MAX_MESSAGE_BYTES:
            raise FormatError(f"zlib payload inflates beyond {MAX_MESSAGE_BYTES} bytes")
        if not inflater.eof:
            raise FormatError("truncated zlib payload")
        if inflater.unused_data:
            raise FormatError("trailing bytes after the zlib payload")
        return raw


class Zstd:
    """zstd with a content checksum; ``with_dictionary`` primes it per source."""

    def __init__(self, with_dictionary: bool) -> None:
        self.needs_dictionary = with_dictionary
        self.name = "zstd-dict" if with_dictionary else "zstd"

    def compress(self, raw: bytes, dictionary: Dictionary | None, base: str) -> bytes:
        return self._contexts(dictionary, base)[0].compress(raw)

    def decompress(self, payload: bytes, dictionary: Dictionary | None, base: str) -> bytes:
        try:
            size = zstandard.frame_content_size(payload)
            if size > MAX_MESSAGE_BYTES:
                raise FormatError(f"zstd payload declares {size} bytes, beyond {MAX_MESSAGE_BYTES}")
            return self._contexts(dictionary, base)[1].decompress(
                payload, max_output_size=MAX_MESSAGE_BYTES, allow_extra_data=False
            )
        except zstandard.ZstdError as exc:
            raise FormatError(f"corrupt {self.name} payload: {exc}") from None

    def _contexts(
        self, dictionary: Dictionary | None, base: str
    ) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        # zstd contexts are costly to build and not thread-safe: one pair per thread
        # and per (dictionary, base format).
        cache = _local.__dict__.setdefault("contexts", {})
        key = (self.name, base, dictionary.source_id, dictionary.version, dictionary.digest) if (
            self.needs_dictionary
        ) else (self.name,)
        contexts = cache.get(key)
        if contexts is None:
            if len(cache) > 256:
                cache.clear()
            contexts = cache[key] = self._make_contexts(dictionary, base)
        return contexts

    def _make_contexts(
        self, dictionary: Dictionary | None, base: str
    ) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        if not self.needs_dictionary:
            return (
                zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True),
                zstandard.ZstdDecompressor(max_window_size=_MAX_WINDOW),
            )
        trained = dictionary.zstd.get(base)
        if trained is None:
            raise FormatError(
                f"dictionary {dictionary.source_id!r} v{dictionary.version} has no trained zstd "
                f"dictionary for {base!r}; learn one with formats.learn_dictionary"
            )
        try:
            zdict = zstandard.ZstdCompressionDict(trained)
            zdict.precompute_compress(level=ZSTD_LEVEL)
        except zstandard.ZstdError as exc:
            raise FormatError(f"unusable zstd dictionary for {base!r}: {exc}") from None
        return (
            zstandard.ZstdCompressor(level=ZSTD_LEVEL, dict_data=zdict, write_checksum=True),
            zstandard.ZstdDecompressor(dict_data=zdict, max_window_size=_MAX_WINDOW),
        )


_local = threading.local()

ZLIB = Zlib()
ZSTD = Zstd(with_dictionary=False)
ZSTD_DICT = Zstd(with_dictionary=True)
