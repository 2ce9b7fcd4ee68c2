"""Rows a broker writes, and the packet headers it puts on them.

A row is ``(topic, key, value, headers)`` exactly as the Kafka sink takes it:
``headers`` is a list of ``(name, bytes)``. Dead letters keep the original headers
and payload and add ``onyx-reason`` (why) and ``onyx-origin`` (the topic it came from).
:func:`send_all` hands packets to a sender (the registration service's and the metadata
provider's), in one batch when it can.

A delivery record is for one or more profiles (``docs/deliveries.md``): a host broker writes
one record per delivery topic and message for all the filters there that match it, keyed by
the first of them, with every id in the ``onyx-profiles`` header (comma-separated; more than
fit in :data:`broker.config.DELIVERY_PROFILES_HEADER_BYTES` go in several records, see
:func:`id_slices`). Every reader of delivery topics selects a profile's records with
:func:`delivers_to`, which also takes records without the header (key = the profile id, as
before). A record ``onyx-delivery: reference`` carries :func:`reference` instead of the message.

>>> headers = [("onyx-message-id", b"m7"), (PROFILES, b"p1,p2,p3")]
>>> profile_ids(b"p1", headers), delivers_to("p2", b"p1", headers), delivers_to("p", b"p1", headers)
(['p1', 'p2', 'p3'], True, False)
>>> profile_ids(b"p9", [("onyx-message-id", b"m7")])     # a record of before: its key
['p9']
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator, Sequence

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


PROFILES = "onyx-profiles"
"""Header of a delivery record: the ids of the profiles it is for, comma-separated (sorted; the
record's key is the first). Profile ids the service makes are 16 hex digits, never a comma; a
broker gives a profile whose id has one (a packet written by hand) a record of its own without
this header, which readers then take by its key."""

DELIVERY = "onyx-delivery"
"""Header of a delivery record that carries a reference to the message (value ``reference``, the
JSON of :func:`reference`) instead of the message itself; absent on copies."""

REFERENCE = b"reference"


def _header(headers: Sequence[tuple[str, bytes]] | None, name: str) -> bytes | None:
    for k, v in headers or ():
        if k == name:
            return v
    return None


def profile_ids(key: bytes | None, headers: Sequence[tuple[str, bytes]] | None) -> list[str]:
    """The profiles a delivery record is for: its ``onyx-profiles`` header, else its key."""
    listed = _header(headers, PROFILES)
    if listed is not None:
        return listed.decode(errors="replace").split(",")
    return [key.decode(errors="replace")] if key else []


def delivers_to(profile_id: str, key: bytes | None, headers: Sequence[tuple[str, bytes]] | None) -> bool:
    """Whether a delivery record is for ``profile_id``: its key is that id (the first listed,
    or a record without the header) or the ``onyx-profiles`` header lists it."""
    pid = profile_id.encode(errors="surrogateescape")
    if key == pid:
        return True
    listed = _header(headers, PROFILES)
    return listed is not None and b"," not in pid and (b"," + listed + b",").find(b"," + pid + b",") >= 0


def id_slices(ids: Sequence[str], limit: int) -> Iterator[list[str]]:
    """``ids`` in runs whose ``onyx-profiles`` header (comma-separated) has at most ``limit``
    bytes; an id longer than that alone.

    >>> list(id_slices(["aa", "bb", "cc", "dd"], 5))
    [['aa', 'bb'], ['cc', 'dd']]
    """
    run: list[str] = []
    size = -1  # no comma before the first id
    for pid in ids:
        n = len(pid.encode()) + 1
        if run and size + n > limit:
            yield run
            run, size = [], -1
        run.append(pid)
        size += n
    if run:
        yield run


def message_path(profile_id: str, message_id: str) -> str:
    """Where the registration service serves a message delivered to ``profile_id`` by reference
    (``GET /profiles/{profile_id}/messages/{message_id}``), relative to its URL.

    >>> message_path("p1", "news-0-41"), message_path("p1", "a/b c")
    ('/profiles/p1/messages/news-0-41', '/profiles/p1/messages/a%2Fb%20c')
    """
    return f"/profiles/{urllib.parse.quote(profile_id, safe='')}/messages/{urllib.parse.quote(message_id, safe='')}"


def reference(message_id: str, source: str | None, profile_id: str) -> bytes:
    """The value of a delivery by reference (the Claim Check pattern): which message, of which
    source, and where to fetch it with the profile's token or its subscriber's (``href``,
    relative to the registration service; any profile the record lists may stand in the path).

    >>> print(reference("news-0-41", "news", "p1").decode())
    {"by": "reference", "message_id": "news-0-41", "source": "news", "href": "/profiles/p1/messages/news-0-41"}
    """
    return json.dumps({"by": "reference", "message_id": message_id, "source": source,
                       "href": message_path(profile_id, message_id)}).encode()


def references(message_id: str, source: str | None) -> Callable[[str], bytes]:
    """:func:`reference` of one message for any profile id, the parts that do not depend on the
    profile made once (a message may go to a thousand topics).

    >>> references("news-0-41", "news")("p1") == reference("news-0-41", "news", "p1")
    True
    """
    head = json.dumps({"by": "reference", "message_id": message_id, "source": source})[:-1] + ', "href": '
    tail = "/messages/" + urllib.parse.quote(message_id, safe="")
    return lambda pid: (head + json.dumps(f"/profiles/{urllib.parse.quote(pid, safe='')}{tail}") + "}").encode()


def for_profile(profile_id: str, value: bytes | None, headers: Sequence[tuple[str, bytes]] | None) -> bytes:
    """A delivery record's value as one of its profiles gets it over HTTP (event stream,
    webhook): the message as it is, a reference with that profile's own ``href``.

    >>> h = [(DELIVERY, REFERENCE), ("onyx-message-id", b"m1"), ("onyx-source", b"news")]
    >>> json.loads(for_profile("p2", reference("m1", "news", "p1"), h))["href"]
    '/profiles/p2/messages/m1'
    """
    if _header(headers, DELIVERY) != REFERENCE:
        return value or b""
    try:
        body = json.loads(value or b"")
        return reference(str(body["message_id"]), body.get("source"), profile_id)
    except (ValueError, KeyError, TypeError):  # not a reference this version wrote: as it came
        return value or b""
