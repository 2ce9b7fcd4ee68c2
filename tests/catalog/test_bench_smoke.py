"""A tiny run of bench.catalog (the full run lives in bench/ and is not a test)."""

import json

import pytest

from bench import catalog

pytestmark = pytest.mark.postgres


def test_tiny_run_writes_every_curve_fig15_and_the_ratios(tmp_path, capsys, postgres):
    out = tmp_path / "catalog.json"
    assert catalog.main(["--rules", "30", "60", "--max-batch", "3", "--fig15-rules", "40", "--fig15-percents", "10",
                         "50", "--quick", "--json", str(out)], postgres=postgres) == 0
    res = json.loads(out.read_text())
    assert set(res["curves"]) == {f"{db}/{t}/{n}" for db in ("sqlite", "postgresql")
                                  for t in ("OID", "COMP", "PATH", "JOIN") for n in (30, 60)}
    assert all(set(c) == {"1", "3"} and all(v["ms_per_doc"] > 0 for v in c.values()) for c in res["curves"].values())
    assert set(res["fig15"]) == {"sqlite/10", "sqlite/50", "postgresql/10", "postgresql/50"}
    assert res["curves"]["sqlite/JOIN/30"]["1"]["iterations"] == 2 and res["curves"]["sqlite/OID/30"]["1"]["iterations"] == 0
    assert "sqlite/OID 60/30 rules" in res["ratios"]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "Fig. 15" in capsys.readouterr().out
