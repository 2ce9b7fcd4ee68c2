"""The packet header: Onyx's fields as Kafka record headers.

Every record on a broker's inbound topic carries ``onyx-flow`` (``xml``, ``query``,
``catalog`` or ``control``); XML packets also name their wire format, their source,
the root broker of their broadcast tree, a message id that stays the same on every
hop (for de-duplication), and the dictionary and schema versions they need. An XML
packet between brokers that carries a transformation of the message rather than the
message itself says which (``onyx-transform``: the transformation query it has had,
a JSON object that :mod:`routing.incremental` reads, ONYX 4.2.2).

>>> h = PacketHeader("xml", format="stream-dict+zstd", source_id="afp", root_broker="b1",
...                  message_id="afp-42", dictionary_version=3)
>>> PacketHeader.from_kafka(h.to_kafka()) == h
True
>>> h.to_kafka()[:2]
[('onyx-flow', b'xml'), ('onyx-format', b'stream-dict+zstd')]
>>> PacketHeader.from_kafka([("onyx-flow", b"xml"), ("onyx-format", b"yaml")])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
formats.errors.FormatError: unknown format 'yaml' (available: ...)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from formats.dictionary import Dictionary, DictionaryStore
from formats.errors import FormatError
from formats.message import Message
from formats.registry import Buffer, get

FLOWS = ("xml", "query", "catalog", "control")
"""The four packet flows a broker's inbound topic multiplexes."""

MAX_TRANSFORM = 16384
"""Most characters of ``onyx-transform`` (a link whose query is longer carries the message)."""

_HEADER_NAMES = {
    "flow": "onyx-flow",
    "format": "onyx-format",
    "source_id": "onyx-source",
    "root_broker": "onyx-root-broker",
    "message_id": "onyx-message-id",
    "dictionary_version": "onyx-dictionary-version",
    "schema_version": "onyx-schema-version",
    "transform": "onyx-transform",
    "sample": "onyx-sample",
}
_FIELDS_BY_HEADER = {header: name for name, header in _HEADER_NAMES.items()}
_STRING_FIELDS = ("format", "source_id", "root_broker", "message_id", "schema_version", "transform", "sample")


@dataclass(frozen=True)
class PacketHeader:
    """Onyx's header fields; construction checks them, so a header that exists is valid.

    ``format`` is required on the ``xml`` flow (other flows carry JSON the broker
    defines); ``source_id`` and ``dictionary_version`` are required when the format
    needs the source's dictionary.
    """

    flow: str
    format: str | None = None
    source_id: str | None = None
    root_broker: str | None = None
    message_id: str | None = None
    dictionary_version: int | None = None
    schema_version: str | None = None
    transform: str | None = None
    sample: str | None = None
    """``"1"``: the root sent this message down every link of its tree, so that every
    broker measures its summary's generalizations on messages its parent's table did
    not choose (see :mod:`routing.summary`)."""

    def __post_init__(self) -> None:
        if self.flow not in FLOWS:
            raise FormatError(f"unknown packet flow {self.flow!r} (flows: {', '.join(FLOWS)})")
        fields_ = self.__dict__
        for name in _STRING_FIELDS:
            value = fields_[name]
            if value is not None and (type(value) is not str or not value):
                raise FormatError(f"packet header {name} must be a non-empty string, not {value!r}")
        if self.sample not in (None, "1"):
            raise FormatError(f"onyx-sample must be 1 when present, not {self.sample!r}")
        if self.transform is not None and (not self.transform.startswith("{") or len(self.transform) > MAX_TRANSFORM):
            raise FormatError(f"onyx-transform must be a JSON object of at most {MAX_TRANSFORM} characters, "
                              f"not {self.transform[:80]!r}")
        version = self.dictionary_version
        if version is not None and (type(version) is not int or version < 0):
            raise FormatError(f"dictionary version must be an integer >= 0, not {version!r}")
        if self.format is None:
            if self.flow == "xml":
                raise FormatError("an xml packet must name its format (onyx-format)")
            return
        if get(self.format).needs_dictionary and (version is None or self.source_id is None):
            raise FormatError(
                f"format {self.format!r} needs a dictionary: the header must name "
                "the source (onyx-source) and the dictionary version (onyx-dictionary-version)"
            )

    def to_kafka(self) -> list[tuple[str, bytes]]:
        """Kafka record headers (only the fields that are set)."""
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out.append((_HEADER_NAMES[f.name], str(value).encode("utf-8")))
        return out

    @classmethod
    def from_kafka(cls, headers: Iterable[tuple[str | bytes, bytes | None]] | None) -> "PacketHeader":
        """Read Onyx's fields from Kafka record headers (other headers are ignored).

        Accepts kafka-python's list of ``(str, bytes)`` pairs and Spark's header rows.
        """
        values: dict[str, object] = dict.fromkeys(_HEADER_NAMES)  # every field unset
        for key, raw in headers or ():
            if type(key) is not str:
                if not isinstance(key, (bytes, bytearray)):
                    continue
                key = bytes(key).decode("utf-8", "replace")
            name = _FIELDS_BY_HEADER.get(key)
            if name is None:
                continue  # not ours, or a newer broker's header: ignoring it keeps old brokers working
            if values[name] is not None:
                raise FormatError(f"packet header {key} appears twice")
            if type(raw) is bytes and raw.isascii() and raw:  # the common case, inline
                values[name] = raw.decode("ascii")
            else:
                values[name] = _header_value(key, raw)
        if values["flow"] is None:
            raise FormatError("record has no onyx-flow header")
        version = values["dictionary_version"]
        if version is not None:
            if not (version.isascii() and version.isdigit()):
                raise FormatError(f"onyx-dictionary-version is not a version number: {version!r}")
            values["dictionary_version"] = int(version)
        # On every record a broker receives: the fields go in as __init__ would set
        # them (minus its per-field frozen-dataclass setattr), then the same checks.
        header = cls.__new__(cls)
        object.__setattr__(header, "__dict__", values)
        header.__post_init__()
        return header

    def dictionary(self, store: DictionaryStore) -> Dictionary | None:
        """The dictionary this packet's format needs (``None`` if none), or
        :class:`FormatError` if the store does not know that version."""
        if self.format is None or not get(self.format).needs_dictionary:
            return None
        return store.get(self.source_id, self.dictionary_version)

    def decode(self, payload: Buffer, store: DictionaryStore | None = None) -> Message:
        """Decode an xml packet's payload as this header describes it."""
        if self.flow != "xml":
            raise FormatError(f"a {self.flow} packet does not carry a message")
        fmt = get(self.format)
        if not fmt.needs_dictionary:
            return fmt.decode(payload)
        return fmt.decode(payload, self.dictionary(store if store is not None else DictionaryStore()))


def _header_value(key: str, raw: object) -> str:
    if type(raw) is not bytes:
        if not isinstance(raw, (bytearray, memoryview)):
            raise FormatError(f"packet header {key} has no value")
        raw = bytes(raw)
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"packet header {key} is not UTF-8") from None
    if not value:
        raise FormatError(f"packet header {key} is empty")
    return value
