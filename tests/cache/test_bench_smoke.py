"""A tiny run of bench.cache (the full run lives in bench/ and is not a test)."""

import json

from bench import cache as bench_cache


def test_quick_run_writes_the_promised_json_and_plot(tmp_path, capsys):
    out = tmp_path / "cache.json"
    assert bench_cache.main(["--quick", "--messages", "120", "--latency-ms", "1", "--large", "6", "--entries", "5,15",
                             "--probes", "3", "--sweep-messages", "60", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert set(res["summary"]) == {f"{mix}/{run}" for mix in ("base", "restricting", "expanding", "large")
                                   for run in (1, 2)}
    rows = res["queries"]
    assert sum(r["mix"] == "base" for r in rows) == 26 and sum(r["mix"] == "large" for r in rows) == 12
    assert all(set(r["match_counts"]) == {"exact", "containing", "contained", "overlapping", "disjoint"} for r in rows)
    # The second run of a mix finds everything in the cache and asks the source nothing.
    for mix in ("base", "restricting", "large"):
        assert res["summary"][f"{mix}/2"]["from_cache_share"] == 1.0
        assert res["summary"][f"{mix}/2"]["answered_without_source"] == res["summary"][f"{mix}/2"]["queries"]
    assert res["summary"]["base/1"]["from_cache_share"] < 1.0
    assert [x["entries"] for x in res["lookup_sweep"]] == [5, 5, 15, 15]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "mix/run" in capsys.readouterr().out
