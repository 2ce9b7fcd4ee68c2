"""A tiny run of bench.delivery_volume (the full run lives in bench/ and is not a test)."""

import json

import pytest

from bench import delivery_volume
from broker import config


@pytest.mark.skipif(not any(config.CORPUS_DIR.glob("*.xml")), reason="no news corpus (ONYX_CORPUS)")
def test_a_small_run_counts_records_and_bytes_before_and_after(tmp_path, capsys):
    out = tmp_path / "delivery_volume.json"
    assert delivery_volume.main(["--sizes", "500", "--subscribers", "10", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    runs = {(r["layout"], r["way"]): r for r in res["runs"]}
    layouts = ("one subscriber", "10 subscribers")
    assert set(runs) == {(layout, way) for layout in layouts for way in delivery_volume.WAYS}
    one = runs[("one subscriber", "copy")]
    # every message that matched makes one record on the one topic (500 ids fit in one header)
    assert one["total"]["records_after"] == one["matched"] and one["total"]["records_before"] > one["matched"]
    for r in res["runs"]:
        assert r["total"]["records_before"] == one["total"]["records_before"]  # the same matches every time
        assert r["total"]["bytes_after"] <= r["total"]["bytes_before"]
        assert all(m["records_after"] <= min(m["records_before"], 10) for m in r["messages_detail"])
    spread = runs[("10 subscribers", "reference")]
    assert spread["total"]["bytes_after"] < runs[("10 subscribers", "copy")]["total"]["bytes_after"]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "records before" in capsys.readouterr().out
