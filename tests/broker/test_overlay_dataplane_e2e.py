"""The overlay's data plane for real (ONYX 4.2-4.3): links carry what their transformation
queries make of a message (ONYX 4.2.2, :mod:`routing.incremental`), a budgeted routing
table generalizes without losing a delivery, and a broker writes a message's link rows
before its own deliveries of it. Six Spark streaming brokers on a Kafka of their own (the
overlay's topic names are fixed, so it cannot share the session's Kafka with another
overlay).

In b1's tree (b1 -> b2 -> b4 -> b5, b6; b1 -> b3) the filters and the generated
transformation profiles over ``nitf`` are on b3, so b1 -> b3 carries whole messages. Below
b2 every profile is the paper's kind (its worked example, ``notes-onyx.md`` section 4):
``for $n in $msg/batched-nitf/nitf where ... return copy $c := $n modify (delete node
$c//media, rename node $c//table as "list") return $c``, so every link below b1 shares the
for path and the first two steps: b1 -> b2 runs them (no link below it carries media), and
the link into b6, below which every where clause says edition.area = "SF", carries the SF
articles of a batch and not the others. The brokers' links are set slow
(``ONYX_LINK_BANDWIDTH``, :data:`BANDWIDTH`) so that every transformation is worth its
cost. b2 routes within a small budget."""

import os
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition

import formats
from broker.packets import profile_ids
from broker import topics
from broker.clients import api
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.devcluster import KafkaDevCluster
from routing.budget import Budget
from routing.incremental import from_header
from routing.overlay import Overlay, builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BUDGET = "atoms=6,states=40,predicates=3"
BANDWIDTH = 1e5
"""Bits/s of every link (a byte left out saves 80 us on it: every transformation pays)."""

STEPS = 'copy $c := $n modify (delete node $c//media, rename node $c//table as "list") return $c'


def _paper(where: str) -> str:
    """A profile of the worked example's kind: its where clause on a batched article."""
    return f"for $n in $msg/batched-nitf/nitf where {where} return {STEPS}"


AREA = '$n/head/pubdata/@edition.area = "{}"'
SUBJECT = '$n/head/tobject/tobject.subject/@tobject.subject.type = "{}"'


def _article(area: str, subject: str, words: str) -> bytes:
    return (f'<nitf><head><pubdata edition.area="{area}"/><tobject><tobject.subject tobject.subject.type="{subject}"/>'
            f'</tobject></head><body><body.head><hedline><hl1>{words} headline</hl1></hedline></body.head>'
            f'<body.content><p>{words} story</p><media media-type="image"><media-reference source="{words}.jpg"/>'
            f'</media><table><tr><td>{words} figures</td></tr></table></body.content></body></nitf>').encode()


def _batch(*articles: bytes) -> bytes:
    return b"<batched-nitf>" + b"".join(articles) + b"</batched-nitf>"


# The worked example's message M (A1 SF Stock, A2 NY Stock, A3 SF Tide, A4 LA Stock), and a
# few more batches: with words that say which article they came from.
BATCHES = {
    "sf-0": _batch(_article("SF", "Stock", "Alpha"), _article("NY", "Stock", "Bravo"),
                   _article("SF", "Tide", "Charlie"), _article("LA", "Stock", "Delta")),
    "sf-1": _batch(_article("SF", "Tide", "Echo"), _article("NY", "Sports", "Foxtrot")),
    "sf-2": _batch(_article("NY", "Stock", "Golf"), _article("LA", "Weather", "Hotel")),
    "sf-3": _batch(_article("SF", "Stock", "India"), _article("SF", "Sports", "Juliet"),
                   _article("NY", "Tide", "Kilo")),
}


@pytest.fixture(scope="module")
def cluster(spark):
    kafka = KafkaDevCluster(name=f"dataplane-{os.getpid()}")
    kafka.start()
    config = builtin("figure4").to_dict()
    config["brokers"] = [{"id": b, "budget": BUDGET} if b == "b2" else b for b in config["brokers"]]
    c = LocalOverlay(Overlay.from_dict(config),
                     OverlaySettings(name="dataplane", bootstrap_servers=kafka.bootstrap_servers,
                                     bandwidth=BANDWIDTH), spark=spark)
    c.start()
    yield c
    c.stop()
    kafka.stop()


@pytest.fixture(scope="module")
def registered(cluster):
    """profile id -> (text, host broker)."""
    schema = Schema.nitf()
    subscriber = api("POST", f"{cluster.api_url}/subscribers")
    flwr = FlwrGenerator(schema, seed=7)
    texts = [(flwr.spec().text(), "b3") for _ in range(8)]
    texts += [("for $h in $msg/nitf/head return <t>{$h/title/text()}</t>", "b3"),
              ("for $d in $msg/nitf/head/docdata where $d/doc-id return <id>{$d/doc-id/@id-string}</id>", "b3"),
              ("for $p in $msg/nitf/head/pubdata return <p>{$p/@edition.area}</p>", "b3")]
    texts += [(t, "b3") for t in ProfileGenerator(schema, n_preds=(0, 1), seed=7).batch(20)]
    # The worked example: U4 (NY) at b2, U1/U2 (SF and Stock) at b5, U3 (SF and Tide) at b6;
    # b4 and b5 host more, so that b4's summary does not fit b2's budget exactly.
    texts += [(_paper(AREA.format("NY")), "b2"),
              (_paper(f'{AREA.format("SF")} and {SUBJECT.format("Stock")}'), "b4"),
              (_paper(f'{AREA.format("SF")} and {SUBJECT.format("Stock")}'), "b5"),
              (_paper(f'{AREA.format("LA")} and {SUBJECT.format("Weather")}'), "b5"),
              (_paper(f'{AREA.format("NY")} and {SUBJECT.format("Sports")}'), "b5"),
              (_paper(f'{AREA.format("NY")} and {SUBJECT.format("Tide")}'), "b5"),
              (_paper(f'{AREA.format("SF")} and {SUBJECT.format("Tide")}'), "b6"),
              (_paper(f'{AREA.format("SF")} and $n/body/body.head/hedline'), "b6")]
    profiles = {}
    for text, host in texts:
        body = api("POST", f"{cluster.api_url}/profiles", {"text": text, "near": host},
                   subscriber_token=subscriber["token"])
        assert body["host_broker"] == host
        profiles[body["profile_id"]] = (text, host)
    cluster.wait_idle(timeout=300)
    return profiles, subscriber["delivery_topic"]


def _read(bootstrap: str, names: list[str], until: float) -> list:
    """Every record of ``names`` (all partitions, from the start), polled until ``until``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{time.time_ns()}",
                         "enable.auto.commit": False})
    meta = consumer.list_topics(timeout=10)
    consumer.assign([TopicPartition(t, p, 0) for t in names if t in meta.topics
                     for p in meta.topics[t].partitions])
    out = []
    try:
        while time.monotonic() < until:
            out += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    return out


def _headers(r) -> dict[str, bytes]:
    return dict(r.headers() or ())


def test_links_carry_transformations_and_every_result_is_the_centralized_engines(cluster, registered):
    profiles, delivery_topic = registered
    docs = {f"dp-{i}": DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=300 + i).generate()
            for i in range(30)}
    docs["dp-30"] = b"<nitf><head><title>Tide</title></head><body><p>" + b"long " * 500 + b"</p></body></nitf>"
    docs |= BATCHES
    engine = Engine()
    for pid, (text, _) in profiles.items():
        engine.add(pid, text)
    expected = {m: Counter((pid, r) for pid, rs in engine.run(d, xml=d).items() for r in rs) for m, d in docs.items()}
    assert sum(len(c) for c in expected.values()) > 30
    assert all(expected[m] for m in BATCHES if m != "sf-2"), "every batch but sf-2 has an SF or NY article"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for m, doc in docs.items():
        producer.produce(topics.source_topic("news"), doc, m.encode(), headers=[("onyx-message-id", m.encode())])
    assert producer.flush(60) == 0
    cluster.wait_idle(timeout=300)
    got = defaultdict(Counter)
    records = _read(cluster.bootstrap_servers, [delivery_topic, topics.DEAD_LETTER], time.monotonic() + 5)
    assert not [r for r in records if r.topic() == topics.DEAD_LETTER], \
        [_headers(r).get("onyx-reason") for r in records if r.topic() == topics.DEAD_LETTER][:3]
    for r in records:
        for pid in profile_ids(r.key(), r.headers()):  # one record for every profile of the topic it matched
            got[_headers(r)["onyx-message-id"].decode()][(pid, r.value())] += 1
    assert {m: c for m, c in got.items() if m in docs} == {m: c for m, c in expected.items() if c}

    # What the links below b1 carried of the batches: each record decoded by its format, and
    # its onyx-transform read as routing.incremental writes it.
    links = defaultdict(dict)  # broker -> message id -> (decoded XML, what it had)
    for r in _read(cluster.bootstrap_servers, [topics.broker_topic(b) for b in ("b2", "b4", "b5", "b6")],
                   time.monotonic() + 5):
        h = _headers(r)
        m = h.get("onyx-message-id", b"").decode()
        if m in BATCHES and h.get("onyx-flow") == b"xml":
            transform = h.get("onyx-transform")
            applied = from_header(transform.decode()) if transform is not None else None
            links[r.topic().removeprefix(topics.BROKER_PREFIX)][m] = (
                formats.decode(h["onyx-format"].decode(), r.value()).to_xml(), applied)

    # The link into b6 (every where below it says SF) carried the SF articles' bindings
    # only, with their media deleted and tables renamed: ONYX's early projection and
    # restructuring. M: A1 and A3, not A2 (NY) or A4 (LA).
    xml, applied = links["b6"]["sf-0"]
    assert b"Alpha" in xml and b"Charlie" in xml, xml
    assert b"Bravo" not in xml and b"Delta" not in xml, xml
    assert applied is not None and applied.binding == "/batched-nitf/nitf"
    assert applied.where == {"head/pubdata/@edition.area = 'SF'"}, applied.where
    assert len(applied.steps) == 2, applied.steps
    assert "sf-2" not in links["b6"], "a batch without an SF article went to b6"
    assert all(b"Foxtrot" not in x and b"Kilo" not in x for x, _ in links["b6"].values())
    # Every link below b1 shares the steps: none carried media or a table, the link into
    # b4 (b2 -> b4) included, and each said what the message had.
    for broker in ("b2", "b4", "b5", "b6"):
        assert links[broker], f"no batch went to {broker}"
        for m, (x, had) in links[broker].items():
            assert b"<media" not in x and b"<table" not in x, (broker, m, x)
            assert b"<list" in x or b"<nitf" not in x, (broker, m, x)  # a sample may carry no article
            assert had is not None and had.steps == applied.steps, (broker, m, had)
    assert "sf-0" in links["b4"]
    status = {b["broker"]: b for b in cluster.status()["brokers"]}
    assert status["b4"]["projected"] >= len(links["b6"])


def test_a_budgeted_table_stays_within_its_budget_and_misses_nothing(cluster, registered):
    """b2's table holds b4's summary (ONYX 4.2.1 Aggregate(), generalized to b2's
    budget): the deliveries were exact above (0 false negatives), and onyx status
    reports b2's table within the budget, b4's summary smaller than the exact queries
    below it, and the false positives it cost."""
    # b4's plan is made beside the data path and adopted when its packet comes back: give it a minute.
    deadline = time.monotonic() + 60
    while True:
        status = {b["broker"]: b for b in cluster.status()["brokers"]}
        if Budget.parse(BUDGET).fits(status["b2"]["routing"]["b1"]) or time.monotonic() > deadline:
            break
        time.sleep(1)
    b2 = status["b2"]
    assert b2["budget"] == str(Budget.parse(BUDGET))
    table = b2["routing"]["b1"]
    assert Budget.parse(BUDGET).fits(table), table
    sent = status["b4"]["routing"]["b1"]["summary"]
    assert sent["budget"] == str(Budget.parse(BUDGET)) and sent["plans"] >= 1
    assert sent["exact_atoms"] > sent["atoms"], "b4's summary should not fit the budget exactly"
    assert all(n >= 0 for n in status["b4"]["false_positives"].values())


def test_a_brokers_link_rows_for_a_message_go_out_before_its_deliveries(cluster, registered):
    """b4 forwards to b5 and b6 and hosts profiles itself: per message, the Kafka
    timestamps of b4's link records are not after those of b4's deliveries (ONYX 4.3.1's
    priority: the executor hands a message's link rows to the producer before it matches
    the message locally). The timestamps are the producer's (CreateTime, set when a
    record is handed over), not the log's."""
    profiles, delivery_topic = registered
    at_b4 = {pid for pid, (_, host) in profiles.items() if host == "b4"}
    records = _read(cluster.bootstrap_servers, [delivery_topic, topics.broker_topic("b5"), topics.broker_topic("b6")],
                    time.monotonic() + 5)
    assert {r.timestamp()[0] for r in records} == {TIMESTAMP_CREATE_TIME}
    links, delivered = defaultdict(list), defaultdict(list)
    for r in records:
        mid = dict(r.headers() or ()).get("onyx-message-id", b"").decode()
        if r.topic() == delivery_topic:
            if set(profile_ids(r.key(), r.headers())) & set(at_b4):
                delivered[mid].append(r.timestamp()[1])
        elif dict(r.headers()).get("onyx-flow") == b"xml":
            links[mid].append(r.timestamp()[1])
    both = [m for m in delivered if m in links]
    assert both, "no message was both forwarded and delivered by b4"
    assert all(max(links[m]) <= min(delivered[m]) for m in both), \
        {m: (links[m], delivered[m]) for m in both if max(links[m]) > min(delivered[m])}
