"""The per-input time limit of the fuzz targets that parse what one request to the
registration service carries (a source's schema, a profile): work per request must be
bounded, so an input whose parse takes more than :data:`LIMIT` seconds of CPU is a
failure, raised as :class:`SlowInput` from the target. Under atheris that is a crash
like any other: libFuzzer saves the input as ``crash-...`` in the artifacts folder and
the run exits non-zero, in ``make fuzz`` and in the seeded round of the test suite alike
(and the corpus replay names the file).

Measured robustly, because the suite runs on shared 2-core machines:

* CPU time of this thread (``time.thread_time``), not wall time: waiting for a core
  while other processes run costs nothing here.
* An input over the limit runs again, up to :data:`RUNS` times in all, after a garbage
  collection, and fails only if every run was over. A one-off stall (a collection of
  earlier inputs' garbage, a first use that compiles a pattern or fills a cache, a
  neighbour thrashing the shared caches) does not come back three times in a row; a
  super-linear parse does, every time.
* Caches that would make a repeated parse free are emptied before each run (``reset``),
  so that the runs after the first measure the same work.

The limit sits far above what a legitimate input costs (a few ms, coverage
instrumentation included) and far below what the reported attack cost (a 6 KB DTD:
0.4 s); ``ONYX_FUZZ_CPU_LIMIT_MS`` overrides it (``python -m tests.fuzz --cpu-limit-ms``).

>>> within_limit(lambda: sum(range(10)))
45
>>> ticks = iter([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])  # a clock on which every run takes 0.5 s
>>> within_limit(lambda: "parsed", clock=lambda: next(ticks))
Traceback (most recent call last):
...
tests.fuzz.limit.SlowInput: the input took 500, 500 and 500 ms of CPU (limit: 100 ms)
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LIMIT_ENV = "ONYX_FUZZ_CPU_LIMIT_MS"
LIMIT = int(os.environ.get(LIMIT_ENV, "100")) / 1000
"""Seconds of CPU one input may take in a timed target."""
RUNS = 3
"""Runs an input over the limit gets before it fails."""


class SlowInput(Exception):
    """An input took more than the limit in every run."""


def within_limit(call: Callable[[], T], *, reset: Callable[[], None] = lambda: None,
                 limit: float | None = None, clock: Callable[[], float] = time.thread_time) -> T:
    """``call()``'s result; :class:`SlowInput` if it took more than ``limit`` seconds
    (default :data:`LIMIT`) of ``clock`` in each of :data:`RUNS` runs. ``reset`` runs
    (untimed) before each run; a run's exception propagates at once."""
    limit = LIMIT if limit is None else limit
    took = []
    while True:
        reset()
        start = clock()
        result = call()
        took.append(clock() - start)
        if took[-1] <= limit:
            return result
        if len(took) == RUNS:
            ms = [f"{t * 1000:.0f}" for t in took]
            raise SlowInput(f"the input took {', '.join(ms[:-1])} and {ms[-1]} ms of CPU "
                            f"(limit: {limit * 1000:.0f} ms)")
        gc.collect()
