"""POST /profiles:batch: many profiles in one request, each refused or registered on its
own, the registered ones in one transaction and one batch of query packets."""

import json
import time

import pytest
from fastapi.testclient import TestClient

import broker.registry.app
from broker import config
from broker.registry.control_packets import PacketSendError
from broker.registry.app import MAX_BATCH, PlacementLoad, create_app
from broker.registry.store import Store
from broker.registry.topic_admin import TopicRefusedError
from routing.overlay import builtin


class BatchSender:
    """Collects packets as a KafkaSender sends them: one by one, or a batch at once."""

    def __init__(self):
        self.sent = []
        self.batches = []
        self.fail = False

    def send(self, topic, packet):
        if self.fail:
            raise PacketSendError("could not write to Kafka topic onyx.broker.b1: timed out")
        self.sent.append((topic, packet))

    def send_batch(self, items):
        if self.fail:
            raise PacketSendError("could not write a batch of packets to Kafka: timed out")
        self.batches.append(list(items))
        self.sent.extend(items)


class OnlySend:
    """A sender without send_batch (as the other tests' senders)."""

    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


class Admin:
    """Records created topics; refuses the ones in ``refuse`` as Kafka's ACLs would; the
    ones in ``foreign`` exist in Kafka already (someone else's)."""

    def __init__(self, refuse=(), foreign=()):
        self.created, self.refuse, self.foreign = [], set(refuse), set(foreign)

    def create(self, topic):
        if topic in self.refuse:
            raise TopicRefusedError(f"Kafka does not let the registration service create topic {topic} (ACLs)")
        self.created.append(topic)

    def exists(self, topic):
        return topic in self.foreign or topic in self.created


PREFIXES = ("mine.", "alerts.", "acl.")  # the operator's delivery topic prefixes in these tests


def _own_metadata():
    """The service's metadata provider on a sender of its own: its documents and deliveries
    (some sent by its batch thread) stay out of the packets these tests count."""
    from broker.metadata.provider import MetadataProvider
    from tests.broker.metadata_packets import Recorder

    return MetadataProvider(Recorder(), builtin())


@pytest.fixture
def api(tmp_path):
    sender, admin = BatchSender(), Admin(refuse={"acl.refused"}, foreign={"alerts.foreign"})
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender, topic_admin=admin, metadata=_own_metadata(),
                                   delivery_prefixes=PREFIXES, allowed_hosts=["testserver"]), raise_server_exceptions=False)
    sender.sent.clear()  # the default source's catalog packets, sent at start
    return client, sender, store, admin


def _batch(client, profiles, token=None):
    headers = {"X-Onyx-Subscriber-Token": token} if token else {}
    return client.post("/profiles:batch", json={"profiles": profiles}, headers=headers)


MIXED = [
    {"text": "/nitf/head/title"},                                       # 0 ok
    {"text": "/nitf/head/parent::x"},                                   # 1 syntax: 422, column 12
    {"text": "/nitf[head/pubdata/@edition.area='SF']", "near": "b5"},   # 2 ok, on b5
    {"text": ""},                                                       # 3 empty: 422
    "not an object",                                                    # 4 422
    {"text": "/a", "near": "b99"},                                      # 5 unknown broker: 422
    {"text": "/a", "delivery": {"topic": "onyx.src.news"}},             # 6 the overlay's topic: 422
    {"text": "/a", "delivery": {"topic": "bad topic!"}},                # 7 not a topic name: 422
    {"text": "for $n in $msg/nitf return <r>{$n/body}</r>", "delivery": {"topic": "mine.alerts"}},  # 8 ok
    {"text": "/nitf[", "near": "b1"},                                   # 9 422, column 7
]


def test_each_item_is_registered_or_refused_in_order_with_one_packet_batch(api):
    client, sender, store, admin = api
    r = _batch(client, MIXED)
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["index"] for x in body["results"]] == list(range(len(MIXED)))
    assert [x["status"] for x in body["results"]] == [201, 422, 201, 422, 422, 422, 422, 422, 201, 422]
    assert (body["registered"], body["failed"]) == (3, 7)
    errors = {x["index"]: x["error"] for x in body["results"] if x["status"] != 201}
    assert errors[1] == {"detail": "unsupported axis 'parent::' at column 12", "column": 12}
    assert errors[9]["column"] == 7 and "at column 7" in errors[9]["detail"]
    assert "text" in errors[3]["detail"] and "column" not in errors[3]
    assert "b99" in errors[5]["detail"] and "onyx.src.news" in errors[6]["detail"]
    assert "topic" in errors[7]["detail"]
    # The registered ones: the single endpoint's fields (the subscriber token once, on top).
    sid = body["subscriber_id"]
    profiles = [x["profile"] for x in body["results"] if x["status"] == 201]
    for p in profiles:
        assert set(p) == {"profile_id", "host_broker", "token", "delivery_topic", "subscriber_id"}
        assert p["subscriber_id"] == sid
    assert profiles[1]["host_broker"] == "b5"
    assert [p["delivery_topic"] for p in profiles] == [f"onyx.deliver.{sid}"] * 2 + ["mine.alerts"]
    assert body["subscriber_token"] and store.subscriber_by_token(body["subscriber_token"]).id == sid
    assert sorted(admin.created) == sorted([f"onyx.deliver.{sid}", "mine.alerts"])
    # Stored: exactly the registered ones; their tokens update them like the single endpoint's.
    assert {p.id for p in store.list_profiles()} == {p["profile_id"] for p in profiles}
    assert store.token_matches(profiles[0]["profile_id"], profiles[0]["token"])
    # Sent: one batch, each profile's query packet to its host and its profile-log record.
    assert len(sender.batches) == 1
    expected = []
    for p in profiles:
        expected += [(f"onyx.broker.{p['host_broker']}", p["profile_id"]), ("onyx.profiles", p["profile_id"])]
    assert [(t, k.decode()) for t, (k, _, _) in sender.batches[0]] == expected
    packet = json.loads(sender.batches[0][0][1][1])
    assert packet["op"] == "add" and packet["text"] == "/nitf/head/title" and packet["version"] == 1
    stages = [part.split(";")[0] for part in r.headers["Server-Timing"].split(", ")]
    assert stages == ["check", "place", "topics", "insert", "kafka", "commit", "answer"]


def test_a_subscriber_token_puts_every_profile_in_that_subscriber(api):
    client, _, store, _ = api
    sub = client.post("/subscribers").json()
    r = _batch(client, [{"text": "/a"}, {"text": "/b"}], token=sub["token"])
    body = r.json()
    assert r.status_code == 200 and body["subscriber_id"] == sub["subscriber_id"] and "subscriber_token" not in body
    assert {x["profile"]["delivery_topic"] for x in body["results"]} == {sub["delivery_topic"]}
    assert store.counts()["subscribers"] == 1


def test_an_unknown_subscriber_token_is_401_and_registers_nothing(api):
    client, sender, store, _ = api
    r = _batch(client, [{"text": "/a"}], token="nope")
    assert r.status_code == 401 and r.json()["detail"]
    assert store.list_profiles() == [] and sender.sent == []


def test_a_batch_of_only_bad_items_creates_no_subscriber_and_sends_nothing(api):
    client, sender, store, admin = api
    r = _batch(client, [{"text": "/a["}, {"text": "//"}])
    body = r.json()
    assert r.status_code == 200 and (body["registered"], body["failed"]) == (0, 2)
    assert "subscriber_id" not in body and "subscriber_token" not in body
    assert store.counts() == {"subscribers": 0, "delivery_topics": 0, "profiles": 0}
    assert sender.sent == [] and admin.created == []


@pytest.mark.parametrize("payload", [{}, {"profiles": []}, {"profiles": "/a"}, [{"text": "/a"}],
                                     {"profiles": [{"text": "/a"}] * (MAX_BATCH + 1)}])
def test_a_malformed_body_is_422_and_registers_nothing(api, payload):
    client, sender, store, _ = api
    r = client.post("/profiles:batch", json=payload)
    assert r.status_code == 422 and r.json()["detail"]
    assert store.list_profiles() == [] and sender.sent == []


def test_a_body_over_the_limit_is_413_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(broker.registry.app, "MAX_BATCH_BYTES", 1000)
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), BatchSender(), allowed_hosts=["testserver"]))
    r = _batch(client, [{"text": f"/nitf/p{i}"} for i in range(100)])
    assert r.status_code == 413 and "1,000" in r.json()["detail"]
    assert store.list_profiles() == []
    assert _batch(client, [{"text": "/nitf"}]).status_code == 200
    assert client.post("/profiles", json={"text": "/nitf/" + "x" * 2000}).status_code == 201  # not limited


def test_kafka_failure_is_503_and_rolls_the_whole_batch_back(api):
    client, sender, store, _ = api
    sender.fail = True
    r = _batch(client, [{"text": "/a"}, {"text": "/b"}, {"text": "/c["}])
    assert r.status_code == 503 and "nothing was changed" in r.json()["detail"]
    assert store.counts() == {"subscribers": 0, "delivery_topics": 0, "profiles": 0}
    sender.fail = False  # the placements were given back: round robin starts over at b1
    hosts = [x["profile"]["host_broker"] for x in _batch(client, [{"text": "/a"}, {"text": "/b"}]).json()["results"]]
    assert hosts == ["b1", "b2"]


def test_round_robin_spreads_one_batch_over_all_brokers(api):
    client, _, store, _ = api
    client.post("/profiles", json={"text": "/nitf", "near": "b1"})  # the single endpoint and the batch share the load
    body = _batch(client, [{"text": f"/nitf/p{i}"} for i in range(11)]).json()
    counts = store.profile_counts()
    assert body["registered"] == 11 and counts == {b: 2 for b in builtin().brokers}


def test_a_topic_of_another_subscriber_is_409_for_that_item_only(api):
    client, _, store, _ = api
    other = client.post("/subscribers").json()
    theirs = other["delivery_topic"]
    assert _batch(client, [{"text": "/a", "delivery": {"topic": "alerts.taken.t"}}],
                  token=other["token"]).json()["registered"] == 1
    # A topic another subscriber claimed under the operator's prefixes (or a name Kafka takes for
    # the same), its own topic and its namespace: 409 for those items only.
    r = _batch(client, [{"text": "/b", "delivery": {"topic": "alerts.taken_t"}}, {"text": "/c"},
                        {"text": "/d", "delivery": {"topic": theirs}},
                        {"text": "/e", "delivery": {"topic": f"{theirs}.mine"}}])
    assert [x["status"] for x in r.json()["results"]] == [409, 201, 409, 409]
    assert "taken" in r.json()["results"][0]["error"]["detail"]
    assert "someone else" in r.json()["results"][2]["error"]["detail"]
    assert store.topic_owner("alerts.taken.t") == ("alerts.taken.t", other["subscriber_id"])
    assert store.topic_owner(f"{theirs}.mine") is None


def test_the_delivery_topics_a_subscriber_may_name(api):
    client, _, store, admin = api
    sub = client.post("/subscribers").json()
    own = sub["delivery_topic"]
    r = _batch(client, [{"text": "/a", "delivery": {"topic": own}},                  # 0 its own: 201
                        {"text": "/b", "delivery": {"topic": f"{own}.sf"}},          # 1 its namespace: 201
                        {"text": "/c", "delivery": {"topic": "mine.sf"}},            # 2 under a prefix: 201
                        {"text": "/d", "delivery": {"topic": "elsewhere.sf"}},       # 3 outside both: 422
                        {"text": "/e", "delivery": {"topic": "__consumer_offsets"}},  # 4 Kafka's: 422
                        {"text": "/f", "delivery": {"topic": "onyx.profiles"}},      # 5 the overlay's: 422
                        {"text": "/g", "delivery": {"topic": "onyx.deliver.b1"}}],   # 6 a broker's: 409
               token=sub["token"])
    body = r.json()
    assert [x["status"] for x in body["results"]] == [201, 201, 201, 422, 422, 422, 409], body
    assert [x["profile"]["delivery_topic"] for x in body["results"][:3]] == [own, f"{own}.sf", "mine.sf"]
    assert "outside your namespace" in body["results"][3]["error"]["detail"]
    assert "Kafka's own" in body["results"][4]["error"]["detail"]
    assert "someone else" in body["results"][6]["error"]["detail"]
    assert {f"{own}.sf", "mine.sf"} <= set(admin.created) and "elsewhere.sf" not in admin.created
    for topic in (f"{own}.sf", "mine.sf"):
        assert store.topic_owner(topic) == (topic, sub["subscriber_id"])


def test_a_foreign_topic_under_a_prefix_is_409_and_stays_unclaimed(api):
    client, _, store, _ = api
    sub = client.post("/subscribers").json()
    # alerts.foreign exists in Kafka and nobody here created it: someone else reads it.
    r = _batch(client, [{"text": "/a", "delivery": {"topic": "alerts.foreign"}}, {"text": "/b"}], token=sub["token"])
    assert [x["status"] for x in r.json()["results"]] == [409, 201]
    assert "exists in Kafka" in r.json()["results"][0]["error"]["detail"]
    assert [p.delivery_topic for p in store.list_profiles()] == [sub["delivery_topic"]]
    # A refused item claims nothing: asking again is still a 409, by either endpoint.
    assert store.topic_owner("alerts.foreign") is None
    r = _batch(client, [{"text": "/c", "delivery": {"topic": "alerts.foreign"}}], token=sub["token"])
    assert [x["status"] for x in r.json()["results"]] == [409]
    r = client.post("/profiles", json={"text": "/d", "delivery": {"topic": "alerts.foreign"}},
                    headers={"X-Onyx-Subscriber-Token": sub["token"]})
    assert r.status_code == 409, r.text


def test_a_request_without_a_token_has_lower_limits(api):
    client, sender, store, _ = api
    most = config.ANONYMOUS_MAX_BATCH
    r = _batch(client, [{"text": f"/nitf/p{i}"} for i in range(most + 1)])
    assert r.status_code == 413 and f"{most:,}" in r.json()["detail"]
    assert store.list_profiles() == [] and sender.sent == []
    text = "/nitf/" + "a" * (config.ANONYMOUS_MAX_CHARS // 2)  # two of them: over the limit
    r = _batch(client, [{"text": text}, {"text": text}])
    assert r.status_code == 413 and f"{config.ANONYMOUS_MAX_CHARS:,}" in r.json()["detail"]
    assert store.counts() == {"subscribers": 0, "delivery_topics": 0, "profiles": 0}
    # With a subscriber's token, the same requests register.
    token = client.post("/subscribers").json()["token"]
    assert _batch(client, [{"text": f"/nitf/p{i}"} for i in range(most + 1)], token=token).json()["registered"] == \
        most + 1
    assert _batch(client, [{"text": text}, {"text": text}], token=token).json()["registered"] == 2
    assert _batch(client, [{"text": f"/nitf/p{i}"} for i in range(most)]).json()["registered"] == most


def test_a_batch_over_the_character_limit_is_413_even_with_a_token(api):
    client, _, store, _ = api
    token = client.post("/subscribers").json()["token"]
    chunk = "/nitf/" + "a" * 99_000  # a valid profile's length; 21 of them are over 2,000,000 characters
    r = _batch(client, [{"text": chunk}] * 21, token=token)
    assert r.status_code == 413 and "2,000,000" in r.json()["detail"]
    assert store.list_profiles() == []


def test_requests_without_a_token_share_one_rate_bucket(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "ANONYMOUS_RATE", 0.001)  # refills nothing during the test
    monkeypatch.setattr(config, "ANONYMOUS_BURST", 5)
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), BatchSender(), allowed_hosts=["testserver"]), raise_server_exceptions=False)
    assert _batch(client, [{"text": "/a"}] * 3).json()["registered"] == 3  # one new subscriber, 3 from the bucket
    assert client.post("/profiles", json={"text": "/b"}).status_code == 201  # another one: 4
    token = client.post("/subscribers").json()["token"]  # a new subscriber takes one too: 5
    r = client.post("/profiles", json={"text": "/c"})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert _batch(client, [{"text": "/c"}]).status_code == 429
    assert client.post("/subscribers").status_code == 429
    # A subscriber's own budget is not the anonymous one.
    assert client.post("/profiles", json={"text": "/c"}, headers={"X-Onyx-Subscriber-Token": token}).status_code == 201
    assert _batch(client, [{"text": "/d"}] * 10, token=token).json()["registered"] == 10


def test_a_topic_kafka_refuses_fails_the_items_naming_it_and_is_not_claimed(api):
    client, sender, store, admin = api
    r = _batch(client, [{"text": "/a", "delivery": {"topic": "acl.refused"}}, {"text": "/b"},
                        {"text": "/c", "delivery": {"topic": "acl.refused"}}])  # under the prefix acl.
    body = r.json()
    assert [x["status"] for x in body["results"]] == [422, 201, 422]
    assert "ACLs" in body["results"][0]["error"]["detail"]
    assert store.topic_owner("acl.refused") is None
    assert [p.text for p in store.list_profiles()] == ["/b"]
    assert [k.decode() for t, (k, _, _) in sender.sent if t.startswith("onyx.broker.")] == \
        [body["results"][1]["profile"]["profile_id"]]


def test_a_sender_without_batches_gets_the_packets_one_by_one(tmp_path):
    sender = OnlySend()
    client = TestClient(create_app(Store(f"sqlite:///{tmp_path / 'onyx.db'}"), builtin(), sender,
                                   allowed_hosts=["testserver"]))
    sender.sent.clear()
    body = _batch(client, [{"text": "/a", "near": "b3"}, {"text": "/b", "near": "b4"}]).json()
    assert body["registered"] == 2
    assert [t for t, _ in sender.sent] == ["onyx.broker.b3", "onyx.profiles", "onyx.broker.b4", "onyx.profiles"]


def test_no_engine_is_built_to_validate(api, monkeypatch):
    client, _, _, _ = api

    def no_engine(*args, **kwargs):
        raise AssertionError("the registration service built an Engine")

    monkeypatch.setattr("yfilter.engine.Engine.__init__", no_engine)
    assert client.post("/profiles", json={"text": "/nitf"}).status_code == 201
    assert client.post("/profiles", json={"text": "/nitf["}).json()["column"] == 7
    assert _batch(client, [{"text": "/nitf"}, {"text": "/nitf["}]).json()["registered"] == 1


def test_openapi_documents_the_batch_endpoint(api):
    client, _, _, _ = api
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/profiles:batch"]["post"]
    schemas = spec["components"]["schemas"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/ProfileBatchIn")
    items = schemas["ProfileBatchIn"]["properties"]["profiles"]
    # Each item is checked on its own (a bad one is refused alone, in the results): a POST /profiles body, or
    # anything else, which the answer refuses.
    assert items["items"]["anyOf"][0] == {"$ref": "#/components/schemas/ProfileIn"} and items["maxItems"] == MAX_BATCH
    assert schemas["ProfileBatchIn"]["examples"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ProfileBatchRegistered")
    assert {"400", "401", "413", "422", "429", "503"} <= set(op["responses"])
    assert "column" in schemas["Error"]["properties"]
    # optional: without it, a new subscriber
    assert op["security"] == [{"SubscriberToken": []}, {"Bearer": []}, {}]
    assert op["x-onyx-access"]["callers"] == ["anonymous", "subscriber"]
    assert spec["components"]["securitySchemes"]["SubscriberToken"]["name"] == "X-Onyx-Subscriber-Token"


def test_the_kafka_sender_fails_in_time_when_kafka_is_unreachable():
    from broker.registry.control_packets import KafkaSender, query_packet
    from broker.local.devcluster import free_port
    from broker.registry.store import ProfileRecord

    sender = KafkaSender(f"127.0.0.1:{free_port()}", timeout_s=1.0)
    packet = query_packet("add", ProfileRecord("p1", "/a", "b1", "onyx.deliver.s1", 1))
    t0 = time.monotonic()
    with pytest.raises(PacketSendError, match="could not write to Kafka"):
        sender.send_batch([("onyx.broker.b1", packet), ("onyx.profiles", packet)])
    with pytest.raises(PacketSendError, match="Kafka topic onyx.broker.b1"):
        sender.send("onyx.broker.b1", packet)
    assert time.monotonic() - t0 < 10


def test_placement_load_follows_the_services_changes_and_rereads_the_store(api, monkeypatch):
    client, _, store, _ = api
    bodies = [client.post("/profiles", json={"text": f"/nitf/p{i}"}).json() for i in range(6)]
    assert sorted(b["host_broker"] for b in bodies) == builtin().brokers
    gone = bodies[3]
    client.delete(f"/profiles/{gone['profile_id']}", headers={"X-Onyx-Token": gone["token"]})
    assert client.post("/profiles", json={"text": "/nitf/again"}).json()["host_broker"] == gone["host_broker"]
    load = PlacementLoad(store, refresh_s=0.0)  # what another writer of the database would be seen as
    assert load.counts() == {b: 1 for b in builtin().brokers}
    load.add("b2")
    assert load.counts()["b2"] == 1  # read again: the store knows better


def test_a_sqlite_file_is_in_write_ahead_log_mode(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL: a commit is on disk
    with Store("sqlite://").engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "memory"
