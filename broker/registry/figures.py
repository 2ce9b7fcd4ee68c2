"""The brokers' live figures, as the registration service shows them (console, ``/metrics``).

The figures come from whoever runs the brokers: ``onyx up`` (and the tests' local overlays)
hand the service :meth:`broker.local.cluster.LocalOverlay.status`, the same figures
``onyx status`` prints from ``.run/status.json``. A service started on its own (``onyx serve``)
has none and shows the overlay and its profiles only. The source is asked at most once per
``every`` seconds however many clients watch; a failing source gives the last figures and
the error.

>>> calls = []
>>> figures = Figures(lambda: calls.append(1) or {"brokers": [{"broker": "b1", "messages": 3}]}, every=60)
>>> figures.snapshot()["brokers"][0]["messages"], figures.snapshot()["brokers"][0]["messages"], len(calls)
(3, 3, 1)
>>> Figures(None).snapshot()["brokers"]
[]
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from broker import config

Source = Callable[[], dict[str, Any]]


class Figures:
    """A cache of the brokers' figures (``{"time": ..., "brokers": [...], "error": ...}``)."""

    def __init__(self, source: Source | None, every: float = config.CONSOLE_EVERY_S) -> None:
        self.source = source
        self.every = every
        self._lock = threading.Lock()
        self._last: dict[str, Any] = {"time": 0.0, "brokers": [], "error": None}

    def snapshot(self) -> dict[str, Any]:
        """The figures, gathered again if older than ``every`` seconds."""
        with self._lock:
            if self.source is None or time.time() - self._last["time"] < self.every:
                return self._last
            try:
                got = self.source()
                self._last = {"time": time.time(), "brokers": got.get("brokers", []), "error": None,
                              **({"archive": got["archive"]} if "archive" in got else {})}
            except Exception as exc:  # Kafka away, say: the last figures, and why they are old
                self._last = {**self._last, "time": time.time(), "error": str(exc).splitlines()[0][:300]}
            return self._last
