"""Per-request and per-subscriber limits of the registration service.

* :class:`BodyLimit`: no request body larger than its operation allows (413, before the
  body is parsed: a ``Content-Length`` over the limit is refused unread, a body sent
  without one is counted as it arrives);
* :class:`RateLimiter`: a token bucket per subscriber for the profiles it registers,
  updates and deletes (429 with ``Retry-After``), so one subscriber cannot keep the
  service to itself;
* :class:`StreamSlots`: how many event streams one subscriber and all of them may hold
  open (429 with ``Retry-After`` past either), each stream a thread of the service (and a
  Kafka consumer, for a profile's deliveries).

>>> now = [0.0]
>>> limiter = RateLimiter(rate=10, burst=20, clock=lambda: now[0])
>>> limiter.charge("s1", 15)                   # a burst: the bucket had 20
>>> limiter.charge("s1", 10)
Traceback (most recent call last):
...
broker.registry.limits.RateLimited: subscriber s1 may register, update or delete 10/s, in bursts of up to 20 profiles: this request has 10 and 5 are left; retry in 0.5 s (Retry-After) or send fewer per request
>>> now[0] = 0.5                               # 5 tokens came back
>>> limiter.charge("s1", 10)
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import HTTPException
from fastapi.responses import JSONResponse, StreamingResponse

from broker import config


class BodyLimit:
    """Refuses a request whose body exceeds its path's limit (``limits``, by exact path)
    or ``default`` bytes with 413 and a JSON ``detail`` (pure ASGI). A ``Content-Length``
    over the limit is answered before the body is read; a body without one (chunked) is
    counted while the endpoint reads it and refused when it passes the limit."""

    def __init__(self, app, default: int, limits: Mapping[str, int] | None = None) -> None:
        self.app, self.default, self.limits = app, default, dict(limits or {})

    def limit(self, path: str) -> int:
        """The largest body a request to ``path`` may have, in bytes."""
        return self.limits.get(path, self.default)

    @staticmethod
    def message(size: int | None, limit: int) -> str:
        """What a client whose body is too large is told."""
        has = f"has {size:,} bytes" if size is not None else "is longer"
        return (f"the request body {has}, more than the {limit:,} bytes this operation takes: send fewer "
                "profiles or changes per request (the limits are in the API description, /docs)")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope["path"])
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            response = JSONResponse(status_code=413, content={"detail": self.message(int(length), limit)})
            await response(scope, receive, send)
            return
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # FastAPI passes an HTTPException raised while reading the body on
                    raise HTTPException(413, self.message(None, limit))
            return message

        await self.app(scope, counted, send)


class RateLimited(Exception):
    """A subscriber asked for more than its bucket holds; ``retry_after`` in seconds."""

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.detail, self.retry_after = detail, retry_after

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds (at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    """A token bucket per key (a subscriber id; ``None`` for requests without a
    subscriber, which share one): it holds up to ``burst`` tokens, gains ``rate`` a
    second, and each profile registered, updated or deleted takes one. A request
    larger than ``burst`` needs a full bucket. ``rate`` 0 means no limit. Thread-safe
    (the service's endpoints run in a thread pool); ``clock`` is for tests."""

    MAX_KEYS = 10_000
    """Buckets kept before the full ones (the same as none) are dropped."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 who: str = "subscriber", what: str = "register, update or delete", items: str = "profiles") -> None:
        if rate < 0 or burst < 1:
            raise ValueError(f"a registration rate limit needs rate >= 0 and burst >= 1, not {rate} and {burst}: "
                             "see ONYX_REGISTRATION_RATE and ONYX_REGISTRATION_BURST")
        self.rate, self.burst, self.clock = rate, burst, clock
        self.who, self.what, self.items = who, what, items  # the words of its refusals
        self._buckets: dict[str | None, _Bucket] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls) -> "RateLimiter":
        """The limiter ``broker.config`` sets (ONYX_REGISTRATION_RATE, ONYX_REGISTRATION_BURST)."""
        return cls(config.REGISTRATION_RATE, config.REGISTRATION_BURST)

    @property
    def enabled(self) -> bool:
        """Whether requests are limited at all."""
        return self.rate > 0

    def _level(self, bucket: _Bucket, now: float) -> float:
        return min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)

    def charge(self, key: str | None, n: int) -> None:
        """Take ``n`` tokens from ``key``'s bucket, or raise :class:`RateLimited` (taking none)."""
        if not self.enabled or n <= 0:
            return
        need = min(n, self.burst)
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            level = self._level(bucket, now) if bucket else float(self.burst)
            if level < need:
                wait = (need - level) / self.rate
                who = f"{self.who} {key}" if key else "requests without a token"
                raise RateLimited(f"{who} may {self.what} {self.rate:,g}/s, in bursts of up to "
                                  f"{self.burst:,} {self.items}: this request has {n:,} and {math.floor(level):,} are "
                                  f"left; retry in {wait:.1f} s (Retry-After) or send fewer per request", wait)
            if bucket is None:
                if len(self._buckets) >= self.MAX_KEYS:
                    self._drop_full(now)
                bucket = self._buckets[key] = _Bucket(level, now)
            bucket.tokens, bucket.at = level - need, now

    def _drop_full(self, now: float) -> None:
        for key in [k for k, b in self._buckets.items() if self._level(b, now) >= self.burst]:
            del self._buckets[key]

    def describe(self) -> str:
        """The limit in a sentence, for the API description."""
        if not self.enabled:
            return "Registrations are not rate-limited."
        return (f"Each subscriber may register, update or delete {self.rate:,g} profiles a second, in bursts of up "
                f"to {self.burst:,} (a token bucket; every item of a batch counts, refused or not; requests without "
                "a subscriber token share one bucket); past that a request is refused with 429 and Retry-After.")


T = TypeVar("T")


class StreamsFull(HTTPException):
    """No stream slot for this key (429 with ``Retry-After``; the connection is closed, it has
    nothing else to do)."""

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(429, detail, headers={"Retry-After": str(retry_after), "Connection": "close"})


class StreamSlots:
    """At most ``per_key`` open streams per key (a subscriber) and ``total`` in all; thread-safe.
    A stream takes a :class:`Slot` before it starts (:class:`StreamsFull` when there is none),
    does its blocking work in the slot's thread (a pool of ``total`` threads, so every stream
    has one: in asyncio's default pool, 6 threads on 2 cores, the seventh stream waited for
    the others' second-long reads of Kafka, and so did every request's database lookups), and
    gives the slot back when it ends or its client goes away (:meth:`Slot.response`).

    >>> slots = StreamSlots(total=3, per_key=2, what="delivery streams")
    >>> a, b = slots.acquire("s1"), slots.acquire("s1")
    >>> slots.acquire("s1")
    Traceback (most recent call last):
    ...
    broker.registry.limits.StreamsFull: 429: subscriber s1 has 2 delivery streams open, as many as one may: close one, or retry in 5 s (Retry-After)
    >>> c = slots.acquire("s2")
    >>> slots.acquire("s3")
    Traceback (most recent call last):
    ...
    broker.registry.limits.StreamsFull: 429: the service has 3 delivery streams open, as many as it takes: retry in 5 s (Retry-After)
    >>> a.release(); a.release(); slots.open, slots.held("s1")
    (2, 1)
    >>> slots.close()
    """

    def __init__(self, total: int, per_key: int | None = None, what: str = "streams",
                 retry_after: int = config.SSE_RETRY_AFTER_S) -> None:
        if total < 1 or (per_key is not None and per_key < 1):
            raise ValueError(f"{what} need room for one at least, not total={total}, per_key={per_key}")
        self.total, self.per_key, self.what, self.retry_after = total, per_key or total, what, retry_after
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.executor = ThreadPoolExecutor(total, thread_name_prefix="onyx-stream")

    @property
    def open(self) -> int:
        """Streams open now."""
        return sum(self._held.values())

    def held(self, key: str) -> int:
        """Streams ``key`` holds now."""
        return self._held[key]

    def acquire(self, key: str) -> "Slot":
        """A slot for one more stream of ``key``, or :class:`StreamsFull`."""
        with self._lock:
            if self.open >= self.total:
                raise StreamsFull(f"the service has {self.total:,} {self.what} open, as many as it takes: retry in "
                                  f"{self.retry_after} s (Retry-After)", self.retry_after)
            if self._held[key] >= self.per_key:
                raise StreamsFull(f"subscriber {key} has {self._held[key]} {self.what} open, as many as one may: "
                                  f"close one, or retry in {self.retry_after} s (Retry-After)", self.retry_after)
            self._held[key] += 1
        return Slot(self, key)

    def _release(self, key: str) -> None:
        with self._lock:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

    def close(self) -> None:
        """Let the streams' threads end (when the service stops)."""
        self.executor.shutdown(wait=False, cancel_futures=True)


class Slot:
    """One stream's place in :class:`StreamSlots`: given back once by :meth:`release`."""

    def __init__(self, slots: StreamSlots, key: str) -> None:
        self.slots, self.key = slots, key
        self._released = False
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread of the streams' pool (it may block, on Kafka say)."""
        return await asyncio.get_running_loop().run_in_executor(self.slots.executor, fn, *args)

    def release(self) -> None:
        """Give the slot back (again: nothing)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self.slots._release(self.key)

    def response(self, content: Any, **kwargs: Any) -> StreamingResponse:
        """A streaming response of ``content`` that gives the slot back when it ends, whether the
        stream ended, failed, or its client went away (Starlette cancels it then)."""
        return _SlotResponse(self, content, **kwargs)


class _SlotResponse(StreamingResponse):
    def __init__(self, slot: Slot, content: Any, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.slot = slot

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()
