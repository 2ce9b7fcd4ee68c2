"""The simulator: exact deliveries under churn, replays and reordering, with and
without generalization; deterministic; a command line that writes JSON and a plot."""

import doctest
import json

import pytest

import routing.placement
import routing.report
import routing.workload
from routing.budget import Budget
from routing.placement import PlacementRequest
from routing.simulate import Config, Simulation, SimulationError, main

SMALL = dict(brokers=14, profiles=400, messages=30, churn=0.5, sources=2, replay=0.3, samples=6)


@pytest.mark.parametrize("module", [routing.placement, routing.report, routing.workload])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def _run(**kw) -> dict:
    return Simulation(Config(**{**SMALL, **kw})).run()


def _correct(r: dict) -> None:
    assert r["false_negatives"] == 0
    assert r["delivery_mismatches"] == 0
    assert r["result_mismatches"] == 0  # every host's results are the centralized engine's on the whole message
    assert r["results_compared"] >= r["deliveries"]
    assert r["deliveries"] == r["expected_deliveries"]
    assert r["profiles_delivered_exactly"] == r["profiles_with_matches"]
    assert r["table_mismatches"] == 0
    assert r["ideal_link_messages"] <= r["link_messages"] <= r["flooding_link_messages"]
    assert r["link_messages"] - r["false_positive_link_messages"] == r["ideal_link_messages"]
    assert r["link_bytes"] <= r["flooding_link_bytes"]


@pytest.mark.parametrize("interests", ["uniform", "geo"])
@pytest.mark.parametrize("generalize", [False, True])
def test_every_profile_gets_exactly_its_messages_under_churn(interests, generalize):
    r = _run(interests=interests, generalize=generalize, budget=Budget(atoms=60, predicates=30),
             seed=3 if generalize else 4)
    _correct(r)
    assert r["expected_deliveries"] > 0
    churned = r["profiles"]
    assert churned["added"] > SMALL["profiles"] and churned["updated"] and churned["deleted"]
    if generalize:
        # Every table holds its children's summaries, each generalized to its share of
        # the budget; the exact queries stay with the summaries of the brokers below.
        assert r["tables"]["atoms"]["max"] <= 60 < r["summaries"]["exact_atoms"]["max"]
        assert r["summaries"]["plans"]["total"] > 0
    else:
        assert r["false_positive_link_messages"] == 0  # exact tables only relax nested paths


@pytest.mark.parametrize("generalize", [False, True])
def test_incremental_transformation_gives_transformation_profiles_their_exact_results(generalize):
    kw = dict(transform=1.0, profiles=150, messages=25, brokers=20, generalize=generalize,
              budget=Budget(atoms=60), seed=5)
    r = _run(bandwidth=1e5, **kw)  # a slow link: every transformation is worth it
    _correct(r)  # every host ran its profiles on what it received: results equal the truth's
    assert r["expected_deliveries"] > 0
    assert 0 < r["transformed_link_messages"] <= r["link_messages"]
    whole = _run(incremental=False, **kw)  # --no-transform: every link carries the message
    _correct(whole)
    assert whole["transformed_link_messages"] == 0 and whole["transformed_link_bytes"] == 0
    assert r["link_bytes"] < whole["link_bytes"]
    assert r["cpu"]["forwards_seconds"] > 0 and r["cpu"]["deliver_seconds"] > 0


@pytest.mark.parametrize("bindings", [1, 3])
def test_shared_for_paths_drop_bindings_on_the_links(bindings):
    r = _run(transform=1.0, bindings=bindings, profiles=200, messages=25, brokers=16, bandwidth=1e5, seed=8)
    _correct(r)
    assert r["transformed_link_messages"] > 0


def test_a_filter_below_a_link_sends_the_whole_message():
    r = _run(transform=0.5, profiles=300, messages=20, seed=6, bandwidth=1e5)
    _correct(r)
    assert r["transformed_link_messages"] < r["link_messages"]
    plain = _run(profiles=300, messages=20, seed=6, bandwidth=1e5)
    _correct(plain)
    assert plain["transformed_link_bytes"] == 0 and plain["transformed_link_messages"] == 0


def test_runs_are_deterministic():
    a, b = _run(seed=9, messages=12), _run(seed=9, messages=12)
    for r in (a, b):
        r.pop("timings"), r.pop("cpu")
    assert a == b


def test_an_atom_engine_per_broker_routes_as_the_shared_one():
    # bandwidth 1e5: every link whose transformation saves bytes transforms (no timing in the choice)
    kw = dict(seed=9, messages=12, transform=0.5, bandwidth=1e5)
    shared, own = _run(**kw), _run(engine="per-broker", **kw)
    _correct(own)
    for r in (shared, own):
        r.pop("timings"), r.pop("cpu"), r["config"].pop("engine")
    assert shared == own


def test_placement_is_pluggable_and_checked():
    hosts = []

    def first_broker(req: PlacementRequest) -> str:
        hosts.append(req.near)
        return "b1"

    r = Simulation(Config(**{**SMALL, "churn": 0.0}), placement=first_broker).run()
    _correct(r)
    assert len(hosts) == SMALL["profiles"]
    with pytest.raises(SimulationError, match="unknown broker"):
        Simulation(Config(**SMALL), placement=lambda sub: "nowhere").run()


def test_real_corpus_messages(tmp_path):
    corpus = "/work/shared/corpus/news"
    r = _run(corpus=corpus, profiles=200, messages=15, churn=0.2)
    _correct(r)
    assert r["flooding_link_bytes"] > 15 * 1000 * (r["overlay"]["brokers"] - 1) / 2


@pytest.mark.parametrize("bad, message", [
    (dict(brokers=1), "at least 2 brokers"),
    (dict(sources=99), "--sources"),
    (dict(replay=1.0), "--replay"),
    (dict(interests="local"), "unknown --interests"),
    (dict(transform=1.5), "--transform"),
    (dict(bindings=3), "--bindings"),
    (dict(transform=1.0, bindings=-1), "--bindings"),
    (dict(bandwidth=0), "--bandwidth"),
])
def test_bad_configs_are_refused(bad, message):
    with pytest.raises(SimulationError, match=message):
        Simulation(Config(**{**SMALL, **bad}))


def test_command_line_writes_json_and_plot(tmp_path, capsys):
    out = tmp_path / "sim.json"
    code = main(["--brokers", "10", "--profiles", "150", "--messages", "8", "--churn", "0.3", "--seed", "2",
                 "--generalize", "--budget", "atoms=40", "--interests", "geo", "--json", str(out), "--quiet",
                 "--transform", "0.5", "--bandwidth", "1e5"])
    assert code == 0
    r = json.loads(out.read_text())
    for key in ("false_negatives", "expected_deliveries", "deliveries", "link_messages",
                "flooding_link_messages", "link_bytes", "flooding_link_bytes"):
        assert key in r
    assert r["config"]["budget"] == {"atoms": 40, "states": None, "predicates": None}
    assert r["config"]["bandwidth"] == 1e5 and r["config"]["incremental"] is True
    assert r["result_mismatches"] == 0 and "forwards_per_message" in r["cpu"]
    assert (tmp_path / "sim.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "link messages" in printed and "false negatives" in printed


def test_command_line_help_and_errors(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--generalize" in out and "--bandwidth" in out and "--no-transform" in out
    with pytest.raises(SystemExit):
        main(["--budget", "rooms=3"])
    assert main(["--brokers", "1", "--quiet"]) == 2
    assert "at least 2 brokers" in capsys.readouterr().err
