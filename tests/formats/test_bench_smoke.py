"""A tiny run of ``bench.formats`` (not a timing test: speed is never asserted here)
writes the table's JSON with every workload, format and breakdown part, and the plot."""

from __future__ import annotations

import json

import formats
from bench import formats as bench_formats


def test_quick_run_writes_results(tmp_path) -> None:
    assert bench_formats.main(["--quick", "--docs", "2", "--profiles", "20", "--reps", "1",
                               "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "formats.json").read_text())
    workloads = results["workloads"]
    assert [f"{d}-{r}" for d, r in bench_formats.GRID] == list(workloads)[:9]
    for w in workloads.values():
        assert set(w["formats"]) == set(formats.available())
        assert w["formats"]["text"]["size_vs_text"] == 1.0
        assert w["formats"]["stream-dict+zstd-dict"]["size_vs_text"] < 1.0
        for mix in ("paths", "predicates"):
            match = w["match"][mix]
            assert set(match["us_per_doc"]) == set(bench_formats.MATCH_INPUTS)
            assert {"header parse (any input)", "text: lxml parse", "stream: decode",
                    "stream: of which columns"} <= set(match["breakdown_us"])
    assert {"speedup_paths", "speedup_predicates"} <= set(results["targets"])
    assert (tmp_path / "formats.png").stat().st_size > 10_000


def test_schema_tiny_run_writes_every_row_and_the_plot(tmp_path, capsys) -> None:
    from bench import schema as bench_schema

    out = tmp_path / "schema.json"
    assert bench_schema.main(["--sizes", "1000", "3000", "--reps", "1", "--before-budget", "0.2",
                              "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert set(res["adversarial"]) == set(bench_schema.ADVERSARIAL) | set(bench_schema.ADVERSARIAL_XSD)
    assert all(set(rows) == {"after", "before (regex)"} and rows["after"] for kind, rows in res["adversarial"].items()
               if kind in bench_schema.ADVERSARIAL)
    assert set(res["valid"]["DTD (NITF-like)"]) == {"after", "lxml", "before (regex)"}
    assert set(res["valid"]["XML Schema (NITF-like)"]) == {"after", "lxml"}
    assert "attlist name without >: before/after" in res["ratios"]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "before (regex)" in capsys.readouterr().out
