"""The registration service's HTTP server: uvicorn with the limits a service on the network needs.

uvicorn bounds how long an idle connection waits for its next request (``timeout_keep_alive``,
armed after a response) but not how long a client may take to send a request's headers: a
client that sends ``GET / HTTP/1.1\\r\\nX-a: b`` and then one byte now and then held a socket
and a connection slot for as long as it liked (slowloris), and enough of them starved every
other client. :class:`LimitedH11Protocol` (uvicorn's h11 protocol, the one the service's
dependencies install) adds

* a **header timeout** (ONYX_HTTP_HEADER_TIMEOUT): from a connection's start, and from the first
  byte of each further request, its line and headers must be in within this many seconds, or
  the service answers 408 and closes the connection (one that sent nothing is just closed);
* a **connection limit** (ONYX_HTTP_MAX_CONNECTIONS): a connection accepted while this many are
  open is answered 503 (with ``Retry-After``) and closed at once, so a flood of sockets cannot
  use up the process's open files (which Kafka clients and the database need too).
  uvicorn's own ``limit_concurrency`` counts the same connections but answers only once a
  request's headers are in: the sockets past it stayed open until then, slowloris ones for
  the whole header timeout;
* a **bounded drain** (ONYX_HTTP_DRAIN_TIMEOUT): a request answered before its body came (a
  body over its limit, 413, refused unread) may go on sending the body, which uvicorn drops,
  for this long; then the connection is closed. Kept open, a client could send a body
  without end; closed at once, a client still sending (most send the whole body before they
  read) got a reset instead of the answer.

and :class:`Admission` keeps ``/health`` answering while requests flood in (ONYX_HTTP_ACTIVE_REQUESTS
worked on at once, ``/health`` never waits for a turn), as does :class:`FrozenServer` (no
garbage collection of the started service's objects). :func:`make_server` builds the uvicorn
server with them, the keep-alive timeout (ONYX_HTTP_KEEPALIVE_TIMEOUT) and the listen backlog
(ONYX_HTTP_BACKLOG), after making sure the process may open that many files
(:func:`open_files_for`). ``onyx serve``, ``onyx up`` and the tests all run the service through
it (:mod:`broker.registry.serve`).

>>> limits = ServerLimits(header_timeout=1.0, max_connections=100)
>>> limits.max_connections, limits.backlog
(100, 2048)
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import resource
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from broker import config

log = logging.getLogger("onyx.http")

RESERVED_FILES = 256 + 16 * config.SSE_MAX
"""Open files the service needs besides its client connections: its Kafka producer, admin
client and webhook dispatcher, the database, logs (34 in all, measured idle), and a Kafka
consumer per delivery stream, up to ONYX_SSE_MAX (8 files each on a one-node Kafka, measured;
a socket and wake-up descriptors more per broker of a larger cluster)."""


@dataclass(frozen=True)
class ServerLimits:
    """What one uvicorn server of the service allows (defaults: :mod:`broker.config`)."""

    header_timeout: float = config.HTTP_HEADER_TIMEOUT_S
    keepalive_timeout: float = config.HTTP_KEEPALIVE_TIMEOUT_S
    max_connections: int = config.HTTP_MAX_CONNECTIONS
    backlog: int = config.HTTP_BACKLOG
    active_requests: int = config.HTTP_ACTIVE_REQUESTS
    drain_timeout: float = config.HTTP_DRAIN_TIMEOUT_S


def _answer(status: str, detail: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, with the service's JSON error body."""
    body = json.dumps({"detail": detail}).encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"{extra}connection: close\r\n\r\n").encode() + body


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout, a connection limit and a bounded drain
    (see the module docstring); ``limits`` is set by :func:`make_server` on a subclass of its
    own."""

    limits: ClassVar[ServerLimits] = ServerLimits()
    _last_warning: ClassVar[float] = float("-inf")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._partial = False  # some bytes of the awaited request came

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        full = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)  # type: ignore[arg-type]
        if full:
            self._warn_full()
            self.transport.write(_answer("503 Service Unavailable", (
                f"the service has {self.limits.max_connections:,} connections open, as many as it takes: "
                "try again in a moment"), "retry-after: 1\r\n"))
            self.transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self._awaiting_request():
            self._arm()  # the first bytes of the next request on a kept-alive connection
        self._partial = self._partial or self._awaiting_request()
        super().data_received(data)
        if not self._awaiting_request():  # its headers are in: the request runs
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # answered before its body came (413, 400): the client may finish sending it (uvicorn
            # drops it) and read the answer, for a while; closed now, a client still sending would
            # get a reset and, often, lose the answer
            self.loop.call_later(self.limits.drain_timeout, self._drained, self.cycle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _warn_full(self) -> None:
        """Log that connections are refused, at most once a minute (a flood would fill the log)."""
        now = self.loop.time()
        if now - LimitedH11Protocol._last_warning >= 60:
            LimitedH11Protocol._last_warning = now
            log.warning("refusing connections: %d are open, the limit (ONYX_HTTP_MAX_CONNECTIONS)",
                        self.limits.max_connections)

    def _awaiting_request(self) -> bool:
        """Whether the connection waits for a request's line and headers (none has come yet, or
        the last one was answered and its body read)."""
        return self.conn.their_state is h11.IDLE

    def _arm(self) -> None:
        self._partial = False
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _drained(self, cycle: Any) -> None:
        """The drain's time is up: close the connection if that request's body is still coming."""
        if self.cycle is cycle and self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.transport.close()

    def _timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._awaiting_request():
            return
        if self._partial:  # a request started and never finished its headers: say why it ends
            self.transport.write(_answer("408 Request Timeout", (
                f"the request's line and headers did not arrive within {self.limits.header_timeout:g} s "
                "(ONYX_HTTP_HEADER_TIMEOUT)")))
        self.transport.close()


class Admission:
    """At most ``limit`` requests in the service's hands at once (pure ASGI); the others wait
    their turn, parked, and requests to ``exempt`` paths (``/health``) never wait.

    The service answers every request on one event loop, which runs each turn all the work
    that was ready when the turn began: with 1,000 delivery-stream attempts arriving together,
    a ``/health`` that came with them waited up to 0.26-0.32 s in the service behind their
    routing, lookups and error answers; with the others parked (64 at a time), 0.03-0.10 s
    (2 shared cores). The wait before the service reads its request (the connections queued
    before it are accepted first) stays. A request holds its
    turn while the service works on it, not while it waits for its client's body, nor once
    its answer has started (a stream holds a slot of its own instead,
    :class:`broker.registry.limits.StreamSlots`)."""

    def __init__(self, app: Any, limit: int, exempt: Collection[str] = ("/health",)) -> None:
        self.app, self.exempt = app, frozenset(exempt)
        self.turns = asyncio.Semaphore(limit)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        held, answering = False, False

        async def take() -> None:
            nonlocal held
            await self.turns.acquire()
            held = True

        def give() -> None:
            nonlocal held
            if held:
                held = False
                self.turns.release()

        async def receive_turnless():
            give()  # waiting for the client is not work
            message = await receive()
            if not answering:
                await take()
            return message

        async def send_answer(message) -> None:
            nonlocal answering
            if message["type"] == "http.response.start":
                answering = True
                give()
            await send(message)

        await take()
        try:
            await self.app(scope, receive_turnless, send_answer)
        finally:
            give()


def open_files_for(limits: ServerLimits) -> ServerLimits:
    """``limits`` as this process can keep them: the soft limit of open files is raised (up
    to the hard one) to the connection limit plus :data:`RESERVED_FILES`; if the hard limit is
    lower, fewer connections are allowed (logged). A process started with the common soft
    limit of 1,024 files would otherwise fail to accept (and to open Kafka sockets) long
    before the connection limit.

    >>> open_files_for(ServerLimits(max_connections=10)).max_connections
    10
    """
    need = limits.max_connections + RESERVED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft != resource.RLIM_INFINITY and soft < need:
        allowed = max(1, soft - RESERVED_FILES)
        log.warning("the process may open %d files (ulimit -n): %d connections allowed instead of %d "
                    "(ONYX_HTTP_MAX_CONNECTIONS)", soft, allowed, limits.max_connections)
        return replace(limits, max_connections=allowed)
    return limits


class FrozenServer(uvicorn.Server):
    """A uvicorn server that keeps what the service built before it started out of the garbage
    collector's sight while it serves (:func:`gc.freeze`). The service holds some 140,000
    objects once started (the app and its models, the overlay, the metadata); a full
    collection looked at all of them and stalled the event loop, and so every request,
    0.13-0.34 s each time (measured); a flood of requests made such collections frequent.
    Frozen, a full collection looks only at what was allocated since (right after: under 0.1 ms).
    Unfrozen when the server stops, so what the service leaves is collected."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        gc.collect()  # garbage left by the start, so it is not kept frozen
        gc.freeze()

    async def shutdown(self, sockets: Any = None) -> None:
        await super().shutdown(sockets)
        gc.unfreeze()


def make_server(app: Any, host: str, port: int, limits: ServerLimits | None = None) -> uvicorn.Server:
    """A uvicorn server of ``app`` on ``host``:``port`` with ``limits`` (default: the
    configured ones): the one way the service is served."""
    limits = open_files_for(limits or ServerLimits())
    protocol = type("OnyxHTTPProtocol", (LimitedH11Protocol,), {"limits": limits})
    # ws="none": the service has no WebSocket endpoint, so an upgrade request is an ordinary one
    return FrozenServer(uvicorn.Config(Admission(app, limits.active_requests), host=host, port=port,
                                       http=protocol, ws="none", log_level="warning",
                                       timeout_keep_alive=limits.keepalive_timeout,  # type: ignore[arg-type]
                                       backlog=limits.backlog))
