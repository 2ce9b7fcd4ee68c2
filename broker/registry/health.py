"""Whether the database answers, for ``GET /health``, without waiting behind the service's work.

The service's synchronous endpoints run in anyio's thread pool (40 threads) and the delivery
streams in threads of their own; a ``/health`` that pinged the database from the first waited
for a free thread whenever slow requests held them all, and a probe that times out restarts a
healthy service. :class:`DatabasePing` pings from one thread of its own, at most one ping at a
time (concurrent checks share it, so a hung database does not pile pings up), and gives up
after ``timeout`` seconds (ONYX_HEALTH_TIMEOUT): the database does not answer, the service is
not ready.

>>> import asyncio
>>> ping = DatabasePing(lambda: None)
>>> asyncio.run(ping.check()) is None
True
>>> def down() -> None:
...     raise OSError("connection refused")
>>> asyncio.run(DatabasePing(down).check())
'connection refused'
>>> ping.close()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from broker import config


class DatabasePing:
    """``await check()``: None when ``ping()`` returned within ``timeout`` seconds, else why not."""

    def __init__(self, ping: Callable[[], None], timeout: float = config.HEALTH_TIMEOUT_S) -> None:
        self.ping, self.timeout = ping, timeout
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="onyx-health")
        self._pending: Future[None] | None = None
        self._lock = threading.Lock()  # checks may come from several event loops (in-process test clients)

    async def check(self) -> str | None:
        """None if the database answered, else what went wrong (at most 200 characters)."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._executor.submit(self.ping)
            pending = self._pending
        try:  # shielded: a check that gives up leaves the ping to the next one
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(pending)), self.timeout)
        except TimeoutError:
            return f"the database did not answer within {self.timeout:g} s (ONYX_HEALTH_TIMEOUT)"
        except Exception as exc:  # any database failure means "not ready", reported, not raised
            return str(exc)[:200]
        return None

    def close(self) -> None:
        """Let the ping's thread end (when the service stops)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
