"""Subscribers own profiles and delivery topics; no delivery topic may be one of the
overlay's own (issue 24: one profile delivering into a source topic looped without end)."""

import logging
import sqlite3

import pytest
from fastapi.testclient import TestClient

from broker import topics
from broker.deploy.topology import topology
from broker.local.cluster import LocalOverlay
from broker.registry.app import create_app
from broker.registry.store import ProfileRecord, Store
from broker.registry.topic_admin import TopicAdminError, TopicRefusedError
from routing.generators import random_geometric
from routing.overlay import builtin
from tests.broker.test_service import RecordingSender

HEADER = "X-Onyx-Subscriber-Token"


class RecordingAdmin:
    """Records the topics created; ``fail`` / ``refuse`` make the next creation fail like Kafka;
    a topic exists once created, or if it is in ``existing`` (someone else's)."""

    def __init__(self, existing=()):
        self.created = []
        self.existing = set(existing)
        self.fail = self.refuse = False

    def exists(self, topic):
        return topic in self.existing or topic in self.created

    def create(self, topic):
        if self.refuse:
            raise TopicRefusedError(f"Kafka does not let the registration service create topic {topic} (ACLs)")
        if self.fail:
            raise TopicAdminError(f"could not create Kafka topic {topic}: timed out")
        self.created.append(topic)


PREFIXES = ("alerts.", "bob.")  # the operator's delivery topic prefixes (ONYX_DELIVERY_TOPIC_PREFIXES)
ADMIN = "operator-secret"


@pytest.fixture
def svc(tmp_path):
    sender, admin = RecordingSender(), RecordingAdmin(existing={"alerts.someone-elses"})
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender, topic_admin=admin, delivery_prefixes=PREFIXES,
                                   admin_token=ADMIN, allowed_hosts=["testserver"]), raise_server_exceptions=False)
    return client, sender, admin, store


def _own(profile):
    """The header of a registered profile's token."""
    return {"X-Onyx-Token": profile["token"]}


def _profile(client, token=None, topic=None, text="/nitf/head/title", expect=201, **extra):
    body = {"text": text, **({"delivery": {"topic": topic}} if topic else {}), **extra}
    r = client.post("/profiles", json=body, headers={HEADER: token} if token else {})
    assert r.status_code == expect, r.text
    return r.json()


def _nothing_stored(store, sender, admin, before):
    assert store.counts() == before[0] and sender.sent == before[1] and admin.created == before[2]


def _snapshot(store, sender, admin):
    return store.counts(), list(sender.sent), list(admin.created)


def _internal_topics():
    """Every topic any overlay here reads or writes for itself, as the chart and the local
    overlay name them, the issue's list, and look-alikes of them."""
    names = {t.name for ov in (builtin("figure4"), random_geometric(20, sources=2)) for t in topology(ov).topics}
    names |= set(LocalOverlay(builtin("figure4")).topics())
    names |= {"onyx.src.news", "onyx.broker.b2", "onyx.profiles", "onyx.catalog", "onyx.dead-letter",
              "onyx.deliver.b4", "onyx.src.not-registered-yet", "onyx.catalog-v2", "onyx.profiles.compacted",
              "onyx_src_news", "ONYX.BROKER.B1", "onyx-dead_letter", "onyx.future-topic", "onyx",
              "__consumer_offsets", "__transaction_state", "__cluster_metadata", "__anything"}
    return sorted(names)


def _assigned_to_someone_else(topic):
    """Whether ``topic`` is (or looks like: other case, '_' or '-') a name in the
    ``onyx.deliver.*`` namespace the service hands out: another subscriber's (or a broker's)."""
    return topic.lower().replace("_", ".").replace("-", ".").startswith("onyx.deliver")


def test_a_subscriber_registers_and_its_topic_exists_before_the_answer(svc):
    client, _, admin, _ = svc
    r = client.post("/subscribers")
    assert r.status_code == 201
    sub = r.json()
    assert set(sub) == {"subscriber_id", "token", "delivery_topic"}
    assert sub["delivery_topic"] == f"onyx.deliver.{sub['subscriber_id']}" and admin.created == [sub["delivery_topic"]]
    a = _profile(client, sub["token"])
    b = _profile(client, sub["token"], text="/nitf//hl1")
    assert a["delivery_topic"] == b["delivery_topic"] == sub["delivery_topic"]
    assert a["subscriber_id"] == sub["subscriber_id"] and "subscriber_token" not in a
    assert admin.created == [sub["delivery_topic"]]  # one topic per subscriber, not per profile


def test_a_profile_without_a_token_creates_its_own_subscriber(svc):
    client, _, admin, store = svc
    first = _profile(client)
    again = _profile(client, first["subscriber_token"], text="/nitf//hl1")
    other = _profile(client)
    assert again["subscriber_id"] == first["subscriber_id"] != other["subscriber_id"]
    assert again["delivery_topic"] == first["delivery_topic"] != other["delivery_topic"]
    assert admin.created == [first["delivery_topic"], other["delivery_topic"]]
    assert store.counts() == {"subscribers": 2, "delivery_topics": 2, "profiles": 3}
    assert client.get(f"/profiles/{first['profile_id']}", headers=_own(first)).json()["subscriber_id"] == \
        first["subscriber_id"]
    # Each subscriber's token reads its own profiles, not the other's.
    assert client.get(f"/profiles/{first['profile_id']}", headers={HEADER: other["subscriber_token"]}
                      ).status_code == 404
    assert client.get(f"/profiles/{again['profile_id']}", headers={HEADER: first["subscriber_token"]}
                      ).status_code == 200


def test_an_unknown_subscriber_token_is_401_and_nothing_is_stored(svc):
    client, sender, admin, store = svc
    before = _snapshot(store, sender, admin)
    r = client.post("/profiles", json={"text": "/nitf"}, headers={HEADER: "nope"})
    assert r.status_code == 401 and "POST /subscribers" in r.json()["detail"]
    _nothing_stored(store, sender, admin, before)


@pytest.mark.parametrize("topic", _internal_topics())
@pytest.mark.parametrize("who", ["new", "registered"])
def test_every_internal_topic_is_refused_with_a_reason_and_nothing_is_stored(svc, topic, who):
    client, sender, admin, store = svc
    token = client.post("/subscribers").json()["token"] if who == "registered" else None
    before = _snapshot(store, sender, admin)
    r = client.post("/profiles", json={"text": "/nitf/head/title[contains(., 'PROBE')]", "delivery": {"topic": topic}},
                    headers={HEADER: token} if token else {})
    # The overlay's own topics, Kafka's __* and the rest of onyx.*: 422; the onyx.deliver.* topics
    # the service assigns to others (the brokers' included): taken, 409.
    if _assigned_to_someone_else(topic):
        assert r.status_code == 409, r.text
        assert "someone else" in r.json()["detail"]
    else:
        assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert topic in detail and "omit delivery.topic" in detail
    _nothing_stored(store, sender, admin, before)


@pytest.mark.parametrize("topic", ["__consumer_offsets", "onyx.src.news", "onyx.profiles", "onyx.broker.b1"])
def test_no_operator_prefix_opens_kafkas_or_the_overlays_own_topics(tmp_path, topic):
    client = TestClient(create_app(Store(f"sqlite:///{tmp_path / 'onyx.db'}"), builtin(), RecordingSender(),
                                   topic_admin=RecordingAdmin(), delivery_prefixes=("__", "onyx."), allowed_hosts=["testserver"]),
                        raise_server_exceptions=False)
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}})
    assert r.status_code == 422 and topic in r.json()["detail"], r.text


def test_internal_topics_are_refused_on_update_too_and_the_old_profile_stays(svc):
    client, sender, _, _ = svc
    p = _profile(client)
    sent = len(sender.sent)
    theirs = f"onyx.deliver.{_profile(client)['subscriber_id']}"
    for topic, status in (("onyx.src.news", 422), ("onyx.broker.b2", 422), ("__consumer_offsets", 422),
                          ("elsewhere.sf", 422), (theirs, 409), (f"{theirs}.sf", 409)):
        r = client.put(f"/profiles/{p['profile_id']}", json={"text": "/nitf", "delivery": {"topic": topic}},
                       headers=_own(p))
        assert r.status_code == status and topic in r.json()["detail"], (topic, r.text)
    assert len(sender.sent) == sent + 2  # only the second profile's registration
    view = client.get(f"/profiles/{p['profile_id']}", headers=_own(p)).json()
    assert (view["text"], view["delivery_topic"], view["version"]) == ("/nitf/head/title", p["delivery_topic"], 1)


def test_a_custom_topic_belongs_to_the_first_subscriber_to_claim_it(svc):
    client, sender, admin, store = svc
    alice = _profile(client, topic="alerts.sf")  # under an operator's prefix
    assert alice["delivery_topic"] == "alerts.sf" and "alerts.sf" in admin.created
    _profile(client, alice["subscriber_token"], topic="alerts.sf")  # its owner may use it again
    _profile(client, alice["subscriber_token"], topic="alerts.s.f")
    before = _snapshot(store, sender, admin)
    for topic in ("alerts.sf", "alerts.s.f", "alerts.s_f"):  # '_' and '.' are one name to Kafka
        r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}})
        assert r.status_code == 409 and "already taken" in r.json()["detail"]
    _nothing_stored(store, sender, admin, before)
    bob = _profile(client)
    r = client.put(f"/profiles/{bob['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "alerts.sf"}},
                   headers=_own(bob))
    assert r.status_code == 409
    r = client.put(f"/profiles/{bob['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "bob.alerts"}},
                   headers=_own(bob))
    assert r.status_code == 200 and r.json()["delivery_topic"] == "bob.alerts" and "bob.alerts" in admin.created
    assert store.topic_owner("bob.alerts") == ("bob.alerts", bob["subscriber_id"])


def test_a_topic_outside_the_namespace_and_the_prefixes_is_422(svc):
    client, sender, admin, store = svc
    before = _snapshot(store, sender, admin)
    for topic in ("elsewhere.sf", "alerts", "bobalerts", "Alerts.sf"):
        r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}})
        assert r.status_code == 422 and "outside your namespace" in r.json()["detail"], (topic, r.text)
    _nothing_stored(store, sender, admin, before)
    # Without prefixes (the default), only the namespace is open.
    bare = TestClient(create_app(Store("sqlite://"), builtin(), RecordingSender(), topic_admin=RecordingAdmin(), allowed_hosts=["testserver"]),
                      raise_server_exceptions=False)
    assert bare.post("/profiles", json={"text": "/nitf", "delivery": {"topic": "alerts.sf"}}).status_code == 422
    sub = bare.post("/subscribers").json()
    r = bare.post("/profiles", json={"text": "/nitf", "delivery": {"topic": f"{sub['delivery_topic']}.sf"}},
                  headers={HEADER: sub["token"]})
    assert r.status_code == 201 and r.json()["delivery_topic"] == f"{sub['delivery_topic']}.sf"


def test_a_topic_in_the_subscribers_namespace_is_its_own(svc):
    client, sender, admin, store = svc
    alice, bob = client.post("/subscribers").json(), client.post("/subscribers").json()
    mine = f"{alice['delivery_topic']}.sf"
    p = _profile(client, alice["token"], topic=mine)
    assert p["delivery_topic"] == mine and mine in admin.created
    assert store.topic_owner(mine) == (mine, alice["subscriber_id"])
    before = _snapshot(store, sender, admin)
    # Another subscriber may name neither alice's topic nor anything in her namespace (409).
    for topic in (alice["delivery_topic"], mine, f"{alice['delivery_topic']}.other", mine.replace(".", "_")):
        r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}}, headers={HEADER: bob["token"]})
        assert r.status_code == 409, (topic, r.text)
    _nothing_stored(store, sender, admin, before)


def test_a_foreign_topic_under_a_prefix_is_409(svc):
    client, sender, admin, store = svc
    before = _snapshot(store, sender, admin)
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": "alerts.someone-elses"}})
    assert r.status_code == 409 and "exists in Kafka" in r.json()["detail"], r.text
    _nothing_stored(store, sender, admin, before)
    assert store.topic_owner("alerts.someone-elses") is None
    p = _profile(client)
    r = client.put(f"/profiles/{p['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "alerts.someone-elses"}},
                   headers=_own(p))
    assert r.status_code == 409 and store.topic_owner("alerts.someone-elses") is None


def test_deleting_the_last_profile_on_a_topic_releases_its_claim(svc):
    client, _, admin, store = svc
    alice = client.post("/subscribers").json()
    mine = {HEADER: alice["token"]}
    ns = f"{alice['delivery_topic']}.sf"
    a1 = _profile(client, alice["token"], topic="alerts.sf")
    a2 = _profile(client, alice["token"], topic="alerts.sf", text="/nitf//hl1")
    n1 = _profile(client, alice["token"], topic=ns)
    assert client.delete(f"/profiles/{a1['profile_id']}", headers=mine).status_code == 204
    assert store.topic_owner("alerts.sf") == ("alerts.sf", alice["subscriber_id"])  # a2 still delivers there
    assert client.delete(f"/profiles/{a2['profile_id']}", headers=_own(a2)).status_code == 204
    assert store.topic_owner("alerts.sf") is None  # released (the topic stays in Kafka) ...
    # ... and, existing in Kafka with no claim, it is nobody's to name any more: not handed to another subscriber.
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": "alerts.sf"}})
    assert r.status_code == 409 and "exists in Kafka" in r.json()["detail"]
    # A namespace topic is released too, and stays its subscriber's to name again.
    assert client.delete(f"/profiles/{n1['profile_id']}", headers=mine).status_code == 204
    assert store.topic_owner(ns) is None
    assert _profile(client, alice["token"], topic=ns)["delivery_topic"] == ns
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": ns}})
    assert r.status_code == 409
    # Its own default topic is never released.
    d = _profile(client, alice["token"])
    assert client.delete(f"/profiles/{d['profile_id']}", headers=mine).status_code == 204
    assert store.topic_owner(alice["delivery_topic"]) == (alice["delivery_topic"], alice["subscriber_id"])


def test_moving_a_profile_to_another_topic_releases_the_old_one(svc):
    client, _, _, store = svc
    p = _profile(client, topic="alerts.old")
    r = client.put(f"/profiles/{p['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "alerts.new"}},
                   headers=_own(p))
    assert r.status_code == 200 and r.json()["delivery_topic"] == "alerts.new"
    assert store.topic_owner("alerts.old") is None
    assert store.topic_owner("alerts.new") == ("alerts.new", p["subscriber_id"])
    # A deletion through :changes releases as DELETE does.
    r = client.post("/profiles:changes", json={"changes": [{"op": "delete", "profile_id": p["profile_id"],
                                                            "token": p["token"]}]})
    assert r.json()["results"][0]["status"] == 204
    assert store.topic_owner("alerts.new") is None


def test_kafka_failing_to_create_a_topic_leaves_nothing_behind(svc):
    client, sender, admin, store = svc
    before = _snapshot(store, sender, admin)
    admin.fail = True
    r = client.post("/profiles", json={"text": "/nitf"})
    assert r.status_code == 503 and "nothing was changed" in r.json()["detail"]
    assert client.post("/subscribers").status_code == 503
    admin.fail, admin.refuse = False, True
    r = client.post("/profiles", json={"text": "/nitf"})
    assert r.status_code == 422 and "ACLs" in r.json()["detail"]
    _nothing_stored(store, sender, admin, before)


def test_stored_profiles_with_internal_topics_are_refused_at_start_up(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'onyx.db'}"
    store = Store(url)
    with store.transaction() as tx:  # what an older version accepted
        for pid, topic in [("loop", "onyx.src.news"), ("state", "onyx.profiles"), ("ok", "alerts.sf"),
                           ("kafka", "__consumer_offsets")]:
            tx.add_profile(ProfileRecord(pid, "/nitf", "b4", topic, 3), f"t-{pid}")
    sender = RecordingSender()
    with caplog.at_level(logging.WARNING, logger="onyx.service"):
        client = TestClient(create_app(Store(url), builtin(), sender, admin_token=ADMIN, allowed_hosts=["testserver"]))
    operator = {"X-Onyx-Admin-Token": ADMIN}
    for pid in ("loop", "state", "kafka"):
        assert client.get(f"/profiles/{pid}", headers=operator).status_code == 404
        assert client.get(f"/profiles/{pid}", headers={"X-Onyx-Token": f"t-{pid}"}).status_code == 401  # gone too
    assert client.get("/profiles/ok", headers=operator).status_code == 200
    assert client.get("/profiles/ok", headers={"X-Onyx-Token": "t-ok"}).status_code == 200
    deletes = [(t, p[0]) for t, p in sender.sent if t == "onyx.broker.b4" and p[0] != b"metadata"]
    assert sorted(deletes) == [("onyx.broker.b4", b"kafka"), ("onyx.broker.b4", b"loop"),
                               ("onyx.broker.b4", b"state")]  # the host drops them
    messages = [r.getMessage() for r in caplog.records]
    assert any("loop" in m and "onyx.src.news is the overlay's own topic" in m and "not loaded" in m
               for m in messages), messages


def test_a_database_from_before_subscribers_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the profiles table as the previous version created it
        conn.execute("CREATE TABLE profiles (id VARCHAR(63) PRIMARY KEY, text TEXT NOT NULL, host_broker "
                     "VARCHAR(63) NOT NULL, delivery_topic VARCHAR(249) NOT NULL, token_hash VARCHAR(64) NOT NULL, "
                     "version INTEGER NOT NULL, created DATETIME NOT NULL, updated DATETIME NOT NULL)")
        from broker.registry.store import hash_token
        for pid, topic in [("old1", "onyx.deliver.b4"), ("old2", "legacy.alerts")]:
            conn.execute("INSERT INTO profiles VALUES (?, '/nitf', 'b4', ?, ?, 1, '2024-01-01', '2024-01-01')",
                         (pid, topic, hash_token(f"tok-{pid}")))
    client = TestClient(create_app(Store(f"sqlite:///{db}"), builtin(), RecordingSender(),
                                   topic_admin=RecordingAdmin(), delivery_prefixes=("legacy.", "new."),
                                   admin_token=ADMIN, allowed_hosts=["testserver"]), raise_server_exceptions=False)
    view = client.get("/profiles/old1", headers={"X-Onyx-Token": "tok-old1"}).json()
    assert view["delivery_topic"] == "onyx.deliver.b4" and view["subscriber_id"] is None
    assert client.get("/profiles/old1", headers={"X-Onyx-Admin-Token": ADMIN}).json() == view
    assert client.get("/profiles/old2", headers={"X-Onyx-Token": "tok-old1"}).status_code == 404  # not its token
    # Its custom topic stays its own: nobody can claim it ...
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": "legacy.alerts"}})
    assert r.status_code == 409 and "before subscribers" in r.json()["detail"]
    # ... its token still updates it, but it cannot claim a topic without a subscriber.
    old2 = {"X-Onyx-Token": "tok-old2"}
    assert client.put("/profiles/old2", json={"text": "/nitf//hl1"}, headers=old2).status_code == 200
    r = client.put("/profiles/old2", json={"text": "/nitf", "delivery": {"topic": "new.topic"}}, headers=old2)
    assert r.status_code == 422 and "register it again" in r.json()["detail"]
    assert _profile(client)["delivery_topic"].startswith(topics.DELIVER_PREFIX)
    Store(f"sqlite:///{db}")  # opening it again changes nothing
