"""ONYX Figure 6: building routing tables over the Figure 4 overlay.

Q1 and Q2 are hosted at broker 5, Q3 at broker 6; in the broadcast tree of the news
source their routing queries travel up the reverse path b5/b6 -> b4 -> b2 -> b1.

(b) ``Map()``: each profile becomes a disjunction of conjunctions of absolute linear
    paths with their value predicates (the where clause's paths, each made absolute
    from the for path; an AND of them).
(c) ``Collect()`` at broker 4: one shared engine over the atoms, whose targets are the
    output links b5 (Q1 or Q2) and b6 (Q3).
(d) ``Aggregate()`` at broker 4: the same conjunctions with every target relabelled
    to b4 — the single routing query broker 2 files under its link to b4 (and broker 1,
    in turn, under its link to b2).

The profiles are the paper's transformation queries. Map() reads only their
for/where part (the return clause does not route); until the engine parses FLWR
text (issue 4) the tests map the equivalent filters, and one test checks that the
FLWR text maps to the same query as soon as it parses.
"""

from pathlib import Path

import pytest

from routing.budget import Budget
from routing.dnf import map_profile
from routing.node import Node
from routing.overlay import builtin
from routing.planner import Plan
from routing.table import Delta, RoutingTable

FLWR = {
    "Q1": 'for $n in $msg/nitf where $n/head/pubdata/@edition.area = "SF" '
          'and $n//tobject.subject/@tobject.subject.type = "Stock" '
          "return <stock_news> {$n/body/body.head/hedline} {$n/body/body.content} </stock_news>",
    "Q2": 'for $n in $msg/nitf where $n//tobject.subject/@tobject.subject.type = "Stock" '
          "and $n/head/docdata/urgency/@ed-urg <= 2 "
          "return <urgent_stock> {$n/head/title} </urgent_stock>",
    "Q3": 'for $n in $msg/nitf where $n/head/docdata/series/@series.name = "Tide Forecasts" '
          "return <tides> {$n/head/title} {$n/body/body.content} </tides>",
}
FILTER = {  # the for/where part of each, as a filter
    "Q1": "/nitf[head/pubdata/@edition.area = 'SF' and .//tobject.subject/@tobject.subject.type = 'Stock']",
    "Q2": "/nitf[.//tobject.subject/@tobject.subject.type = 'Stock' and head/docdata/urgency/@ed-urg <= 2]",
    "Q3": "/nitf[head/docdata/series/@series.name = 'Tide Forecasts']",
}
HOSTS = {"Q1": "b5", "Q2": "b5", "Q3": "b6"}

SF = "/nitf/head/pubdata[@edition.area = 'SF']"
STOCK = "/nitf//tobject.subject[@tobject.subject.type = 'Stock']"
URGENT = "/nitf/head/docdata/urgency[@ed-urg <= 2]"
TIDES = "/nitf/head/docdata/series[@series.name = 'Tide Forecasts']"
BOX_B = {
    "Q1": {frozenset({SF, STOCK})},
    "Q2": {frozenset({STOCK, URGENT})},
    "Q3": {frozenset({TIDES})},
}
BOX_C = {"b5": BOX_B["Q1"] | BOX_B["Q2"], "b6": BOX_B["Q3"]}
BOX_D = BOX_B["Q1"] | BOX_B["Q2"] | BOX_B["Q3"]

STOCKS_SF = (b"<nitf><head><pubdata edition.area='SF'/><docdata><urgency ed-urg='5'/></docdata><tobject>"
             b"<tobject.subject tobject.subject.type='Stock'/></tobject></head></nitf>")
URGENT_STOCKS = (b"<nitf><head><docdata><urgency ed-urg='1'/></docdata><tobject>"
                 b"<tobject.subject tobject.subject.type='Stock'/></tobject></head></nitf>")
TIDES_DOC = (b"<nitf><head><title>Norfolk Weather and Tide Updates</title>"
             b"<docdata><series series.name='Tide Forecasts'/></docdata></head></nitf>")
FISHING = Path("/work/shared/corpus/news/nitf-fishing.xml")  # the paper's sample document


def _build():
    """Register the three profiles at their hosts and forward their deltas hop by hop
    up the news tree, each broker filing them under the link they came in on."""
    ov = builtin("figure4")
    tree = ov.tree(ov.root_of("news"))
    tables = {b: RoutingTable(b) for b in ov.brokers}
    for pid in ("Q1", "Q2", "Q3"):
        delta, below = Delta(pid, 1, map_profile(FILTER[pid])), HOSTS[pid]
        for broker in tree.path_to_root(below)[1:]:
            assert tables[broker].apply(below, delta)
            below = broker
    return tables


def test_the_news_tree_passes_b5_and_b6_through_b4_b2_b1():
    tree = builtin("figure4").tree("b1")
    assert tree.path_to_root("b5") == ["b5", "b4", "b2", "b1"]
    assert tree.path_to_root("b6") == ["b6", "b4", "b2", "b1"]


def test_box_b_map_turns_each_profile_into_linear_path_conjunctions():
    for pid, text in FILTER.items():
        assert map_profile(text) == BOX_B[pid], pid


def test_box_b_map_reads_the_for_where_of_the_flwr_text():
    for pid, text in FLWR.items():
        assert map_profile(text) == BOX_B[pid], pid


def test_box_c_collect_at_broker_4_targets_links_b5_and_b6():
    b4 = _build()["b4"]
    assert b4.links == ["b5", "b6"]
    assert {link: b4.entry(link) for link in b4.links} == BOX_C
    # One shared engine: Q1 and Q2 share the Stock atom, so 4 atoms for 3 conjunctions,
    # and the atoms share /nitf, /nitf/head and /nitf/head/docdata: 8 NFA states for
    # the 12 steps the atoms have between them.
    assert b4.stats() == {"links": 2, "conjunctions": 3, "atoms": 4, "nfa_states": 8, "guards": 4}
    assert b4.route(STOCKS_SF) == {"b5"}        # Q1 (SF stocks; urgency 5 is not Q2's)
    assert b4.route(URGENT_STOCKS) == {"b5"}    # Q2
    assert b4.route(TIDES_DOC) == {"b6"}        # Q3
    assert b4.route(b"<nitf><head><tobject><tobject.subject tobject.subject.type='Stock'/>"
                    b"</tobject></head></nitf>") == set()  # Stock alone is neither Q1 nor Q2


def _nodes(budgets: dict | None = None) -> dict:
    """Nodes of Figure 4 hosting Q1-Q3, their summaries collected up the news tree."""
    ov = builtin("figure4")
    nodes = {b: Node(b, ov, (budgets or {}).get(b)) for b in ov.brokers}
    ups = [(HOSTS[pid], u) for pid in ("Q1", "Q2", "Q3") for u in nodes[HOSTS[pid]].host(pid, 1, FILTER[pid])]
    _flush(nodes, ups)
    return nodes


def _flush(nodes: dict, ups: list) -> None:
    while ups:
        child, u = ups.pop(0)
        ups += [(u.parent, nxt) for nxt in nodes[u.parent].collect(u.root, child, u.delta)]


def test_box_d_aggregate_relabels_every_target_to_broker_4():
    nodes = _nodes()
    b4, b2, b1 = (nodes[b].tables["b1"] for b in ("b4", "b2", "b1"))
    # Aggregate(): b4's summary, what b2 files under its link to b4 (and b1 under b2).
    assert nodes["b4"].summaries["b1"].conjunctions == BOX_D
    assert b2.links == ["b4"] and b2.entry("b4") == BOX_D
    assert b1.links == ["b2"] and b1.entry("b2") == BOX_D
    assert {link: b4.entry(link) for link in b4.links} == BOX_C
    for doc in (STOCKS_SF, URGENT_STOCKS, TIDES_DOC):
        assert b1.route(doc) == {"b2"} and b2.route(doc) == {"b4"}
    assert "b1" not in nodes["b3"].tables and "b1" not in nodes["b5"].tables


def test_box_d_generalized_keeps_the_path_common_to_all_disjuncts():
    """The paper's Figure 6(d): broker 4 over budget sends P_SF alone (with Q2 on SF
    as in the paper's figure), and SF+Sports passes broker 1 and dies at broker 4."""
    sf = "head/pubdata/@edition.area = 'SF'"
    texts = {"Q1": ("b5", f"/nitf[{sf} and .//tobject.subject/@tobject.subject.type = 'Stock']"),
             "Q2": ("b5", f"/nitf[{sf} and .//tobject.subject/@tobject.subject.matter = 'fishing']"),
             "Q3": ("b6", f"/nitf[{sf} and head/docdata/series/@series.name = 'Tide Forecasts']")}
    ov = builtin("figure4")
    nodes = {b: Node(b, ov, Budget(atoms=1) if b == "b4" else None) for b in ov.brokers}
    _flush(nodes, [(host, u) for pid, (host, text) in texts.items() for u in nodes[host].host(pid, 1, text)])
    sports = b"<nitf><head><pubdata edition.area='SF'/><tobject><tobject.subject tobject.subject.type='Sports'/></tobject></head></nitf>"
    for sample in (sports, b"<nitf><head><pubdata edition.area='NY'/></head></nitf>"):
        nodes["b4"].forwards("b1", sample, sample=True)
    plan = nodes["b4"].summary_plan("b1")
    _flush(nodes, [("b4", u) for u in nodes["b4"].generalize("b1", plan)])
    assert nodes["b2"].tables["b1"].entry("b4") == {frozenset({SF})}
    assert nodes["b1"].tables["b1"].entry("b2") == {frozenset({SF})}
    assert nodes["b1"].route("b1", sports) == ["b2"] and nodes["b2"].route("b1", sports) == ["b4"]
    assert nodes["b4"].route("b1", sports) == []
    assert Plan.from_json(plan.to_json()) == plan  # what the broker logs, adopted the same by every copy


@pytest.mark.skipif(not FISHING.exists(), reason="the shared news corpus is not here")
def test_the_papers_sample_document_goes_down_to_broker_6_only():
    tables = _build()
    doc = FISHING.read_bytes()
    assert tables["b1"].route(doc) == {"b2"}
    assert tables["b2"].route(doc) == {"b4"}
    assert tables["b4"].route(doc) == {"b6"}


def test_deleting_q3_removes_the_b6_entry_all_the_way_up():
    nodes = _nodes()
    _flush(nodes, [("b6", u) for u in nodes["b6"].drop("Q3", 2)])
    b4, b2, b1 = (nodes[b].tables["b1"] for b in ("b4", "b2", "b1"))
    assert b4.links == ["b5"]
    assert b2.entry("b4") == b1.entry("b2") == BOX_C["b5"]
    assert b4.route(TIDES_DOC) == set()
    assert b1.route(TIDES_DOC) == set()
    assert b1.route(STOCKS_SF) == {"b2"}
