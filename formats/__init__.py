"""Wire formats for XML between brokers: plain text, a binary element stream the
engine consumes without parsing, dictionary encoding of names, compression, and the
packet header carried in Kafka headers. Every format decodes to a
:class:`formats.Message`, a flat preorder element table.

>>> import formats
>>> blob = formats.encode("stream+zstd", b"<nitf><head><title>Hi</title></head></nitf>")
>>> msg = formats.decode("stream+zstd", blob)
>>> msg.tags, msg.to_xml()
(['nitf', 'head', 'title'], b'<nitf><head><title>Hi</title></head></nitf>')

Round trips keep the XML infoset the engine needs -- elements, attributes, text,
their order and namespace declarations -- and drop comments, processing
instructions, the DOCTYPE and the XML declaration (see :mod:`formats.message`).
"""

from formats.dictionary import Dictionary, DictionaryStore
from formats.errors import FormatError
from formats.header import FLOWS, PacketHeader
from formats.learn import learn_dictionary
from formats.message import Message
from formats.registry import Format, available, decode, encode, get
from formats.schema import schema_names
from formats.transcode import transcode

__all__ = [
    "FLOWS",
    "Dictionary",
    "DictionaryStore",
    "Format",
    "FormatError",
    "Message",
    "PacketHeader",
    "available",
    "decode",
    "encode",
    "get",
    "learn_dictionary",
    "schema_names",
    "transcode",
]
