"""A tiny run of bench.subscribers (the full run lives in bench/ and is not a test)."""

import json

import pytest

from bench import subscribers

pytestmark = pytest.mark.kafka


def test_quick_run_counts_topics_per_shape_and_times_kafka(tmp_path, kafka, capsys):
    out = tmp_path / "subscribers.json"
    assert subscribers.main(["--profiles", "300", "--registrations", "20", "--topics", "5",
                             "--kafka", kafka.bootstrap_servers, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    one, each = res["service"]["one subscriber"], res["service"]["one per profile"]
    assert (one["subscribers"], one["delivery_topics"], one["profiles"]) == (1, 1, 320)
    assert (each["subscribers"], each["delivery_topics"], each["topics_created_by_timed_registrations"]) == (320, 320, 20)
    assert res["kafka"]["topics"] == 5 and res["kafka"]["create_ms_p50"] > 0
    assert res["extrapolated"]["topics"] == 300
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "one per profile" in capsys.readouterr().out
