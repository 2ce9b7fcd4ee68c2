"""The RI-tree against brute force, on B+-trees and on SQL tables (SQLite)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archive import RITree
from archive.errors import IntervalError, KeyStateError


def _brute(stored, lo, hi):
    return {i for a, b, i in stored if (hi is None or a < hi) and (b is None or lo < b)}


@pytest.fixture(params=["tree", "sqlite"])
def make(request, tmp_path):
    def build():
        if request.param == "tree":
            return RITree(page_size=512, buffer_pages=4)
        return RITree(f"sqlite:///{tmp_path / 'ri.db'}")
    return build


def test_random_intervals_match_brute_force(make):
    rnd = random.Random(9)
    r = make()
    stored = []
    for n in range(600):
        if stored and rnd.random() < 0.25:
            a, b, i = stored.pop(rnd.randrange(len(stored)))
            r.delete(a, b, i)
        else:
            a = rnd.randrange(5000)
            b = None if rnd.random() < 0.05 else a + rnd.choice([1, rnd.randrange(1, 60), rnd.randrange(1, 3000)])
            i = rnd.choice([n, f"p{n}"])
            r.insert(a, b, i)
            stored.append((a, b, i))
        assert r.check() == sum(1 for x in stored if x[1] is not None)      # after every change
        if n % 20 == 0:
            for _ in range(5):
                lo = rnd.randrange(6000)
                hi = None if rnd.random() < 0.1 else lo + rnd.randrange(1, 800)
                assert r.intersecting(lo, hi) == _brute(stored, lo, hi)


@settings(max_examples=80, deadline=None)
@given(ivs=st.lists(st.tuples(st.integers(0, 70), st.integers(1, 40)), max_size=40),
       q=st.tuples(st.integers(0, 120), st.integers(1, 60)))
def test_small_cases_match_brute_force(ivs, q):
    r = RITree(page_size=256, buffer_pages=0)
    stored = []
    for n, (a, length) in enumerate(ivs):
        r.insert(a, a + length, n)
        stored.append((a, a + length, n))
        assert r.check() == len(stored)
    lo, hi = q[0], q[0] + q[1]
    assert r.intersecting(lo, hi) == _brute(stored, lo, hi)


def test_errors(make):
    r = make()
    with pytest.raises(IntervalError):
        r.insert(5, 5, "x")
    with pytest.raises(IntervalError):
        r.insert(-1, 5, "x")
    r.insert(1, 5, "x")
    with pytest.raises(KeyStateError):
        r.insert(1, 5, "x")
    with pytest.raises(KeyStateError):
        r.delete(1, 6, "x")
    with pytest.raises(IntervalError):
        r.intersecting(3, 2)


def test_sql_tables_persist(tmp_path):
    url = f"sqlite:///{tmp_path / 'ri.db'}"
    r = RITree(url)
    r.insert(10, 20, "a")
    r.insert(15, None, "b")
    r.close()
    assert RITree(url).intersecting(0, 16) == {"a", "b"}


def test_tree_files_persist(tmp_path):
    r = RITree(path=tmp_path / "ri")
    for i in range(500):
        r.insert(i, i + 10, i)
    r.close()
    assert RITree(path=tmp_path / "ri").intersecting(100, 101) == set(range(91, 101))
