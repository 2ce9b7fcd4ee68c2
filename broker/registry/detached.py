"""Answers computed apart from their client: a producer runs in a thread of its own and
hands what it finds to the streamed answer through a queue, so that the archive's shared
lock (:func:`archive.snapshot.snapshot`), which the producer holds while it reads, is never
held while a slow client takes its time: the producer reads, releases, and the answer
streams what it left at the client's pace. What a producer may leave is bounded by the
caller (result counts and bytes: ONYX_REPLAY_MAX_BYTES and the operations' limits).

>>> def produce(emit):
...     for i in range(3):
...         emit(("item", i))
...     return "done"
>>> list(detached(produce))
[('item', 0), ('item', 1), ('item', 2), ('done', 'done')]
>>> def failing(emit):
...     raise ValueError("no archive")
>>> list(detached(failing))
[('error', ValueError('no archive'))]
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

Event = tuple[str, Any]
Emit = Callable[[Event], None]


def detached(produce: Callable[[Emit], Any], name: str = "onyx-answer") -> Iterator[Event]:
    """Run ``produce(emit)`` in a daemon thread and yield each event it emits as it comes,
    then ``("done", its return value)``, or ``("error", the exception)`` if it raised."""
    events: queue.SimpleQueue[Event] = queue.SimpleQueue()

    def run() -> None:
        try:
            events.put(("done", produce(events.put)))
        except Exception as exc:  # noqa: BLE001 - handed to the answer's last line
            events.put(("error", exc))

    threading.Thread(target=run, name=name, daemon=True).start()
    while True:
        event = events.get()
        yield event
        if event[0] in ("done", "error"):
            return
