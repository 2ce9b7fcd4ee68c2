"""The ``text`` format: XML as published.

Published bytes are passed through untouched (their encoding and declaration
included); a :class:`formats.Message` is serialized as UTF-8 without a declaration.
Decoding is the secure parse of :meth:`formats.Message.from_xml`.

>>> TEXT.encode_xml(b"<a>hi</a>", None)
b'<a>hi</a>'
>>> TEXT.decode(b"<a>hi</a>", None).texts
['hi']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats.message import Message

if TYPE_CHECKING:
    from formats.dictionary import Dictionary


class TextCodec:
    """XML text; the receiver parses it."""

    name = "text"
    needs_dictionary = False

    def __repr__(self) -> str:
        return f"<codec {self.name}>"

    def encode_xml(self, xml: bytes, dictionary: Dictionary | None) -> bytes:
        """The XML as published: checked by whoever decodes it, as any text is."""
        return xml

    def encode(self, message: Message, dictionary: Dictionary | None) -> bytes:
        """Serialize a message table."""
        return message.to_xml()

    def decode(self, payload: bytes, dictionary: Dictionary | None) -> Message:
        """Parse (securely) into a message table."""
        return Message.from_xml(payload)


TEXT = TextCodec()
