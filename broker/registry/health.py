"""Whether the database answers, for ``GET /health``, without waiting behind the service's work.

The service's synchronous endpoints run in anyio's thread pool (40 threads) and the delivery
streams in threads of their own; a ``/health`` that pinged the database from the first waited
for a free thread whenever slow requests held them all. Pinging from a thread of its own for
each check was not enough either: while the event loop is busy (1,000 requests at once) a
thread gets the interpreter's lock only every few milliseconds, and a ping that needs it a few
dozen times took up to 0.4 s. So :class:`DatabasePing` pings from a thread of its own, four
times per ``timeout`` (ONYX_HEALTH_TIMEOUT), and a check answers from the last ping at once: the
database is down if the last ping failed, or if none has answered for ``timeout`` seconds (a
hung database). The thread runs while someone asks (it stops after :data:`IDLE_S` seconds
without a check, and the next check starts it again and waits for its first ping).

>>> import asyncio
>>> ping = DatabasePing(lambda: None)
>>> asyncio.run(ping.check()) is None
True
>>> ping.close()
>>> def down() -> None:
...     raise OSError("connection refused")
>>> failing = DatabasePing(down)
>>> asyncio.run(failing.check())
'connection refused'
>>> failing.close()
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from broker import config

IDLE_S = 60.0
"""A pinging thread stops after this long without a check: longer than any probe's period
(the Helm chart's liveness probe comes every 20 s), so a probed service keeps its thread."""


class DatabasePing:
    """``await check()``: None when the database answered a ping within the last ``timeout``
    seconds and the last ping succeeded, else why not (see the module docstring)."""

    def __init__(self, ping: Callable[[], None], timeout: float = config.HEALTH_TIMEOUT_S) -> None:
        self.ping, self.timeout = ping, timeout
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first = threading.Event()  # the running thread has pinged once
        self._running = False
        self._asked = 0.0
        self._answered: float | None = None  # when a ping last succeeded (monotonic)
        self._failure: str | None = None  # why the last ping failed (None: it succeeded)

    def _run(self) -> None:
        while True:
            try:
                self.ping()
                answered, failure = time.monotonic(), None
            except Exception as exc:  # any database failure means "not ready", reported, not raised
                answered, failure = None, str(exc)[:200]
            with self._lock:
                self._answered = answered or self._answered
                self._failure = failure
                self._first.set()
                if time.monotonic() - self._asked > IDLE_S:  # decided under the lock: a check starts another
                    self._running = False
                    return
            if self._stop.wait(self.timeout / 4):
                return

    async def check(self) -> str | None:
        """None if the database answers, else what went wrong (at most 200 characters)."""
        with self._lock:
            self._asked = time.monotonic()
            if not self._running and not self._stop.is_set():
                self._running = True
                self._first.clear()
                threading.Thread(target=self._run, name="onyx-health", daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not self._first.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # once per start: wait for the first ping
        with self._lock:
            if self._failure is not None:
                return self._failure
            if self._answered is None or time.monotonic() - self._answered > self.timeout:
                return f"the database did not answer a ping within {self.timeout:g} s (ONYX_HEALTH_TIMEOUT)"
        return None

    def close(self) -> None:
        """Stop pinging (when the service stops)."""
        self._stop.set()
