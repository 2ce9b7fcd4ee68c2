"""A broker's compiled plan on its own (no Spark): routing, delivery, formats per link,
and every kind of bad input turned into a dead letter with its reason."""

import json

import pytest

import formats
from broker import topics
from broker.control.state import BrokerState
from broker.dataplane.plan import Limits, Plan, PlanSettings
from broker.packets import REASON
from broker.registry.control_packets import source_dictionary
from tests.broker.metadata_packets import catalog_packets
from broker.registry.store import SourceRecord
from formats.header import PacketHeader
from routing.dnf import map_profile
from routing.overlay import builtin
from routing.table import Delta

DTD = b"<!ELEMENT nitf (head, body)> <!ELEMENT head (title)> <!ELEMENT title (#PCDATA)> <!ELEMENT body (p*)>"
GOOD = b"<nitf><head><title>SF</title></head><body/></nitf>"


def _state(broker: str, schema: bytes | None = None) -> BrokerState:
    """Broker ``broker`` of the Figure 4 overlay hosting profile p1; with ``schema``,
    it has also received the catalog packet of source ``news`` and its dictionary."""
    state = BrokerState(broker, builtin("figure4"))
    if schema is not None:
        for key, value, headers in catalog_packets(SourceRecord("news", "news", "b1", schema.decode(), None, None),
                                                   broker):
            rows = state.apply("catalog", key, value, headers, topics.broker_topic(broker))
            assert all(r[0] != topics.DEAD_LETTER for r in rows)
        assert state.dictionaries["news"]["version"] == 1 and state.overlay.sources["news"] == "b1"
    body = {"op": "add", "profile_id": "p1", "version": 1, "text": "/nitf/head/title",
            "delivery_topic": "onyx.deliver.x"}
    rows = state.apply("query", b"p1", json.dumps(body).encode(), [("onyx-flow", b"query")], "t")
    assert all(r[0] != topics.DEAD_LETTER for r in rows)
    return state


def _delta() -> Delta:
    """A profile below link b2 of b1 that every NITF message matches."""
    return Delta("remote", 1, map_profile("/nitf"))


def _plan(state: BrokerState, link_format="stream", guard=True, limits=Limits()) -> Plan:
    return Plan(state, PlanSettings(link_format, guard, limits))


def _from_source(plan, value, source="news"):
    return plan.process(topics.source_topic(source), b"k", value, [], 0, 7)


def _reason(rows):
    (row,) = rows
    assert row[0] == topics.DEAD_LETTER
    return dict(row[3])[REASON].decode()


def test_a_local_profile_gets_its_delivery_with_the_message_id():
    plan = _plan(_state("b1"))
    rows = _from_source(plan, GOOD)
    (delivery,) = [r for r in rows if r[0] == "onyx.deliver.x"]
    assert delivery[1] == b"p1" and delivery[2] == GOOD
    assert dict(delivery[3])["onyx-message-id"] == b"news-0-7"


@pytest.mark.parametrize("value, reason", [
    (b"<nitf><head></nitf>", "malformed XML"),
    (b'<!DOCTYPE nitf [<!ENTITY x SYSTEM "file:///etc/passwd">]><nitf>&x;</nitf>', "entit"),
    (b'<!DOCTYPE n [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
     b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><n>&c;</n>', "entit"),
    (b"<a>" * 70 + b"</a>" * 70, "nesting exceeds"),
    (b"<nitf>" + b"x" * 5000 + b"</nitf>", "exceeds this broker's limit of 4096 bytes"),
])
def test_bad_messages_become_dead_letters_with_their_reason(value, reason):
    plan = _plan(_state("b1"), limits=Limits(max_bytes=4096, max_depth=64))
    assert reason in _reason(_from_source(plan, value))


def test_unknown_source_is_a_dead_letter_at_the_guard_broker_only():
    assert "unknown source id 'ghost'" in _reason(_from_source(_plan(_state("b1")), GOOD, "ghost"))
    assert _from_source(_plan(_state("b2"), guard=False), GOOD, "ghost") == []


@pytest.mark.parametrize("headers, reason", [
    ([("onyx-flow", b"xml"), ("onyx-format", b"yaml")], "unknown format 'yaml'"),
    ([("onyx-flow", b"xml"), ("onyx-format", b"stream-dict"), ("onyx-source", b"news"),
      ("onyx-root-broker", b"b1"), ("onyx-message-id", b"m"), ("onyx-dictionary-version", b"9")],
     "unknown dictionary version 9"),
    ([("onyx-flow", b"xml"), ("onyx-format", b"stream"), ("onyx-root-broker", b"b1"),
      ("onyx-message-id", b"m")], "payload"),
])
def test_bad_packets_between_brokers_become_dead_letters(headers, reason):
    plan = _plan(_state("b2", DTD))
    assert reason in _reason(plan.process(topics.broker_topic("b2"), b"m", b"\x93junk", headers, 0, 1))


def test_links_carry_the_configured_format_and_the_next_broker_decodes_it():
    b1 = _plan(_state("b1", DTD), link_format="stream-dict+zstd")
    b1.state.node.table("b1").apply("b2", _delta())
    rows = _from_source(b1, GOOD)
    (link,) = [r for r in rows if r[0] == topics.broker_topic("b2")]
    header = PacketHeader.from_kafka(link[3])
    assert header.format == "stream-dict+zstd" and header.dictionary_version == 1
    b2 = _plan(_state("b2", DTD))
    delivered = [r for r in b2.process(topics.broker_topic("b2"), link[1], link[2], link[3], 0, 1)
                 if r[0] == "onyx.deliver.x"]
    assert formats.decode("text", delivered[0][2]).to_xml() == formats.decode("text", GOOD).to_xml()


def test_without_the_sources_dictionary_links_fall_back_to_the_stream_format():
    b1 = _plan(_state("b1"), link_format="stream-dict")
    b1.state.node.table("b1").apply("b2", _delta())
    (link,) = [r for r in _from_source(b1, GOOD) if r[0] == topics.broker_topic("b2")]
    assert PacketHeader.from_kafka(link[3]).format == "stream"


def test_a_schema_that_is_not_one_is_refused():
    with pytest.raises(formats.FormatError):
        source_dictionary(SourceRecord("s", "s", "b1", "not a schema", None, None))


def test_flooding_sends_every_message_down_every_link_of_the_tree():
    state = _state("b1")
    routed = _plan(state)
    flooded = Plan(state, PlanSettings(guard=True, mode="flood"))
    assert not [r for r in _from_source(routed, GOOD) if r[0].startswith(topics.BROKER_PREFIX)]
    links = sorted(r[0] for r in _from_source(flooded, GOOD) if r[0].startswith(topics.BROKER_PREFIX))
    assert links == [topics.broker_topic("b2"), topics.broker_topic("b3")]


def test_a_transformation_profile_below_a_link_is_routed_to_and_delivers_its_results():
    """ONYX's Q3 shape: the FLWR text's for/where goes up as the routing query; the
    hosting broker delivers one constructed document per binding, as the engine does."""
    text = ('for $n in $msg/nitf where $n/head/title = "SF" '
            'return <hit>{$n/head/title}</hit>')
    b2 = _state("b2")
    body = {"op": "add", "profile_id": "q", "version": 1, "text": text, "delivery_topic": "onyx.deliver.q"}
    (up,) = b2.apply("query", b"q", json.dumps(body).encode(), [("onyx-flow", b"query")], "t")
    assert up[0] == topics.broker_topic("b1")
    b1 = _state("b1")
    assert all(r[0] != topics.DEAD_LETTER
               for r in b1.apply("query", up[1], up[2], up[3], topics.broker_topic("b1")))
    b1_plan = _plan(b1)
    other = GOOD.replace(b"SF", b"LA")
    assert not [r for r in _from_source(b1_plan, other) if r[0] == topics.broker_topic("b2")]
    (link,) = [r for r in _from_source(b1_plan, GOOD) if r[0] == topics.broker_topic("b2")]
    rows = _plan(b2).process(topics.broker_topic("b2"), link[1], link[2], link[3], 0, 1)
    (result,) = [r for r in rows if r[0] == "onyx.deliver.q"]
    assert result[1] == b"q" and result[2] == b"<hit><title>SF</title></hit>"
    assert dict(result[3])["onyx-message-id"] == b"news-0-7"


@pytest.mark.parametrize("loop", ["onyx.src.news", "onyx.broker.b2", "onyx.broker.b1", "onyx.profiles",
                                  "onyx.catalog", "onyx.dead-letter", "onyx_src_news"])
def test_a_delivery_into_one_of_the_overlays_own_topics_is_a_dead_letter_not_a_loop(loop):
    """Issue 24: a profile delivering into a topic brokers read (here injected as a query
    packet, as an older store could) would have its deliveries read, matched and
    delivered again without end; the plan writes a dead letter with the reason instead."""
    state = _state("b1")
    body = {"op": "add", "profile_id": "evil", "version": 1, "text": "/nitf/head/title", "delivery_topic": loop}
    state.apply("query", b"evil", json.dumps(body).encode(), [("onyx-flow", b"query")], "t")
    rows = _from_source(_plan(state), GOOD)
    assert all(REASON in dict(r[3]) for r in rows if r[0] == loop)  # only the dead letter, if loop is its topic
    (delivery,) = [r for r in rows if r[0] == "onyx.deliver.x"]  # the other profile is served as before
    assert delivery[1] == b"p1"
    reason = _reason([r for r in rows if r[0] == topics.DEAD_LETTER])
    assert reason.startswith(f"not delivered to profile evil: its delivery topic {loop} is the overlay's own topic")
