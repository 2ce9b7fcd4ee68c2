"""Splitting one pattern's value range into K buckets.

Numbers are split by range, strings by hash range (a stable 64-bit hash, so an
unseen value still has a fixed bucket). Boundaries follow the population: walking
the keys in order, each distinct key goes to the bucket where the middle of its
profile count falls, so buckets hold about equal numbers of profiles. One value is
never split: a value that alone outweighs a bucket fills one bucket.

A *dense* pattern (at least K distinct values) fills every bucket, and an unseen
value takes the bucket of the nearest known key below it. A *sparse* pattern has
fewer values than buckets, so each value is a bucket of its own and only some
bucket numbers are used; :meth:`Buckets.relabel` lets the partitioner move those
single-value buckets to the partitions that need load (otherwise bucket ``i`` of
every sparse pattern would pile up on the same few partitions), and an unseen value
goes to ``hash % K``, which spreads new values instead of stacking them on the few
known ones.

>>> from collections import Counter
>>> b = Buckets(4, Counter({1.0: 10, 2.0: 10, 3.0: 10, 4.0: 10}))
>>> [b(v) for v in (1.0, 2.0, 3.0, 4.0, 2.5, 99.0, -5.0)], b.dense
([0, 1, 2, 3, 1, 3, 0], True)
"""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from collections.abc import Mapping

from partitioning.predicates import Value


def stable_hash(value: Value) -> int:
    """A 64-bit hash that is the same in every process (Python's ``hash`` is salted)."""
    data = ("n" + repr(value) if isinstance(value, float) else "s" + value).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class Buckets:
    """Value -> bucket in ``[0, k)`` for one pattern, fitted to its values' counts."""

    def __init__(self, k: int, counts: Counter) -> None:
        self.k = k
        self.numeric = all(isinstance(v, float) for v in counts)
        self.dense = len(counts) >= k
        weighted = sorted((self._key(v), n, v) for v, n in counts.items())
        total = sum(n for _, n, _ in weighted) or 1
        self.keys: list = []
        self.buckets: list[int] = []
        self.known: dict[Value, int] = {}
        before = 0
        for key, n, value in weighted:
            b = min(k - 1, int(k * (before + n / 2) / total))
            self.keys.append(key)
            self.buckets.append(b)
            self.known[value] = b
            before += n

    def _key(self, value: Value):
        return value if self.numeric and isinstance(value, float) else stable_hash(value)

    def relabel(self, mapping: Mapping[int, int]) -> None:
        """Send the known values of bucket ``b`` to ``mapping[b]`` instead."""
        self.known = {v: mapping.get(b, b) for v, b in self.known.items()}

    def __call__(self, value: Value) -> int:
        b = self.known.get(value)
        if b is None:
            if self.dense and (isinstance(value, float) or not self.numeric):
                i = bisect.bisect_right(self.keys, self._key(value)) - 1
                b = self.buckets[max(i, 0)]
            else:
                b = stable_hash(value) % self.k
            self.known[value] = b
        return b
