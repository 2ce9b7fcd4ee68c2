"""The operator console: ``GET /console`` (one HTML page, no build step) and the read-only
endpoints it draws from.

* ``GET /console/overlay``: brokers, links, each source's broadcast tree, profiles hosted per broker;
* ``GET /console/figures``: the brokers' live figures (:mod:`broker.registry.figures`), and
  ``GET /console/events``, the same as Server-Sent Events every ``ONYX_CONSOLE_EVERY`` seconds;
* ``GET /console/dead-letters``: the dead-letter topic's last records with their reasons;
* ``GET /console/profiles?q=``: registered profiles, searched by id, text, host or subscriber;
  the sources are in ``/console/overlay``.

Every one of them but the page itself (which holds no data) is an operator's: it needs the
operator token (``ONYX_ADMIN_TOKEN``; ``onyx up`` makes one), as ``X-Onyx-Admin-Token`` or
``Authorization: Bearer``; the page asks for it and keeps it in the browser's session storage.
A service started without an operator token answers them 401 (:mod:`broker.registry.access`).
"""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from typing import Callable

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from pydantic import BaseModel, Field

from broker import config, packets, topics
from broker.registry import access
from broker.registry.access import ADMIN_TOKEN_HEADER
from broker.registry.app import error_responses
from broker.registry.figures import Figures
from broker.registry.kafka_reads import last_records
from broker.registry.limits import StreamSlots
from broker.registry.store import Store
from routing.overlay import Overlay

MAX_LISTED = 500  # profiles one GET /console/profiles lists


class ConsoleBroker(BaseModel):
    broker_id: str
    profiles: int = Field(description="profiles hosted by the broker")
    sources: list[str] = Field(description="sources whose root broker it is")


class ConsoleSource(BaseModel):
    source_id: str
    name: str
    root_broker: str
    topic: str
    tree: list[tuple[str, str]] = Field(description="the source's broadcast tree: (parent, child) links, top-down")


class ConsoleOverlay(BaseModel):
    name: str
    brokers: list[ConsoleBroker]
    links: list[tuple[str, str, float]] = Field(description="(broker, broker, weight)")
    sources: list[ConsoleSource]


class ConsoleProfile(BaseModel):
    profile_id: str
    text: str
    host_broker: str
    delivery_topic: str
    subscriber_id: str | None
    webhook: bool = Field(description="whether deliveries are also POSTed to a webhook")


class ConsoleProfiles(BaseModel):
    total: int = Field(description="profiles that match the search")
    profiles: list[ConsoleProfile] = Field(description=f"the first {MAX_LISTED} of them, in registration order")


class DeadLetter(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    reason: str = Field(description="the onyx-reason header")
    origin: str | None = Field(description="the onyx-origin header: the topic the record came from")
    message_id: str | None
    preview: str = Field(description="the first 300 characters of the record's value")


class BrokerFigures(BaseModel):
    model_config = {"extra": "allow"}

    broker: str


class FiguresView(BaseModel):
    time: float = Field(description="when they were gathered (Unix seconds; 0: never, the service runs no brokers)")
    brokers: list[BrokerFigures] = Field(description="per broker what `onyx status` shows: messages, forwarded, "
                                         "delivered, dead_letters, lag, last_batch_ms, routing, false_positives, ...")
    error: str | None = Field(description="why the figures could not be gathered the last time (else null)")


OPERATOR = {401: f"no operator token ({ADMIN_TOKEN_HEADER} or Authorization: Bearer), a wrong one, or the service "
                 "has none", 403: "a token of another kind"}
"""What an operator's operation answers a caller that is not one."""


def overlay_view(overlay: Overlay, store: Store) -> ConsoleOverlay:
    """The overlay as the console draws it."""
    counts = store.profile_counts()
    names = {s.id: s.name for s in store.list_sources()}
    return ConsoleOverlay(
        name=overlay.name,
        brokers=[ConsoleBroker(broker_id=b, profiles=counts.get(b, 0),
                               sources=sorted(s for s, r in overlay.sources.items() if r == b))
                 for b in overlay.brokers],
        links=overlay.links,
        sources=[ConsoleSource(source_id=s, name=names.get(s, s), root_broker=r, topic=topics.source_topic(s),
                               tree=overlay.tree(r).links())
                 for s, r in sorted(overlay.sources.items())])


def dead_letter_view(bootstrap: str | None, n: int = config.CONSOLE_DEAD_LETTERS) -> list[DeadLetter]:
    """The last ``n`` records of ``onyx.dead-letter`` (none without Kafka)."""
    if bootstrap is None:
        return []
    out = []
    for r in last_records(bootstrap, topics.DEAD_LETTER, n):
        headers = dict(r.headers)
        text = lambda k: headers[k].decode(errors="replace") if k in headers else None  # noqa: E731
        out.append(DeadLetter(topic=r.topic, partition=r.partition, offset=r.offset, timestamp_ms=r.timestamp_ms,
                              reason=text(packets.REASON) or "(no reason header)", origin=text(packets.ORIGIN),
                              message_id=text("onyx-message-id"),
                              preview=(r.value or b"")[:300].decode(errors="replace")))
    return out


def add_console(app: FastAPI, store: Store, overlay: Overlay, figures: Figures, bootstrap_servers: str | None,
                webhook_profiles: Callable[[], set[str]] = set) -> None:
    """Add the console's page and endpoints to the service (``webhook_profiles()``: the ids of
    the profiles with a webhook)."""
    operator = Depends(access.of(app).allow("operator", sees="the whole overlay: every profile, subscriber, "
                                                             "broker figure and dead letter"))
    streams = StreamSlots(config.CONSOLE_STREAMS, what="console event streams")
    app.router.on_shutdown.append(streams.close)
    page = resources.files("broker.registry").joinpath("static/console.html").read_text()
    errors = error_responses({**OPERATOR, 503: "the database cannot be reached"})

    @app.get("/console", response_class=HTMLResponse, include_in_schema=False)
    def console_page() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/console/overlay", response_model=ConsoleOverlay, summary="The overlay (console)",
             operation_id="console_overlay", responses=errors,
             dependencies=[operator])
    def console_overlay() -> ConsoleOverlay:
        """Brokers, links, the sources with their broadcast trees, and how many profiles each broker hosts."""
        return overlay_view(overlay, store)

    @app.get("/console/figures", response_model=FiguresView, summary="The brokers' live figures (console)",
             operation_id="console_figures", responses=error_responses(OPERATOR), dependencies=[operator])
    def console_figures() -> dict:
        """Per broker the figures `onyx status` shows, at most ONYX_CONSOLE_EVERY seconds old."""
        return figures.snapshot()

    @app.get("/console/events", summary="The brokers' live figures as Server-Sent Events (console)",
             operation_id="console_events",
             responses={200: {"description": "an endless text/event-stream: an event `figures` (data: what GET "
                                             "/console/figures answers) every ONYX_CONSOLE_EVERY seconds",
                              "content": {"text/event-stream": {"schema": {  # each event's (OpenAPI 3.1)
                                  "type": "object", "required": ["event", "data"],
                                  "properties": {"event": {"const": "figures"},
                                                 "data": {"type": "string", "contentMediaType": "application/json"},
                                                 "retry": {"type": "integer"}}}}}},
                        **error_responses({**OPERATOR, 429: "ONYX_CONSOLE_STREAMS console streams are open: "
                                                             "retry after Retry-After seconds"})}, dependencies=[operator])
    async def console_events(request: Request) -> StreamingResponse:
        slot = streams.acquire("operators")  # 429 when full

        async def stream():
            yield f"retry: {int(figures.every * 1000)}\n\n"
            while not await request.is_disconnected():
                snap = await asyncio.to_thread(figures.snapshot)
                yield f"event: figures\ndata: {json.dumps(snap)}\n\n"
                await asyncio.sleep(figures.every)

        return slot.response(stream(), media_type="text/event-stream",  # the slot is given back when it ends
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @app.get("/console/dead-letters", response_model=list[DeadLetter], summary="Recent dead letters (console)",
             operation_id="console_dead_letters", responses=error_responses(OPERATOR), dependencies=[operator])
    def console_dead_letters() -> list[DeadLetter]:
        """The last ONYX_CONSOLE_DEAD_LETTERS records of onyx.dead-letter, newest first, with their reasons."""
        return dead_letter_view(bootstrap_servers)

    @app.get("/console/profiles", response_model=ConsoleProfiles, summary="Search the profiles (console)",
             operation_id="console_profiles",
             responses=error_responses({**OPERATOR, 422: "q is longer than 200 characters",
                                        503: "the database cannot be reached"}), dependencies=[operator])
    def console_profiles(q: str = Query("", max_length=200, description="words every listed profile's id, text, "
                                        "host broker, delivery topic or subscriber contains (case-insensitive)")
                         ) -> ConsoleProfiles:
        words = q.lower().split()
        hooked = webhook_profiles()
        found = [p for p in store.list_profiles()
                 if all(w in f"{p.id} {p.text} {p.host_broker} {p.delivery_topic} {p.subscriber_id}".lower()
                        for w in words)]
        return ConsoleProfiles(total=len(found), profiles=[
            ConsoleProfile(profile_id=p.id, text=p.text, host_broker=p.host_broker, delivery_topic=p.delivery_topic,
                           subscriber_id=p.subscriber_id, webhook=p.id in hooked) for p in found[:MAX_LISTED]])
