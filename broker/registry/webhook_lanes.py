"""Per-subscriber queues ("lanes") served by a shared pool of workers, one item of a lane at a time.

Why: webhook receivers are the subscribers' own servers, and one that hangs or keeps failing
must delay only its own subscriber. Each subscriber has a bounded FIFO lane; a worker takes the
head of a lane that is ready, and no other worker touches that lane until the item is done
(:meth:`Lanes.done`) or put back to wait (:meth:`Lanes.later`: a retry's backoff, a rate limit).
So a subscriber has at most one POST in flight (its deliveries stay in order), a lane that
waits holds no worker, and ready lanes are served in turn (the one ready longest first).

>>> lanes = Lanes(capacity=2)
>>> for key, item in (("a", "a1"), ("a", "a2"), ("b", "b1")):
...     lanes.put(key, item)
>>> lanes.full("a"), lanes.full("b")  # the caller stops filling a's lane
(True, False)
>>> lanes.take(), lanes.take()       # a1 is in service, so a2 waits: b's turn
(('a', 'a1'), ('b', 'b1'))
>>> lanes.later("b", 60)             # b1 again in a minute (its worker moves on)
>>> lanes.done("a"); lanes.take()
('a', 'a2')
>>> lanes.length("a"), lanes.length("b")
(1, 1)
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Item = TypeVar("Item")


@dataclass
class _Lane(Generic[Item]):
    items: deque[Item] = field(default_factory=deque)
    busy: bool = False       # a worker holds its head
    scheduled: bool = False  # it is in the heap of lanes waiting for a worker


class Lanes(Generic[Item]):
    """Bounded FIFO lanes keyed by subscriber, handed out to worker threads (thread-safe).
    ``capacity`` is what :meth:`full` counts from; the caller stops filling a full lane
    (the lane itself never refuses, so a record already read is never lost)."""

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity, self.clock = capacity, clock
        self._lanes: dict[Hashable, _Lane[Item]] = {}
        self._ready: list[tuple[float, int, Hashable]] = []  # (when, tie-breaker, key), a heap
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closed = False

    def put(self, key: Hashable, item: Item) -> None:
        """Append ``item`` to ``key``'s lane."""
        with self._changed:
            lane = self._lanes.setdefault(key, _Lane())
            lane.items.append(item)
            if not lane.busy and not lane.scheduled:
                self._schedule(key, lane, self.clock())

    def full(self, key: Hashable) -> bool:
        """Whether ``key``'s lane holds ``capacity`` items or more."""
        return self.length(key) >= self.capacity

    def length(self, key: Hashable) -> int:
        """Items in ``key``'s lane (the one in service included)."""
        with self._changed:
            lane = self._lanes.get(key)
            return len(lane.items) if lane else 0

    def take(self) -> tuple[Hashable, Item] | None:
        """Block until a lane is ready; its key and head item (left in the lane, which is now
        this caller's until :meth:`done` or :meth:`later`). ``None`` once :meth:`close` was called."""
        with self._changed:
            while not self._closed:
                now = self.clock()
                if self._ready and self._ready[0][0] <= now:
                    _, _, key = heapq.heappop(self._ready)
                    lane = self._lanes[key]
                    lane.scheduled, lane.busy = False, True
                    return key, lane.items[0]
                self._changed.wait(self._ready[0][0] - now if self._ready else None)
            return None

    def done(self, key: Hashable) -> None:
        """The head of ``key``'s lane is finished: drop it and let the lane's next item be taken."""
        with self._changed:
            lane = self._lanes[key]
            lane.items.popleft()
            lane.busy = False
            if lane.items:
                self._schedule(key, lane, self.clock())
            else:
                del self._lanes[key]  # an idle subscriber costs nothing

    def later(self, key: Hashable, delay: float) -> None:
        """Put ``key``'s lane back with its head, to be taken again in ``delay`` seconds."""
        with self._changed:
            lane = self._lanes[key]
            lane.busy = False
            self._schedule(key, lane, self.clock() + delay)

    def close(self) -> None:
        """Wake every worker waiting in :meth:`take`, which answers ``None`` from now on."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _schedule(self, key: Hashable, lane: _Lane[Item], when: float) -> None:
        lane.scheduled = True
        heapq.heappush(self._ready, (when, next(self._order), key))
        self._changed.notify()
