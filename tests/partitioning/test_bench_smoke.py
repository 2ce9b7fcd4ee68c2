"""Tiny runs of the PEP benchmarks (the full runs live in bench/ and are not tests)."""

import json

from bench import pep, pep_pipeline


def test_figure9_quick_run_writes_the_promised_json_and_plot(tmp_path, capsys):
    out = tmp_path / "pep.json"
    assert pep.main(["--quick", "--profiles", "20000", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert len(res["repetitions"]) == len(res["pep_percent"]) == len(res["random_percent"]) > 1
    assert res["repetitions"][0] == 0 and res["repetitions"][-1] == 40
    assert res["pep_percent"][0] <= res["pep_bound_percent"][0] < res["random_percent"][0]
    assert res["oracle"]["disagreements"] == 0 and res["oracle"]["messages"] > 0
    assert res["extraction"]["mismatches"] == 0 and res["pep"]["dont_care"] == 0
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "placing 20,000 profiles" in capsys.readouterr().out


def test_pipeline_quick_run_compares_the_three_placements(tmp_path):
    out = tmp_path / "pipe.json"
    assert pep_pipeline.main(["--quick", "--brokers", "8", "--profiles", "300", "--messages", "20",
                              "--json", str(out)]) == 0
    res = json.loads(out.read_text())["results"]["uniform"]
    assert set(res) == {"nearest", "random", "pep"}
    for r in res.values():
        assert 0 < r["ideal_fraction"] <= r["visited_fraction"] <= 1 and r["false_negatives"] == 0
