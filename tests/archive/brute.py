"""Brute-force references: a plain list of (key, value, start, end) for the MVBT, a set of
intervals for the RI-tree, and a random workload driver that checks a structure against
them after every step."""

from __future__ import annotations

import random

from archive import MVBT
from archive.errors import KeyStateError


class Versions:
    """The MVBT's reference: every lifespan ever, as a list."""

    def __init__(self) -> None:
        self.rows: list[list] = []          # [key, value, start, end]
        self.live: dict[tuple, list] = {}

    def insert(self, key, version, value) -> None:
        row = [key, value, version, None]
        self.rows.append(row)
        self.live[key] = row

    def delete(self, key, version) -> None:
        self.live.pop(key)[3] = version

    def delete_range(self, lo, hi, version) -> None:
        for key in [k for k in self.live if lo <= k <= hi]:
            self.delete(key, version)

    def timeslice(self, v):
        return sorted((k, val) for k, val, s, e in self.rows if s <= v and (e is None or v < e))

    def range(self, klo, khi, vlo, vhi):
        return sorted((k, val, s, e) for k, val, s, e in self.rows
                      if klo <= k <= khi and s <= vhi and (e is None or e > vlo))

    def history(self, key):
        return sorted((s, e, val) for k, val, s, e in self.rows if k == key)


def run_mvbt(seed: int, steps: int, *, page_size: int = 1024, nkeys: int = 400, path=None,
             buffer_pages: int = 16, split: str = "shortest", query_every: int = 25,
             full_check_every: int = 200, check: bool = True) -> dict:
    """Random inserts, deletes, range deletes and range inserts at increasing versions,
    with key-time range, timeslice and history queries compared with :class:`Versions`;
    invariants checked after every change (``check``) and over the whole DAG every
    ``full_check_every`` steps. Returns counts of what ran."""
    rnd = random.Random(seed)
    t = MVBT(path, page_size=page_size, buffer_pages=buffer_pages, split=split, check=check)
    ref = Versions()
    v = 0
    counts = dict.fromkeys(("insert", "delete", "delete_range", "insert_range", "query"), 0)
    for step in range(1, steps + 1):
        v += rnd.randint(1, 3)
        op = rnd.random()
        if op < 0.5 or not ref.live:
            key = ("k", rnd.randrange(nkeys))
            if key in ref.live:
                try:
                    t.insert(key, v, b"dup")
                except KeyStateError:
                    continue
                raise AssertionError(f"inserting live key {key} was accepted")
            value = b"v%d" % step
            t.insert(key, v, value)
            ref.insert(key, v, value)
            counts["insert"] += 1
        elif op < 0.88:
            key = rnd.choice(list(ref.live))
            t.delete(key, v)
            ref.delete(key, v)
            counts["delete"] += 1
        elif op < 0.93:
            a = rnd.randrange(nkeys)
            lo, hi = ("k", a), ("k", a + rnd.randrange(nkeys // 8))
            t.delete_range(lo, hi, v)
            ref.delete_range(lo, hi, v)
            counts["delete_range"] += 1
        else:
            a = rnd.randrange(nkeys)
            keys = sorted({("k", a + rnd.randrange(nkeys // 6)) for _ in range(rnd.randrange(1, 40))} - set(ref.live))
            if not keys:
                continue
            items = [(k, b"r%d" % step) for k in keys]
            t.insert_range(items, v)
            for k, val in items:
                ref.insert(k, v, val)
            counts["insert_range"] += 1
        if step % query_every == 0:
            counts["query"] += 1
            at = rnd.randint(0, v)
            assert list(t.timeslice(at)) == ref.timeslice(at), f"timeslice at {at} (step {step})"
            a = rnd.randrange(nkeys)
            klo, khi = ("k", a), ("k", a + rnd.randrange(nkeys // 4))
            vlo = rnd.randint(0, v)
            vhi = rnd.randint(vlo, v)
            assert sorted(t.range(klo, khi, vlo, vhi)) == ref.range(klo, khi, vlo, vhi), \
                f"range {klo}..{khi} x {vlo}..{vhi} (step {step})"
            key = ("k", rnd.randrange(nkeys))
            assert t.history(key) == ref.history(key), f"history of {key} (step {step})"
        if full_check_every and step % full_check_every == 0:
            t.check()
    t.check()
    assert list(t.timeslice(v)) == ref.timeslice(v)
    assert t.stats()["live"] == len(ref.live)
    counts["versions"] = v
    counts["pages"] = t.stats()["pages"]
    return counts
