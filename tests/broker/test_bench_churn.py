"""bench.churn: its correctness oracle on a made-up change log, and a tiny run on the real
overlay (the full run lives in bench/ and is not a test; no timing is asserted)."""

import json
from collections import Counter, defaultdict

import pytest

from bench import churn
from bench.churn import Change, lifetimes, messages, oracle


def _log():
    """Profile A (slot 3): added at 90 s, updated at 110 s (to messages from seq 100 on),
    deleted at 115 s; messages at 10/s from 100 s on, delivered by what was live."""
    msgs = messages(300, 0, 10, 1, "p", "m")
    t_pub = {m.id: 100 + m.seq * 0.1 for m in msgs}
    log = [Change("setup", 3, 3, "add", "A", 0, 30.0, 90.0, 90.01, 201),
           Change("p", 3, 3, "update", "A", 100, 10.0, 110.0, 110.01, 200),
           Change("p", 3, 3, "delete", "A", None, None, 115.0, 115.01, 204)]
    delivered = defaultdict(Counter)
    for m in msgs:
        t = t_pub[m.id]
        live = log[0] if t < 110 else log[1] if t < 115 else None
        if live is not None and live.matches(m):
            delivered[m.id]["A"] += 1
    return msgs, t_pub, lifetimes(log), delivered


def test_the_oracle_accepts_what_the_live_versions_deliver_and_flags_a_wrong_and_a_missed_delivery():
    msgs, t_pub, by_profile, delivered = _log()
    res = oracle(msgs, t_pub, by_profile, delivered, window=2.0)["p"]
    assert (res["wrong"], res["missed"], res["unknown_profile"]) == (0, 0, 0) and res["ambiguous"] > 0
    late = next(m for m in msgs if m.slot == 3 and t_pub[m.id] > 120)  # after the delete
    dropped = next(m for m in msgs if m.slot == 3 and 104 < t_pub[m.id] < 107 and m.price >= 30)
    delivered[late.id]["A"] += 1
    del delivered[dropped.id]["A"]
    delivered[late.id]["B"] += 1  # a profile the log never made
    res = oracle(msgs, t_pub, by_profile, delivered, window=2.0)["p"]
    assert (res["wrong"], res["missed"], res["unknown_profile"]) == (1, 1, 1)
    assert {e["verdict"]: e["message"] for e in res["examples"]} == {"wrong": late.id, "missed": dropped.id}
    assert res["max_window_needed_s"] == pytest.approx(5.7)  # the update at 110 s would excuse the miss
    wide = oracle(msgs, t_pub, by_profile, delivered, window=6.0)["p"]
    assert (wide["wrong"], wide["missed"]) == (0, 0)


@pytest.mark.kafka
@pytest.mark.spark
def test_tiny_run_on_the_overlay_writes_the_promised_json_and_finds_no_wrong_or_missed_delivery(
        tmp_path, spark, capsys):
    out = tmp_path / "churn.json"
    # W = 10 s: this checks what is delivered, not how fast; a busy test machine may take
    # seconds to carry a message through three hops.
    assert churn.main(["--background", "300", "--single", "20", "--pool", "100", "--rate", "20",
                       "--rates", "0,20,200", "--phase", "6", "--warm-up", "3", "--window", "10",
                       "--json", str(out)], spark=spark) == 0
    res = json.loads(out.read_text())
    assert res["registration"]["bulk"]["profiles"] == 300 and res["registration"]["one_by_one"]["profiles"] == 20
    assert [p["phase"] for p in res["phases"]] == ["0/s", "20/s", "200/s"]
    for p in res["phases"] + [res["warm_up"]]:
        assert p["probe_delivered"] == p["messages"] > 0  # the probe at b6 matches every message
        k = p["correctness"]
        assert (k["wrong"], k["missed"], k["unknown_profile"]) == (0, 0, 0), k["examples"]
        assert set(p["effect"]) == {"all", "add", "update", "delete"}
    assert res["phases"][0]["changes"] == 0 and all(p["changes"] > 0 for p in res["phases"][1:])
    assert sum(p["effect"]["all"]["seen"] for p in res["phases"]) > 0
    assert set(res["ratios"]) == {"20/s", "200/s"}
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "wrong" in capsys.readouterr().out
