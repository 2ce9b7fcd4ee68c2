"""The worked examples of the reading notes (``notes-temporal-index.md`` section 5) and of
the thesis they come from, as acceptance cases."""

from __future__ import annotations

import pytest

from archive import MVBT, RITree, conditions
from archive.errors import ParameterError
from archive.intervals import (coalesce, difference_intervals, difference_points, meet_closed,
                               meet_half_open)
from archive.ritree import fork, query_nodes


def test_point_and_interval_model_difference():
    r1 = [(20, 30), (31, 40), (41, 50)]
    r2 = [(26, 32)]
    assert coalesce(difference_points(r1, r2)) == [(20, 25), (33, 50)]
    assert difference_intervals(r1, r2) == r1
    uncoalesced = difference_points(r1, r2)
    assert uncoalesced == [(20, 25), (33, 40), (41, 50)]
    points = {t for a, b in uncoalesced for t in range(a, b + 1)}
    assert points == {t for a, b in coalesce(uncoalesced) for t in range(a, b + 1)}   # snapshot-equivalent


def test_half_open_and_closed_intersection():
    assert not meet_half_open((1, 5), (5, 9))
    assert meet_closed((1, 5), (5, 9))
    r = RITree()
    r.insert(1, 5, "x")
    assert r.intersecting(5, 9) == set() and r.intersecting(4, 9) == {"x"}


def test_ritree_figure_3_13():
    assert query_nodes(5, 9, 4) == ([4], [12, 10])
    forks = {(5, 9): 8, (5, 6): 6, (9, 11): 10, (1, 3): 2, (13, 15): 14, (2, 14): 8}
    assert {iv: fork(*iv) for iv in forks} == forks
    r = RITree()
    for lo, hi in [(1, 3), (5, 6), (9, 11), (2, 14), (13, 15)]:
        r.insert(lo - 1, hi, f"[{lo},{hi}]")   # closed [lo, hi] is half-open [lo - 1, hi) shifted by one
    assert r.intersecting(5 - 1, 9) == {"[5,6]", "[9,11]", "[2,14]"}


def test_mvbt_parameters():
    v = conditions.variable(1.0, 0.25, 0.5)
    assert (v.strong_lo, v.strong_hi) == (0.375, 0.875)
    assert 0.875 > 2 * 0.375                          # key split check, c = 0.5
    f = conditions.fixed(6, 2, 0.5)
    assert (f.strong_lo, f.strong_hi) == (3, 5)       # post-split live count in [3, 5]
    with pytest.raises(ParameterError):
        conditions.fixed(6, 2, 0.6)
    with pytest.raises(ParameterError):
        MVBT(d=0.3, e=0.5)                            # 1 - e d = 0.85 <= 2 (1 + e) d = 0.9
    with pytest.raises(ParameterError):
        MVBT(e=1.0)


def test_figure_3_14_versions():
    t = MVBT(page_size=1024)
    t.insert_range([(("A", "p1", "B"), b""), (("A", "p2", "C"), b""), (("A", "p3", "D"), b"")], 1)
    # v2: (A, p2, C) becomes (A, p3, C): an update is a delete and an insert.
    t.delete(("A", "p2", "C"), 2)
    t.insert(("A", "p3", "C"), 3, b"")
    # next: (A, p3, C) is replaced by (A, p2, F).
    t.delete(("A", "p3", "C"), 4)
    t.insert(("A", "p2", "F"), 5, b"")
    keys = lambda v: sorted(k for k, _ in t.timeslice(v))   # noqa: E731
    assert keys(1) == [("A", "p1", "B"), ("A", "p2", "C"), ("A", "p3", "D")]
    assert keys(3) == [("A", "p1", "B"), ("A", "p3", "C"), ("A", "p3", "D")]
    assert keys(5) == [("A", "p1", "B"), ("A", "p2", "F"), ("A", "p3", "D")]
    assert t.history(("A", "p3", "C")) == [(3, 4, b"")]
    # (A, p2, C) lived [1, 2): it ends where the closed window [2, 3] starts.
    assert sorted(k for k, *_ in t.range(("A", "p2"), ("A", "p3", "\uffff"), 2, 3)) == \
        [("A", "p3", "C"), ("A", "p3", "D")]
    assert [k for k, *_ in t.range(("A", "p2"), ("A", "p2", "\uffff"), 1, 1)] == [("A", "p2", "C")]
