"""The paper's worked example (MDV, ``001``): Figure 1's document as Figure 4's FilterData, the
rule of section 3.3.1 as the atomic rules and tables of Figures 7 and 8, the filter run of
Figure 9, its result, and the update of section 3.5."""

from __future__ import annotations

import re

import pytest

from catalog import Backbone, LocalRepository
from catalog.document import FIGURE_1
from catalog.schema import FIGURE_1_SCHEMA

RULE_331 = ("search CycleProvider c register c where c.serverHost contains 'uni-passau.de' "
            "and c.serverInformation.memory > 64 and c.serverInformation.cpu > 500")

FIGURE_7_RULES = {
    1: ("search ServerInformation s register s where s.memory > 64", None),
    2: ("search ServerInformation s register s where s.cpu > 500", None),
    3: ("search CycleProvider c register c where c.serverHost contains 'uni-passau.de'", None),
    4: ("search view(1, ServerInformation) a, view(2, ServerInformation) b register a where a = b", 1),
    5: ("search view(4, ServerInformation) a, view(3, CycleProvider) c register c where c.serverInformation = a", 2),
}
FIGURE_7_DEPENDENCIES = {(1, 4, 1, 1), (2, 4, 2, 1), (4, 5, 1, 2), (3, 5, 2, 2)}
FIGURE_7_GROUPS = {
    1: "search group(ServerInformation) a, group(ServerInformation) b register a where a = b",
    2: "search group(ServerInformation) a, group(CycleProvider) c register c where c.serverInformation = a",
}


def _mapping(ours: list[tuple[int, str, int | None]]) -> tuple[dict[int, int], dict[int, int]]:
    """Our rule ids and group ids -> the paper's, found by matching texts (join rules' texts name
    their inputs' ids, so they are matched once their inputs are)."""
    rules, groups = {}, {}
    left = list(ours)
    while left:
        progress = False
        for rule_id, text, group in list(left):
            unknown = [int(n) for n in re.findall(r"view\((\d+),", text) if int(n) not in rules]
            if unknown:
                continue
            mapped = re.sub(r"view\((\d+),", lambda m: f"view({rules[int(m.group(1))]},", text)
            [paper] = [k for k, (t, _) in FIGURE_7_RULES.items() if t == mapped]
            rules[rule_id] = paper
            if group is not None:
                groups[group] = FIGURE_7_RULES[paper][1]
            left.remove((rule_id, text, group))
            progress = True
        assert progress, f"no paper rule for {left}"
    return rules, groups


@pytest.fixture
def example():
    mdp = Backbone()
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("lmr-1", backbone=mdp)
    return mdp, lmr


def test_figure_1_gives_exactly_the_seven_filter_data_rows_of_figure_4(example):
    mdp, _ = example
    mdp.register_document("doc.rdf", FIGURE_1)
    assert mdp.rows("FilterData", "uri_reference", "class", "property", "value") == sorted([
        ("doc.rdf#host", "CycleProvider", "rdf#subject", "doc.rdf#host"),
        ("doc.rdf#host", "CycleProvider", "serverHost", "pirates.uni-passau.de"),
        ("doc.rdf#host", "CycleProvider", "serverPort", "5874"),
        ("doc.rdf#host", "CycleProvider", "serverInformation", "doc.rdf#info"),
        ("doc.rdf#info", "ServerInformation", "rdf#subject", "doc.rdf#info"),
        ("doc.rdf#info", "ServerInformation", "memory", "92"),
        ("doc.rdf#info", "ServerInformation", "cpu", "600"),
    ], key=repr)


def test_the_331_rule_decomposes_into_figure_7_and_8_up_to_rule_ids(example):
    mdp, lmr = example
    lmr.subscribe(RULE_331)
    ours = mdp.atomic_rules()
    assert len(ours) == 5                                  # A, B, C, E, F; D is only an intermediate
    rules, groups = _mapping(ours)
    assert sorted(rules.values()) == [1, 2, 3, 4, 5]
    assert {(rules[r], t and groups.get(g)) for r, t, g in ours} == {(k, g) for k, (_, g) in FIGURE_7_RULES.items()}
    assert {(rules[s], rules[t], p, groups[g]) for s, t, p, g in mdp.rows("RuleDependencies")} == FIGURE_7_DEPENDENCIES
    assert {groups[g]: t for g, t in mdp.rows("RuleGroups", "group", "text")} == FIGURE_7_GROUPS
    # Figure 8: the triggering rules, constants as strings
    cols = ("rule_id", "class", "property", "value")
    assert {(rules[r], *rest) for r, *rest in mdp.rows("FilterRules_GT", *cols)} == {
        (1, "ServerInformation", "memory", "64"), (2, "ServerInformation", "cpu", "500")}
    assert {(rules[r], *rest) for r, *rest in mdp.rows("FilterRules_CON", *cols)} == {
        (3, "CycleProvider", "serverHost", "uni-passau.de")}
    for other in ("FilterRules", "FilterRules_EQ", "FilterRules_NE", "FilterRules_LT", "FilterRules_LE", "FilterRules_GE"):
        assert mdp.rows(other) == []


def test_stated_in_the_papers_order_the_ids_are_figure_7s_exactly(example):
    mdp, lmr = example
    lmr.subscribe("search CycleProvider c register c where c.serverInformation.memory > 64 and "
                  "c.serverInformation.cpu > 500 and c.serverHost contains 'uni-passau.de'")
    assert mdp.atomic_rules() == [(k, t, g) for k, (t, g) in FIGURE_7_RULES.items()]
    assert set(mdp.rows("RuleDependencies")) == FIGURE_7_DEPENDENCIES


def test_the_filter_run_of_figure_9_and_its_result(example):
    mdp, lmr = example
    sub = lmr.subscribe(RULE_331)
    rules, _ = _mapping(mdp.atomic_rules())
    mdp.register_document("doc.rdf", FIGURE_1)
    trace = {}
    for run, iteration, uri, rule in mdp.rows("ResultObjects", "run", "iteration", "uri_reference", "rule_id"):
        assert run == 3                                    # an insert: only the third run of section 3.5
        trace.setdefault(iteration, set()).add((uri, rules[rule]))
    assert trace == {0: {("doc.rdf#info", 1), ("doc.rdf#info", 2), ("doc.rdf#host", 3)},
                     1: {("doc.rdf#info", 4)},
                     2: {("doc.rdf#host", 5)}}
    assert lmr.query(f"search rule({sub}) c register c") == {"doc.rdf#host"}
    # serverInformation is strong in FIGURE_1_SCHEMA: the ServerInformation is shipped along
    assert lmr.resources() == {
        "doc.rdf#host": {"serverHost": ["pirates.uni-passau.de"], "serverInformation": ["doc.rdf#info"],
                         "serverPort": ["5874"]},
        "doc.rdf#info": {"cpu": ["600"], "memory": ["92"]}}


def test_with_a_weak_reference_only_the_matched_resource_is_shipped():
    mdp = Backbone()
    mdp.register_schema(FIGURE_1_SCHEMA.replace("<mdv:reference>strong</mdv:reference>",
                                                "<mdv:reference>weak</mdv:reference>"))
    lmr = LocalRepository("lmr-1", backbone=mdp)
    lmr.subscribe(RULE_331)
    mdp.register_document("doc.rdf", FIGURE_1)
    assert list(lmr.resources()) == ["doc.rdf#host"]


def test_example_1_matches_figure_1_registered_before_the_rule(example):
    mdp, lmr = example
    mdp.register_document("doc.rdf", FIGURE_1)
    lmr.subscribe("search CycleProvider c register c where c.serverHost contains 'uni-passau.de' "
                  "and c.serverInformation.memory > 64")
    assert sorted(lmr.resources()) == ["doc.rdf#host", "doc.rdf#info"]   # the initial load


def test_section_35_update_memory_32_to_128_and_back(example):
    mdp, lmr = example
    lmr.subscribe("search CycleProvider c register c where c.serverInformation.memory > 64")
    mdp.register_document("doc.rdf", FIGURE_1.replace('memory="92"', 'memory="32"'))
    assert lmr.resources() == {}
    mdp.register_document("doc.rdf", FIGURE_1.replace('memory="92"', 'memory="128"'))
    assert sorted(lmr.resources()) == ["doc.rdf#host", "doc.rdf#info"]
    assert lmr.resources()["doc.rdf#info"]["memory"] == ["128"]
    mdp.register_document("doc.rdf", FIGURE_1.replace('memory="92"', 'memory="32"'))
    assert lmr.resources() == {}
    # Run 1 found the candidates (info for A, host for the join), run 2 kept host's empty-where
    # triggering result, run 3 (the new info, memory 32) matched nothing: host is unchanged.
    assert sorted((run, uri) for run, it, uri, rule, fresh in mdp.rows("ResultObjects")) == [
        (1, "doc.rdf#host"), (1, "doc.rdf#info"), (2, "doc.rdf#host")]
