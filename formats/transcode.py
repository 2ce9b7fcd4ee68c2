"""Per-link format choice: re-encode a payload for the next hop.

A broker may forward in a different format than it received (``text`` from a
publisher, ``stream-dict+zstd`` between brokers, ``text`` again to a subscriber's
link). Only what differs is redone: the same format and dictionary pass the bytes
through, a change of compression alone never decodes the message, and a change of
base format decodes once (or not at all when the broker already holds the decoded
``message``).

>>> blob = transcode(b"<a>hi</a>", "text", "stream+zstd")
>>> transcode(blob, "stream+zstd", "text")
b'<a>hi</a>'
"""

from __future__ import annotations

from formats.dictionary import Dictionary
from formats.message import Message
from formats.registry import Buffer, get


def transcode(
    payload: Buffer,
    src: str,
    dst: str,
    *,
    dictionary: Dictionary | None = None,
    dst_dictionary: Dictionary | None = None,
    message: Message | None = None,
) -> bytes:
    """Re-encode ``payload`` from format ``src`` to format ``dst``.

    ``dictionary`` is the one ``payload`` was encoded with, ``dst_dictionary`` the one
    to encode with (default: the same). ``message``, if given, must be ``payload``
    decoded; it saves decoding when the base format changes. Bytes that are passed
    through are not validated here: the receiver's decode does that.
    """
    source, target = get(src), get(dst)
    if dst_dictionary is None:
        dst_dictionary = dictionary
    same_dictionary = dictionary == dst_dictionary
    if source is target and (same_dictionary or not source.needs_dictionary):
        return bytes(payload)
    if source.base is target.base and (same_dictionary or not source.base.needs_dictionary):
        return target.pack(source.unpack(payload, dictionary), dst_dictionary)
    if message is None:
        message = source.decode(payload, dictionary)
    return target.encode(message, dst_dictionary)
