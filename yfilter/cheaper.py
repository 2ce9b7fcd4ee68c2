"""Choose the cheaper of two ways to do the same work, by their measured cost.

Some choices have no good static rule: whether rebuilding a decoded message as a tree
for the C matcher costs less than the Python runtime on its table depends on how
many profiles a message meets and how hard they are to check, which only the
running engine sees. Both ways give the same answer, so the engine can simply try
both and keep the cheaper. :class:`Cheaper` alternates until each way has ``warm``
samples (keeping the least cost per unit of work each showed: first runs pay for
cold caches, and noise only ever adds time), then takes the way with the lower
cost, kept as an exponential moving average so that a change in the workload is
followed. It takes the other way again (a probe) once the chosen way has spent
``patience`` times what the other one took last: probes then cost at most about
1/``patience`` of the time, however much dearer the other way is.

>>> pick = Cheaper(warm=1)
>>> pick.choose()            # untried ways first
0
>>> pick.record(0, seconds=3.0, units=1)
>>> pick.choose()
1
>>> pick.record(1, seconds=1.0, units=1)
>>> pick.choose()            # the cheaper one from now on, but for the probes
1
"""

from __future__ import annotations


class Cheaper:
    """Picks way 0 or way 1 (see the module docstring)."""

    def __init__(self, *, warm: int = 2, patience: float = 16.0, weight: float = 0.2) -> None:
        if warm < 1 or patience <= 0 or not 0 < weight <= 1:
            raise ValueError("need warm >= 1, patience > 0 and 0 < weight <= 1")
        self.warm, self.patience, self.weight = warm, patience, weight
        self.samples = [0, 0]
        self.cost = [0.0, 0.0]  # seconds per unit
        self.last = [0.0, 0.0]  # seconds the last time each way was taken
        self.way = 0  # the way taken last
        self.spent = 0.0  # seconds on it since the other was taken

    def choose(self) -> int:
        """The way to take now."""
        if min(self.samples) < self.warm:
            return 0 if self.samples[0] <= self.samples[1] else 1
        best = 0 if self.cost[0] <= self.cost[1] else 1
        if self.way == best and self.spent >= self.patience * self.last[1 - best]:
            return 1 - best
        return best

    def record(self, way: int, seconds: float, units: int) -> None:
        """What taking ``way`` just cost, for ``units`` of work (e.g. elements)."""
        cost = seconds / max(units, 1)
        n = self.samples[way] = self.samples[way] + 1
        if n == 1:
            self.cost[way] = cost
        elif n <= self.warm:
            self.cost[way] = min(self.cost[way], cost)
        else:
            self.cost[way] += self.weight * (cost - self.cost[way])
        self.last[way] = seconds
        self.spent = self.spent + seconds if way == self.way else seconds
        self.way = way
