"""The wire formats by name: a base format, optionally wrapped in a compression layer.

Names are ``<base>`` or ``<base>+<compression>`` with base ``text``, ``stream`` or
``stream-dict`` and compression ``zlib``, ``zstd`` or ``zstd-dict``; the name is what
the ``onyx-format`` packet header carries.

>>> "stream-dict+zstd" in available()
True
>>> decode("text+zlib", encode("text+zlib", b"<a>hi</a>")).texts
['hi']
>>> decode("yaml", b"")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
formats.errors.FormatError: unknown format 'yaml' (available: text, text+zlib, ...)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Union

from formats.compress import ZLIB, ZSTD, ZSTD_DICT
from formats.dictionary import Dictionary
from formats.errors import FormatError
from formats.message import MAX_MESSAGE_BYTES, Message
from formats.stream import STREAM, STREAM_DICT
from formats.text import TEXT

Buffer = Union[bytes, bytearray, memoryview]


class BaseCodec(Protocol):
    """Turns a message table into payload bytes and back."""

    name: str
    needs_dictionary: bool

    def encode(self, message: Message, dictionary: Dictionary | None) -> bytes: ...
    def encode_xml(self, xml: bytes, dictionary: Dictionary | None) -> bytes: ...
    def decode(self, payload: bytes, dictionary: Dictionary | None) -> Message: ...


class Compression(Protocol):
    """Bytes in, fewer bytes out; ``base`` selects the trained dictionary, if any."""

    name: str
    needs_dictionary: bool

    def compress(self, raw: bytes, dictionary: Dictionary | None, base: str) -> bytes: ...
    def decompress(self, payload: bytes, dictionary: Dictionary | None, base: str) -> bytes: ...


@dataclass(frozen=True)
class Format:
    """One registered wire format."""

    name: str
    base: BaseCodec
    compression: Compression | None = None
    needs_dictionary: bool = field(init=False)
    """Whether encode/decode need the source's :class:`Dictionary`."""

    def __post_init__(self) -> None:
        needs = self.base.needs_dictionary or bool(self.compression and self.compression.needs_dictionary)
        object.__setattr__(self, "needs_dictionary", needs)

    def encode(self, data: bytes | Message, dictionary: Dictionary | None = None) -> bytes:
        """Encode published XML bytes or a decoded message."""
        self._check_dictionary(dictionary)
        if isinstance(data, Message):
            raw = self.base.encode(data, dictionary)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            raw = self.base.encode_xml(bytes(data), dictionary)
        else:
            raise TypeError(f"expected XML bytes or a formats.Message, not {type(data).__name__}")
        return self.pack(raw, dictionary)

    def decode(self, payload: Buffer, dictionary: Dictionary | None = None) -> Message:
        """Decode a payload; :class:`FormatError` for anything that is not one."""
        # On every broker's receive path: the common case (bytes, no compression)
        # costs two type tests before the codec.
        if dictionary is not None or self.needs_dictionary:
            self._check_dictionary(dictionary)
        if type(payload) is not bytes or self.compression is not None or len(payload) > MAX_MESSAGE_BYTES:
            payload = self.unpack(payload, dictionary)
        return self.base.decode(payload, dictionary)

    def pack(self, raw: bytes, dictionary: Dictionary | None = None) -> bytes:
        """Apply only the compression layer to a base-format payload."""
        return self.compression.compress(raw, dictionary, self.base.name) if self.compression else raw

    def unpack(self, payload: Buffer, dictionary: Dictionary | None = None) -> bytes:
        """Undo only the compression layer, giving the base-format payload."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise FormatError(f"a {self.name} payload must be bytes, not {type(payload).__name__}")
        if len(payload) > MAX_MESSAGE_BYTES:
            raise FormatError(f"payload of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES} bytes")
        payload = bytes(payload)
        return self.compression.decompress(payload, dictionary, self.base.name) if self.compression else payload

    def _check_dictionary(self, dictionary: Dictionary | None) -> None:
        if dictionary is not None and not isinstance(dictionary, Dictionary):
            raise TypeError(f"dictionary must be a formats.Dictionary, not {type(dictionary).__name__}")
        if dictionary is None and self.needs_dictionary:
            raise FormatError(f"format {self.name!r} needs the source's dictionary")


_BASES: tuple[BaseCodec, ...] = (TEXT, STREAM, STREAM_DICT)
_COMPRESSIONS: tuple[Compression, ...] = (ZLIB, ZSTD, ZSTD_DICT)

_FORMATS: dict[str, Format] = {}
for _base in _BASES:
    _FORMATS[_base.name] = Format(_base.name, _base)
    for _compression in _COMPRESSIONS:
        _name = f"{_base.name}+{_compression.name}"
        _FORMATS[_name] = Format(_name, _base, _compression)


def available() -> tuple[str, ...]:
    """Names of all registered formats, uncompressed first within each base."""
    return tuple(_FORMATS)


def get(name: str) -> Format:
    """The format registered as ``name``, or :class:`FormatError`."""
    try:
        return _FORMATS[name]
    except (KeyError, TypeError):
        raise FormatError(f"unknown format {name!r} (available: {', '.join(_FORMATS)})") from None


def encode(name: str, data: bytes | Message, *, dictionary: Dictionary | None = None) -> bytes:
    """Encode XML bytes or a :class:`Message` in the named format.

    >>> encode("text", b"<a/>")
    b'<a/>'
    """
    return get(name).encode(data, dictionary)


def decode(name: str, payload: Buffer, *, dictionary: Dictionary | None = None) -> Message:
    """Decode a payload of the named format into a :class:`Message`.

    >>> decode("stream", encode("stream", b"<a><b/></a>")).tags
    ['a', 'b']
    """
    return get(name).decode(payload, dictionary)
