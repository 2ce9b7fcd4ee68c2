"""A tiny run of bench.registration (the full run lives in bench/ and is not a test)."""

import json

import pytest

from bench import registration

pytestmark = pytest.mark.kafka


def test_quick_run_times_single_and_bulk_registration_and_the_floors(tmp_path, kafka, capsys):
    out = tmp_path / "registration.json"
    assert registration.main(["--bulk", "25", "--batch", "10", "--single", "8", "--kafka", kafka.bootstrap_servers,
                              "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["one_by_one_empty"]["profiles"] == res["one_by_one_full"]["profiles"] == 8
    assert [b["profiles"] for b in res["bulk"]["batches"]] == [10, 10, 5]
    assert res["bulk"]["per_s_median"] > 0 and res["one_by_one_full"]["ms_p50"] > 0
    stages = res["bulk"]["stages_ms_median"]
    assert set(stages) == {"check", "place", "topics", "insert", "kafka", "commit", "answer", "http+json"}
    assert stages["kafka"] > 0
    assert res["floors"]["validate_us"] > 0 and res["floors"]["engine_validation_us"] > 0  # timings: the benchmark's, not a test's
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "bulk (median batch)" in capsys.readouterr().out
