"""Issue 32, part 4: Onyx's catalog on MDV. The registration service's metadata provider and
the brokers' repositories, checked against brute force: after every batch of random changes
each broker's repository holds exactly what its rules select of the provider's documents."""

from __future__ import annotations

import json
import random

import pytest
from fastapi.testclient import TestClient

from broker import topics
from broker.control.state import BrokerState
from broker.metadata.broker_lmr import BrokerRepository, rules
from broker.metadata.documents import broker_document, profile_document, source_document, tree_document
from broker.metadata.onyx_schema import ONYX_SCHEMA, broker_uri, link_uri, profile_uri, source_uri
from broker.metadata.provider import MetadataProvider
from broker.registry.app import create_app
from broker.registry.store import Store
from catalog import RuleError
from catalog.document import parse_document
from catalog.schema import Schema
from formats.learn import learn_dictionary
from routing.overlay import builtin
from tests.broker.metadata_packets import Recorder

DTD = "<!ELEMENT nitf (head, body)> <!ELEMENT head (title)> <!ELEMENT title (#PCDATA)> <!ELEMENT body ANY>"


def test_each_document_reads_back_as_the_resources_it_was_built_with():
    schema = Schema()
    schema.add(ONYX_SCHEMA)
    dictionary = learn_dictionary("n&w", [], schema=DTD, train_zstd=False)
    for doc in (source_document("n-w", "News & <Wire> \"1\"", "b2", DTD, 12.5, 4000, dictionary),
                source_document("bare", "Bare", "b1", None, None, None, None),
                profile_document("p1", 3, "b4"), broker_document("b1", "Passau"),
                tree_document("b1", [("b1", "b2"), ("b2", "b4")])):
        assert parse_document(doc.uri, doc.xml, schema) == doc.resources


class World:
    """A provider, and every broker's control state fed the packets of its inbound topic."""

    def __init__(self, overlay_name: str = "figure4") -> None:
        self.overlay = builtin(overlay_name)
        self.sender = Recorder()
        self.provider = MetadataProvider(self.sender, self.overlay)
        self.states = {b: BrokerState(b, builtin(overlay_name)) for b in self.overlay.brokers}
        self.read = 0

    def deliver(self) -> None:
        """Hand every broker the packets sent since the last call (none may be a dead letter)."""
        for topic, (key, value, headers) in self.sender.sent[self.read:]:
            broker = topic[len(topics.BROKER_PREFIX):] if topic.startswith(topics.BROKER_PREFIX) else None
            if broker in self.states:
                rows = self.states[broker].apply("catalog", key, value, headers, topic)
                assert not [r for r in rows if r[0] == topics.DEAD_LETTER], rows
        self.read = len(self.sender.sent)

    def log(self) -> list[tuple[bytes, bytes | None]]:
        """The metadata log as compaction leaves it: the last record per key, in order."""
        last: dict[bytes, tuple[int, bytes | None]] = {}
        for i, (topic, (key, value, _)) in enumerate(self.sender.sent):
            if topic == topics.METADATA:
                last[key] = (i, value)
        return [(k, v) for k, (i, v) in sorted(last.items(), key=lambda kv: kv[1][0])]


def expected(overlay, broker: str, sources: dict[str, tuple[str, bool]], profiles: dict[str, str]) -> set[str]:
    """Brute force: what broker ``broker``'s rules select, plus what strong references ship along."""
    held = {broker_uri(broker)}
    for root in overlay.brokers:
        for parent, children in overlay.tree(root).children.items():
            held |= {link_uri(root, parent, c) for c in children if broker in (parent, c)}
    for source, (root, schema) in sources.items():
        reaches = root == broker or any(broker in cs for cs in overlay.tree(root).children.values())
        if reaches:
            held.add(source_uri(source))
            if schema:
                held |= {f"urn:onyx:sources:{source}#schema", f"urn:onyx:sources:{source}#dictionary"}
    return held | {profile_uri(p) for p, host in profiles.items() if host == broker}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_broker_repository_holds_exactly_what_its_rules_select_after_every_batch(seed):
    rng = random.Random(seed)
    world = World()
    brokers = world.overlay.brokers
    world.provider.start()
    world.deliver()
    sources: dict[str, tuple[str, bool]] = {}
    profiles: dict[str, str] = {}
    versions: dict[str, int] = {}
    for step in range(12):
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.2:
                sid, root, schema = f"s{step}x{rng.randint(0, 99)}", rng.choice(brokers), rng.random() < 0.5
                dictionary = learn_dictionary(sid, [], schema=DTD, train_zstd=False) if schema else None
                world.provider.publish([source_document(sid, sid, root, DTD if schema else None, rng.choice([None, 5, 500]),
                                                        None, dictionary)])
                sources[sid] = (root, schema)
            elif kind < 0.75 or not profiles:
                pid = f"p{rng.randint(0, 40)}"
                versions[pid] = versions.get(pid, 0) + 1
                profiles[pid] = rng.choice(brokers)  # new, or moved to another host
                world.provider.queue([profile_document(pid, versions[pid], profiles[pid])])
            else:
                pid = rng.choice(sorted(profiles))
                del profiles[pid]
                world.provider.queue(deleted=[f"urn:onyx:profiles:{pid}"])
        world.provider.flush_queue()
        world.deliver()
        for b, state in world.states.items():
            assert set(state.metadata.resources()) == expected(world.overlay, b, sources, profiles), (step, b)
            assert state.overlay.sources == {s: r for s, (r, _) in sources.items()} | {"news": "b1"}
            assert {s for s, d in state.dictionaries.items()} == {s for s, (_, schema) in sources.items() if schema}
    world.provider.stop()

    # A provider started afresh from the (compacted) log sends full loads that replace what
    # every repository held: the same resources, and nothing a deleted profile left behind.
    again = MetadataProvider(world.sender, world.overlay)
    assert again.replay(world.log()) > 0
    before = {b: set(s.metadata.resources()) for b, s in world.states.items()}
    world.read = len(world.sender.sent)
    again.start()
    world.deliver()
    assert {b: set(s.metadata.resources()) for b, s in world.states.items()} == before
    again.stop()


def test_a_broker_state_rebuilt_from_its_packets_holds_the_same_repository():
    world = World()
    world.provider.start()
    world.provider.publish([source_document("wire", "Wire", "b5", DTD, 9, None,
                                            learn_dictionary("wire", [], schema=DTD, train_zstd=False))])
    world.provider.queue([profile_document("p1", 1, "b2")])
    world.provider.flush_queue()
    world.deliver()
    copy = BrokerState("b2", builtin("figure4"))
    for topic, (key, value, headers) in world.sender.sent:
        if topic == topics.broker_topic("b2"):
            copy.replay("catalog", key, value, headers, topic, (topic, 0, len(copy.applied) + copy.seq))
    assert copy.metadata.resources() == world.states["b2"].metadata.resources()
    assert copy.dictionaries == world.states["b2"].dictionaries and copy.overlay.sources["wire"] == "b5"


def test_a_users_subscription_gets_matches_changes_and_nothing_after_it_ends():
    world = World()
    world.provider.start()
    sub = world.provider.subscribe("search Source s register s where s.schema.declares? = 'nitf' and s.rate > 100",
                                   "alerts", "s1")
    mine = lambda: [json.loads(v) for t, (k, v, h) in world.sender.sent if t == "alerts"]  # noqa: E731
    assert mine() == []  # nothing matches yet: no record
    world.provider.publish([source_document("fast", "Fast", "b3", DTD, 500, None, None)])
    world.provider.publish([source_document("slow", "Slow", "b3", DTD, 5, None, None)])
    [change] = mine()
    assert change["matched"] == [source_uri("fast")] and change["subscription_id"] == sub.id
    assert change["upserts"][source_uri("fast")]["properties"]["rate"] == ["500"]
    world.provider.publish([source_document("fast", "Fast", "b3", DTD, 50, None, None)])  # slower now
    assert mine()[-1]["unmatched"] == [source_uri("fast")]
    with pytest.raises(RuleError) as bad:
        world.provider.subscribe("search Source s register s where s.speed > 1", "alerts", "s1")
    assert bad.value.position == 35 and bad.value.construct == "property"
    # replicated through the log: a provider that replays it has the subscription, and told nobody
    again = MetadataProvider(Recorder(), world.overlay)
    again.replay(world.log())
    assert set(again.users) == {sub.id} and again.sender.sent == []
    world.provider.unsubscribe(sub.id)
    n = len(mine())
    world.provider.publish([source_document("fast", "Fast", "b3", DTD, 700, None, None)])
    assert len(mine()) == n
    world.provider.stop()


def test_broker_rules_are_valid_against_the_onyx_schema():
    world = World()
    world.provider.start()
    subscriptions = world.provider.backbone.rows("Subscriptions", "lmr", "text")
    assert sorted(subscriptions) == sorted((f"lmr-{b}", r) for b in world.overlay.brokers for r in rules(b))
    # the brokers' rules share their atomic rules where they can (section 3.4: one DAG for all)
    texts = [t for _, t, _ in world.provider.backbone.atomic_rules()]
    assert len(texts) == len(set(texts))
    world.provider.stop()


def test_an_ended_subscription_stays_ended_in_the_log():
    world = World()
    world.provider.start()
    sub = world.provider.subscribe("search Source s register s where s.rate > 100", "alerts", "s1")
    kept = world.provider.subscribe("search Source s register s where s.rate > 1", "alerts", "s1")
    world.provider.unsubscribe(sub.id)
    world.provider.stop()
    # A provider started afresh from the log (the service after a restart) has only the one still running.
    again = MetadataProvider(Recorder(), world.overlay)
    again.replay(world.log())
    assert set(again.users) == {kept.id}


@pytest.fixture
def service(tmp_path):
    sender = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    provider = MetadataProvider(sender, builtin(), batch_s=3600)  # batches only when a test flushes
    app = create_app(store, builtin(), sender, metadata=provider, allowed_hosts=["testserver"])
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, sender, provider, store


def _records(sender, subscription_id):
    """What a subscription's topic got so far."""
    return [json.loads(v) for t, (k, v, h) in sender.sent if k == f"metadata:{subscription_id}".encode()]


def test_metadata_subscriptions_over_http(service):
    client, sender, _, _ = service
    r = client.post("/metadata/subscriptions", json={"rule": "search Source s register s where s.rate > 100"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["topic"] == f"onyx.deliver.{body['subscriber_id']}" and body["subscriber_token"]
    # A source its subscriber may read (public) is delivered; a publisher's private one is not.
    assert client.post("/sources", json={"name": "Fast", "rate": 500, "public": True}).status_code == 201
    records = _records(sender, body["subscription_id"])
    assert records and records[-1]["matched"] == [source_uri("fast")]
    assert client.post("/sources", json={"name": "Private", "rate": 500}).status_code == 201
    seen = {u for rec in _records(sender, body["subscription_id"]) for u in rec["matched"] + list(rec["upserts"])}
    assert source_uri("private") not in seen and not any("private" in u for u in seen)

    bad = client.post("/metadata/subscriptions", json={"rule": "search Source s register s where s.rate >"})
    assert bad.status_code == 422 and bad.json()["column"] == 42 and "rule" in bad.json()["detail"]
    assert client.post("/metadata/subscriptions", json={"rule": "x", "topic": "onyx.profiles"}).status_code == 422
    other = client.post("/subscribers").json()
    path = f"/metadata/subscriptions/{body['subscription_id']}"
    assert client.delete(path).status_code == 401
    # Another subscriber's subscription is none of its own (404); a publisher's token is of another kind (403).
    assert client.delete(path, headers={"X-Onyx-Subscriber-Token": other["token"]}).status_code == 404
    publisher = client.post("/sources", json={"name": "Third"}).json()["publisher_token"]
    assert client.delete(path, headers={"X-Onyx-Publisher-Token": publisher}).status_code == 403
    assert client.delete(path, headers={"X-Onyx-Subscriber-Token": body["subscriber_token"]}).status_code == 204
    assert client.delete(path, headers={"X-Onyx-Subscriber-Token": body["subscriber_token"]}).status_code == 404


def test_a_subscription_gets_only_its_subscribers_profiles(service):
    client, sender, provider, _ = service
    alice, bob = client.post("/subscribers").json(), client.post("/subscribers").json()
    rule = {"rule": "search Profile p register p where p.profileVersion > 0"}
    sub = client.post("/metadata/subscriptions", json=rule, headers={"X-Onyx-Subscriber-Token": alice["token"]}).json()
    mine = client.post("/profiles", json={"text": "/nitf", "near": "b5"},
                       headers={"X-Onyx-Subscriber-Token": alice["token"]}).json()
    theirs = client.post("/profiles", json={"text": "/nitf", "near": "b5"},
                         headers={"X-Onyx-Subscriber-Token": bob["token"]}).json()
    provider.flush_queue()  # the profiles' documents go with the provider's next batch
    seen = {u for rec in _records(sender, sub["subscription_id"]) for u in rec["matched"] + list(rec["upserts"])}
    assert profile_uri(mine["profile_id"]) in seen
    assert not any(theirs["profile_id"] in u for u in seen)


def test_a_subscriptions_topic_follows_the_profiles_rules(service):
    client, _, _, store = service
    alice, bob = client.post("/subscribers").json(), client.post("/subscribers").json()
    as_alice = {"X-Onyx-Subscriber-Token": alice["token"]}
    rule = "search Source s register s where s.rate > 1"
    for topic, status in ((f"{bob['delivery_topic']}", 409), (f"{bob['delivery_topic']}.meta", 409),
                          ("elsewhere.meta", 422), ("__consumer_offsets", 422)):
        r = client.post("/metadata/subscriptions", json={"rule": rule, "topic": topic}, headers=as_alice)
        assert r.status_code == status, (topic, r.text)
    topic = f"{alice['delivery_topic']}.meta"
    r = client.post("/metadata/subscriptions", json={"rule": rule, "topic": topic}, headers=as_alice)
    assert r.status_code == 201 and r.json()["topic"] == topic
    assert store.topic_owner(topic) == (topic, alice["subscriber_id"])
    # A profile delivering there too, deleted, leaves the claim: the subscription still holds the topic.
    p = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}}, headers=as_alice).json()
    assert client.delete(f"/profiles/{p['profile_id']}", headers=as_alice).status_code == 204
    assert store.topic_owner(topic) == (topic, alice["subscriber_id"])


def test_anonymous_metadata_subscriptions_share_the_anonymous_rate(tmp_path, monkeypatch):
    from broker import config

    monkeypatch.setattr(config, "ANONYMOUS_RATE", 0.001)  # refills nothing during the test
    monkeypatch.setattr(config, "ANONYMOUS_BURST", 2)
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), Recorder(), allowed_hosts=["testserver"]), raise_server_exceptions=False)
    rule = {"rule": "search Source s register s where s.rate > 1"}
    # Each creates a subscriber and its Kafka topic, as POST /subscribers does: the same shared budget.
    statuses = [client.post("/metadata/subscriptions", json=rule).status_code for _ in range(3)]
    assert statuses == [201, 201, 429]
    assert store.counts()["subscribers"] == 2
