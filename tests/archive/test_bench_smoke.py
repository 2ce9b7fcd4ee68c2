"""A tiny run of the archive benchmark (the full run lives in bench/ and is not a test)."""

import json

from bench import archive


def test_quick_run_writes_the_promised_json_and_plot(tmp_path, capsys):
    out = tmp_path / "archive.json"
    assert archive.main(["--quick", "--triples", "3000", "--intervals", "2000", "--queries", "3",
                         "--tt-triples", "2000", "--messages", "120", "--profiles", "2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    b, v, t, a = res["e_bplus"], res["e_vt"], res["e_tt"], res["archive"]
    assert b["time_ratio"] > 1 and b["size_ratio"] > 1
    assert set(v["runs"]) == {"buffer_0", "buffer_12"} and len(v["runs"]["buffer_0"]["ritree"]) == len(v["windows"])
    assert v["buffer_saving"]["ritree"] > v["buffer_saving"]["rtree_1d"]
    assert [x["deleted"] for x in t["variants"]] == [0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert all(x["space_ratio"] > 1 for x in t["variants"])
    assert a["messages"] == 120 and a["replay_index_ms_median"] > 0
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "E-TT" in capsys.readouterr().out
