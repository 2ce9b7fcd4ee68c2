"""``GET /profiles/{id}/deliveries``: a profile's deliveries pushed as Server-Sent Events, for a
subscriber that does not speak Kafka.

The stream reads the profile's delivery topic (:func:`broker.registry.kafka_reads.follow`) and
sends each record for the profile (one record may be for several profiles of the topic: its
``onyx-profiles`` header lists them, ``docs/deliveries.md``) as an event ``delivery`` whose ``id`` is the record's
Kafka offset (``<partition>:<offset>,...`` for a topic of several partitions) and whose data is
a JSON object: ``profile_id``, ``message_id`` (the ``onyx-message-id`` header), ``topic``,
``partition``, ``offset``, ``timestamp_ms`` and ``value`` (the delivered document; for a profile
delivering by reference, the reference, whose ``href`` names this profile). A client
that reconnects with ``Last-Event-ID`` (browsers' ``EventSource`` do it themselves) gets every
delivery after that one, however long it was away (within the topic's retention): nothing is
lost, nothing repeated. A first connection starts at the end of the topic (deliveries from
now on), or at its first record with ``from_start=true``. It needs the profile's token, as
``PUT``/``DELETE`` of the profile do. Quiet streams get an SSE comment every
``ONYX_SSE_KEEPALIVE`` seconds. A subscriber may keep ``ONYX_SSE_PER_SUBSCRIBER`` streams open
over all its profiles, the service ``ONYX_SSE_MAX`` in all (429 past them,
:class:`broker.registry.limits.StreamSlots`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from broker import config, packets
from broker.registry import access
from broker.registry.app import error_responses
from broker.registry.kafka_reads import EVENT_ID, KafkaRecord, Position, follow
from broker.registry.limits import StreamSlots
from broker.registry.store import Store


def event(record: KafkaRecord, position: Position, profile_id: str) -> str:
    """One delivery as an SSE event.

    >>> r = KafkaRecord("onyx.deliver.s1", 0, 41, 1764115200000, b"p1", b"<nitf/>", [("onyx-message-id", b"m7")])
    >>> print(event(r, Position({0: 42}), "p1"), end="")
    id: 41
    event: delivery
    data: {"profile_id": "p1", "message_id": "m7", "topic": "onyx.deliver.s1", "partition": 0, "offset": 41, "timestamp_ms": 1764115200000, "value": "<nitf/>"}
    <BLANKLINE>
    """
    headers = dict(record.headers)
    data = {"profile_id": profile_id,
            "message_id": headers["onyx-message-id"].decode(errors="replace") if "onyx-message-id" in headers else None,
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp_ms": record.timestamp_ms,
            "value": packets.for_profile(profile_id, record.value, record.headers).decode(errors="replace")}
    return f"id: {position.event_id()}\nevent: delivery\ndata: {json.dumps(data)}\n\n"


class DeliveryEvent(BaseModel):
    """The data of one event ``delivery`` (a JSON object)."""

    profile_id: str
    message_id: str | None = Field(description="the onyx-message-id header: the same on every copy of a message")
    topic: str = Field(description="the delivery topic")
    partition: int
    offset: int = Field(description="the record's Kafka offset (the event's id names it too)")
    timestamp_ms: int
    value: str = Field(description="the delivered document (the message, or a transformation's result); for a "
                                   "profile delivering by reference, the JSON reference to the message")


# Schemathesis (and OpenAPI 3.1) read an event stream's schema as each event's: SSE's fields.
_STREAM = {200: {"description": "an endless text/event-stream of events `delivery`, each with the id of its record "
                                "(its Kafka offset) and a JSON object as data",
                 "content": {"text/event-stream": {"schema": {
                     "type": "object", "required": ["event", "data"],
                     "properties": {"event": {"const": "delivery"}, "id": {"type": "string", "pattern": r"^\d+$|:"},
                                    "data": {"type": "string", "contentMediaType": "application/json",
                                             "contentSchema": DeliveryEvent.model_json_schema()},
                                    "retry": {"type": "integer"}}}}}}}


def link_from_registration(app: FastAPI) -> None:
    """Add to the OpenAPI links of ``POST /profiles`` one to the new profile's delivery stream,
    with its token (not to ``:batch``'s, whose first item may have been refused)."""
    for route in app.routes:
        if getattr(route, "operation_id", None) != "register_profile":
            continue
        for answer in ((getattr(route, "openapi_extra", None) or {}).get("responses") or {}).values():
            links = answer.get("links", {})
            if "UpdateProfile" in links:
                links["StreamDeliveries"] = {"operationId": "profile_deliveries",
                                             "parameters": links["UpdateProfile"]["parameters"],
                                             "description": "its deliveries as Server-Sent Events, with its token"}


def add_deliveries(app: FastAPI, store: Store, bootstrap_servers: str | None,
                   keepalive: float = config.SSE_KEEPALIVE_S) -> None:
    """Add ``GET /profiles/{id}/deliveries`` to the service (and the links to it)."""
    link_from_registration(app)
    rights = access.of(app)
    streams = StreamSlots(config.SSE_MAX, config.SSE_PER_SUBSCRIBER, "delivery streams")
    app.router.on_shutdown.append(streams.close)

    @app.get("/profiles/{profile_id}/deliveries", summary="A profile's deliveries as Server-Sent Events",
             operation_id="profile_deliveries", response_class=StreamingResponse,
             responses={**_STREAM, **error_responses({
                 401: "no token (the profile's, or its subscriber's), or one no one has",
                 403: "a token of another kind", 404: "no such profile of yours",
                 422: "Last-Event-ID is not an event id this stream sends (an offset, or partition:offset pairs)",
                 429: "the profile's subscriber has ONYX_SSE_PER_SUBSCRIBER streams open, or the service "
                      "ONYX_SSE_MAX: retry after Retry-After seconds",
                 503: "the service runs without Kafka"})})
    async def deliveries(request: Request, profile_id: str,
                         last_event_id: str = Header("", alias="Last-Event-ID", pattern=EVENT_ID,
                                                     description="the id of the last event received: the stream "
                                                     "goes on right after it (empty: none)"),
                         from_start: bool = Query(False, description="without Last-Event-ID: start at the delivery "
                                                  "topic's first record instead of its end"),
                         who: access.Caller = Depends(rights.allow("owner", "subscriber",
                                                                   sees="its own profile's deliveries"))
                         ) -> StreamingResponse:
        record = await asyncio.to_thread(rights.profile, who, profile_id, False)
        start = Position.parse(last_event_id) if last_event_id else (Position() if from_start else None)
        if bootstrap_servers is None:
            raise HTTPException(503, "the service runs without Kafka: no deliveries to stream")
        slot = streams.acquire(record.subscriber_id or f"of profile {profile_id}")  # 429 when full
        stop = threading.Event()
        records = follow(bootstrap_servers, record.delivery_topic, profile_id, start, stop.is_set,
                         idle=min(1.0, keepalive))

        async def stream():
            quiet = time.monotonic()
            try:
                yield "retry: 1000\n\n"
                while not await request.is_disconnected():
                    got = await slot.run(next, records, None)  # a thread of its own: blocks on Kafka
                    if got is None:
                        return
                    r, position = got
                    if r is not None:
                        quiet = time.monotonic()
                        yield event(r, position, profile_id)
                    elif time.monotonic() - quiet >= keepalive:
                        quiet = time.monotonic()
                        yield ": keep-alive\n\n"
            finally:
                stop.set()  # the reader ends at its next turn and closes its consumer

        return slot.response(stream(), media_type="text/event-stream",  # the slot is given back when it ends
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
