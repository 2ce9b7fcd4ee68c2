"""The holistic plan: priority order of its events, the wait queue of transformations,
pruning of reached targets, operators shared across classes, and agreement with
evaluating every target on its own (lxml for routing, the engine for the rest)."""

import doctest
import importlib

import pytest
from lxml import etree

from tests.yfilter.oracle import strip_msg
from yfilter import Engine, ProfileError
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator
from yfilter.plan import Plan, Route, Routed, Transformed, UserResult

DOC = (b"<nitf><head><pubdata edition.area='SF'/><title>Tides</title></head>"
       b"<body><hl1>Up</hl1><p>x</p></body></nitf>")
OTHER = b"<nitf><head><pubdata edition.area='LA'/></head><body><hl1>Down</hl1></body></nitf>"


@pytest.mark.parametrize("name", ["yfilter.plan", "yfilter.flwr", "yfilter.steps",
                                  "yfilter.transform", "yfilter.navigate",
                                  "yfilter.generators.flwr"])
def test_docstring_examples(name):
    assert doctest.testmod(importlib.import_module(name)).failed == 0


def _kinds(events):
    return [type(e).__name__ for e in events]


@pytest.fixture(scope="module")
def big_plan():
    """1 routing target and 100,000 local profiles (generated NITF filters)."""
    plan = Plan()
    plan.add_route("sf", "/nitf/head/pubdata[@edition.area = 'SF']")
    plan.add_transform("sf", "tides", "for $n in $msg/nitf return <t>{$n/head/title}</t>")
    gen = ProfileGenerator(Schema.nitf(), depth=5, p_desc=0.2, n_preds=(0, 1), distinct=False,
                           seed=4)
    for i, text in enumerate(gen.batch(99_999)):
        plan.add_user(f"u{i}", text)
    plan.add_user("hl", "//hl1")
    assert len(plan.engine) == 100_000
    return plan


def test_routing_decision_comes_before_any_user_work(big_plan):
    events = []
    for event in big_plan.process(DOC):
        if isinstance(event, Routed):
            # the generator stops here until asked for more: no user operator ran yet
            assert big_plan.counters.user_ops == 0 and big_plan.counters.route_ops > 0
            assert not any(isinstance(e, UserResult) for e in events)
        events.append(event)
    kinds = _kinds(events)
    assert kinds[:3] == ["Route", "Routed", "Transformed"] and events[0] == Route("sf")
    assert events[2] == Transformed("sf", "tides", (b"<t><title>Tides</title></t>",))
    assert set(kinds[3:]) == {"UserResult"} and len(kinds) > 10
    assert UserResult("hl", (DOC,)) in events
    assert big_plan.counters.user_ops > 0


def test_transformation_of_a_link_not_reached_never_runs(big_plan):
    events = list(big_plan.process(OTHER))
    assert events[0] == Routed(())
    c = big_plan.counters
    assert c.transform_ops == 0 and c.transforms_run == 0 and c.transform_skipped == 1
    assert not any(isinstance(e, Transformed) for e in events)
    assert UserResult("hl", (OTHER,)) in events
    # the counter does see the transformation when nothing holds it back
    list(big_plan.process(OTHER, prune=False))
    assert big_plan.counters.transform_ops > 0 and big_plan.counters.transforms_run == 1


def test_a_reached_link_skips_the_rest_of_its_work():
    plan = Plan()
    plan.add_route("a", [["//em"], ["/nitf/body/p[. = 'x']", "/nitf/head/title"],
                         ["/nitf/head/pubdata[@edition.area = 'SF']"]])
    plan.add_route("b", [["/nitf/head/title", "//quote"], ["/nitf/body/p[. = 'x']"]])
    assert _kinds(plan.process(DOC))[:3] == ["Route", "Route", "Routed"]
    c = plan.counters
    assert (c.conjunctions_evaluated, c.conjunctions_skipped) == (4, 1)  # a's third skipped
    assert c.paths_evaluated == 4  # em, p, title, then quote: b finds title and p decided
    pruned = c.route_ops
    assert _kinds(plan.process(DOC, prune=False))[:3] == ["Route", "Route", "Routed"]
    c = plan.counters
    assert (c.conjunctions_evaluated, c.paths_evaluated) == (5, 5)
    assert c.route_ops > pruned


def test_an_operator_shared_by_classes_runs_once_at_the_highest_priority():
    shared = "/nitf[contains(., 'Tides')]/body"
    alone = Plan()
    alone.add_user("u", shared)
    list(alone.process(DOC))
    both = Plan()
    both.add_route("l", shared)
    both.add_user("u", shared)
    events = list(both.process(DOC))
    assert events[:2] == [Route("l"), Routed(("l",))] and UserResult("u", (DOC,)) in events
    # the predicate was evaluated by routing; the user class found it in the memo
    assert both.counters.user_ops < alone.counters.user_ops
    assert both.counters.ops <= alone.counters.ops + both.counters.route_ops


def test_registration_replace_remove_and_errors():
    plan = Plan({"n": "urn:n"})
    base = plan.stats()
    plan.add_route("l", "/nitf/head")
    plan.add_route("l", [["/nitf/head/title", "/nitf/body/hl1/text()"]])  # replaced
    plan.add_route("m", "/n:x/@n:y")
    plan.add_transform("l", "t", "for $b in $msg/nitf/body return <b>{$b/hl1}</b>")
    plan.add_transform("l", "t", "for $b in $msg/nitf/body return <c>{$b/p}</c>")
    plan.add_user("u", "for $h in $msg//hl1 return <h>{$h/text()}</h>")
    assert plan.links == ["l", "m"]
    assert list(plan.process(DOC)) == [Route("l"), Routed(("l",)),
                                       Transformed("l", "t", (b"<c><p>x</p></c>",)),
                                       UserResult("u", (b"<h>Up</h>",))]
    for bad in (lambda: plan.add_route("l", [["/nitf", "/a[b"]]),
                lambda: plan.add_transform("l", "t", "/nitf"),
                lambda: plan.add_transform("l", "t", "for $b in $msg/x return <b>")):
        with pytest.raises(ProfileError):
            bad()
    assert _kinds(plan.process(DOC))[:3] == ["Route", "Routed", "Transformed"]  # unchanged
    plan.remove_route("l")
    assert list(plan.process(DOC))[:1] == [Routed(())]  # its transformation waits for ever
    plan.remove_transform("l", "t")
    plan.remove_route("m")
    plan.remove_user("u")
    with pytest.raises(KeyError):
        plan.remove_route("m")
    after = plan.stats()
    flushes = {"dfa_flushes": 0, "rel_dfa_flushes": 0}
    assert after | flushes == base | flushes


def _lxml_route(dnf, root) -> bool:
    return any(all(root.xpath(f"boolean({strip_msg(p)})") for p in conj) for conj in dnf)


@pytest.mark.parametrize("seed", [1, 2])
def test_plan_agrees_with_each_target_on_its_own(seed):
    """Routes against lxml, transformations and users against a plain engine run."""
    schema = Schema.nitf()
    paths = ProfileGenerator(schema, depth=4, n_preds=(0, 1), rich=0.5, distinct=False,
                             seed=seed).batch(120)
    flwrs = [s.text() for s in FlwrGenerator(schema, seed=seed).specs(60)]
    users = ProfileGenerator(schema, depth=5, n_preds=(0, 2), n_nested=1, rich=0.7,
                             seed=seed + 10).batch(200) + flwrs[40:]
    routes = {f"l{i}": [paths[j:j + 1 + (j % 3)] for j in range(i * 12, i * 12 + 12, 3)]
              for i in range(10)}
    plan = Plan()
    reference = Engine()
    for link, dnf in routes.items():
        plan.add_route(link, dnf)
    for i, text in enumerate(flwrs[:40]):
        plan.add_transform(f"l{i % 10}", f"t{i}", text)
        reference.add(f"t{i}", text)
    for i, text in enumerate(users):
        plan.add_user(f"u{i}", text)
        reference.add(f"u{i}", text)
    docs = DocGenerator(schema, doc_depth=6, max_repeats=3, seed=seed)
    routed = transformed = 0
    for _ in range(6):
        xml = docs.generate()
        root = etree.fromstring(xml)
        events = list(plan.process(xml))
        assert events == list(plan.process(xml, prune=False))
        want_links = tuple(link for link, dnf in routes.items() if _lxml_route(dnf, root))
        assert events[len(want_links)] == Routed(want_links)
        assert events[:len(want_links)] == [Route(link) for link in want_links]
        expected = reference.run(xml)
        got_t = {e.profile_id: list(e.results) for e in events if isinstance(e, Transformed)}
        want_t = {pid: r for pid, r in expected.items()
                  if pid.startswith("t") and f"l{int(pid[1:]) % 10}" in want_links}
        assert got_t == want_t
        got_u = {e.profile_id: list(e.results) for e in events if isinstance(e, UserResult)}
        assert got_u == {pid: r for pid, r in expected.items() if pid.startswith("u")}
        routed += len(want_links)
        transformed += len(got_t)
    assert routed and transformed  # not vacuous
