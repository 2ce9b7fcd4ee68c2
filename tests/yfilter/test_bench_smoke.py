"""A tiny run of ``bench.yfilter`` (not a timing test: speed is never asserted here)
writes the results, the targets and, with ``--profile``, where the engine's time goes."""

from __future__ import annotations

import json

from bench import yfilter as bench_yfilter


def test_quick_run_with_profile_writes_results(tmp_path, capsys) -> None:
    out, plot = tmp_path / "yfilter.json", tmp_path / "yfilter.png"
    assert bench_yfilter.main(["--sizes", "200", "--workloads", "pred", "--docs", "3",
                               "--warmup", "3", "--passes", "1", "--lxml-max", "50",
                               "--profile", "--out", str(out), "--plot", str(plot)]) == 0
    results = json.loads(out.read_text())
    (r,) = results["results"]
    assert (r["workload"], r["profiles"], r["lxml_extrapolated"]) == ("pred", 200, True)
    # The floors were timed in turns with the engine, and each ratio is its quotient.
    assert r["x_floor"] == r["engine_bytes_s"] / r["floor_s"]
    assert r["x_walk_floor"] == r["engine_bytes_s"] / r["walk_floor_s"]
    assert r["x_event_floor"] == r["engine_bytes_s"] / r["event_floor_s"]
    assert 0 < r["floor_s"] and 0 < r["walk_floor_s"] and 0 < r["event_floor_s"]
    assert set(results["floors"]) == {"parse_s", "parse_event_walk_s", "parse_walk_s",
                                      "event_walk_s"}
    assert r["add_s"] > 0 and r["add_each_s"] > 0  # add_many and its peer, add one by one
    rows = r["profile"]
    assert 0 < len(rows) <= 15
    assert all(0 <= row["own_share"] <= row["cumulative_share"] <= 1.0001 for row in rows)
    assert [row["own_share"] for row in rows] == sorted((row["own_share"] for row in rows),
                                                        reverse=True)
    # The engine's own modules show up by their paths in the repository.
    assert any(row["function"].startswith("yfilter/") for row in rows)
    assert "speedup_10k_pred" not in results["targets"]  # no 10k run, no claim about it
    printed = capsys.readouterr().out
    assert "calls/msg" in printed and rows[0]["function"] in printed
    assert plot.stat().st_size > 10_000


def test_quick_corpus_run_writes_results(tmp_path) -> None:
    out = tmp_path / "c.json"
    assert bench_yfilter.main(["--sizes", "100", "--workloads", "c-or,c-mixed", "--passes", "1",
                               "--lxml-max", "20", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["workload"] for r in results["results"]] == ["c-or", "c-mixed"]
    r = results["results"][1]
    assert r["statistic"] == "median" and r["messages"] > 40 and r["lxml_extrapolated"]
    assert 0 < r["match_fraction"] < 1 and r["bytes_per_profile"] != 0
    assert (tmp_path / "c.png").stat().st_size > 10_000
