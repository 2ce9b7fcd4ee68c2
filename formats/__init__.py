"""Wire formats for XML between brokers: plain text, a binary element stream the
engine consumes without parsing, dictionary encoding of names, compression, and the
packet header carried in Kafka headers. Every format decodes to a
:class:`formats.Message`, a flat preorder element table.
"""

from formats.errors import FormatError
from formats.message import Message

__all__ = ["FormatError", "Message"]
