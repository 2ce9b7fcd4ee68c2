"""Rows a broker writes, and the packet headers it puts on them.

A row is ``(topic, key, value, headers)`` exactly as the Kafka sink takes it:
``headers`` is a list of ``(name, bytes)``. Dead letters keep the original headers
and payload and add ``onyx-reason`` (why) and ``onyx-origin`` (the topic it came from).
:func:`send_all` hands packets to a sender (the registration service's and the metadata
provider's), in one batch when it can.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker import topics

Row = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]

REASON = "onyx-reason"
ORIGIN = "onyx-origin"


def dead_letter(reason: str, origin: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]]) -> Row:
    """A row for ``onyx.dead-letter`` carrying the rejected input and why."""
    kept = [(k, v) for k, v in headers if k not in (REASON, ORIGIN)]
    return (topics.DEAD_LETTER, key, value,
            kept + [(REASON, reason[:2000].encode()), (ORIGIN, origin.encode())])


def send_all(sender, items: Sequence[tuple[str, tuple]]) -> None:
    """Send ``(topic, packet)`` pairs as one batch if ``sender`` can, else one by one."""
    batch = getattr(sender, "send_batch", None)
    if batch is not None:
        batch(items)
        return
    for topic, packet in items:
        sender.send(topic, packet)
