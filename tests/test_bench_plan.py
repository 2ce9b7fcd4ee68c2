"""A tiny run of bench.plan (the full run lives in bench/ and is not a test): both designs
measured, and the record of the removed shared plan carried over from the file it replaces."""

import doctest
import json

import bench.plan
from bench import plan


def test_docstring_examples():
    assert doctest.testmod(bench.plan).failed == 0


def test_quick_run_measures_both_designs_and_keeps_the_removed_record(tmp_path):
    out = tmp_path / "plan.json"
    removed = {"measured_at": "abc1234", "results": [
        {"local_profiles": n, "routed_s": {"median": 0.002, "p99": 0.01}, "done_s": {"median": 0.01, "p99": 0.05}}
        for n in (30, 60)]}
    out.write_text(json.dumps({"removed_shared_plan": removed}))
    assert plan.main(["--quick", "--sizes", "30", "60", "--messages", "3", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["removed_shared_plan"] == removed
    assert [r["local_profiles"] for r in res["results"]] == [30, 60]
    for r in res["results"]:
        assert r["messages"] == 3 and r["table"]["links"] == plan.LINKS
        assert all(set(r[k]) == {"median", "p99"} for k in ("routed_s", "done_s", "flat_s"))
    assert out.with_suffix(".png").stat().st_size > 10_000
