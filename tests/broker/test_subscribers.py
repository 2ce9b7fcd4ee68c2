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
    """Records the topics created; ``fail`` / ``refuse`` make the next creation fail like Kafka."""

    def __init__(self):
        self.created = []
        self.fail = self.refuse = False

    def create(self, topic):
        if self.refuse:
            raise TopicRefusedError(f"Kafka does not let the registration service create topic {topic} (ACLs)")
        if self.fail:
            raise TopicAdminError(f"could not create Kafka topic {topic}: timed out")
        self.created.append(topic)


@pytest.fixture
def svc(tmp_path):
    sender, admin = RecordingSender(), RecordingAdmin()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender, topic_admin=admin,
                                   allowed_hosts=["testserver"]), raise_server_exceptions=False)
    return client, sender, admin, store


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
              "onyx_src_news", "ONYX.BROKER.B1", "onyx-dead_letter", "onyx.future-topic", "onyx"}
    return sorted(names)


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
    assert client.get(f"/profiles/{first['profile_id']}").json()["subscriber_id"] == first["subscriber_id"]


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
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert topic in detail and "omit delivery.topic" in detail
    _nothing_stored(store, sender, admin, before)


def test_internal_topics_are_refused_on_update_too_and_the_old_profile_stays(svc):
    client, sender, _, _ = svc
    p = _profile(client)
    sent = len(sender.sent)
    for topic in ("onyx.src.news", "onyx.broker.b2", f"onyx.deliver.{_profile(client)['subscriber_id']}"):
        r = client.put(f"/profiles/{p['profile_id']}", json={"text": "/nitf", "delivery": {"topic": topic}},
                       headers={"X-Onyx-Token": p["token"]})
        assert r.status_code == 422 and topic in r.json()["detail"]
    assert len(sender.sent) == sent + 2  # only the second profile's registration
    view = client.get(f"/profiles/{p['profile_id']}").json()
    assert (view["text"], view["delivery_topic"], view["version"]) == ("/nitf/head/title", p["delivery_topic"], 1)


def test_a_custom_topic_belongs_to_the_first_subscriber_to_claim_it(svc):
    client, sender, admin, store = svc
    alice = _profile(client, topic="alerts.sf")
    assert alice["delivery_topic"] == "alerts.sf" and "alerts.sf" in admin.created
    _profile(client, alice["subscriber_token"], topic="alerts.sf")  # its owner may use it again
    before = _snapshot(store, sender, admin)
    for topic in ("alerts.sf", "alerts_sf"):  # '_' and '.' are one name to Kafka
        r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": topic}})
        assert r.status_code == 409 and "already taken" in r.json()["detail"]
    _nothing_stored(store, sender, admin, before)
    bob = _profile(client)
    r = client.put(f"/profiles/{bob['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "alerts.sf"}},
                   headers={"X-Onyx-Token": bob["token"]})
    assert r.status_code == 409
    r = client.put(f"/profiles/{bob['profile_id']}", json={"text": "/nitf", "delivery": {"topic": "bob.alerts"}},
                   headers={"X-Onyx-Token": bob["token"]})
    assert r.status_code == 200 and r.json()["delivery_topic"] == "bob.alerts" and "bob.alerts" in admin.created
    assert store.topic_owner("bob.alerts") == ("bob.alerts", bob["subscriber_id"])


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
        for pid, topic in [("loop", "onyx.src.news"), ("state", "onyx.profiles"), ("ok", "alerts.sf")]:
            tx.add_profile(ProfileRecord(pid, "/nitf", "b4", topic, 3), "t")
    sender = RecordingSender()
    with caplog.at_level(logging.WARNING, logger="onyx.service"):
        client = TestClient(create_app(Store(url), builtin(), sender, allowed_hosts=["testserver"]))
    assert client.get("/profiles/loop").status_code == 404 and client.get("/profiles/state").status_code == 404
    assert client.get("/profiles/ok").status_code == 200
    deletes = [(t, p[0]) for t, p in sender.sent if t == "onyx.broker.b4" and p[0] != b"metadata"]
    assert deletes == [("onyx.broker.b4", b"loop"), ("onyx.broker.b4", b"state")]  # the host drops them
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
                         (pid, topic, hash_token("tok")))
    client = TestClient(create_app(Store(f"sqlite:///{db}"), builtin(), RecordingSender(),
                                   topic_admin=RecordingAdmin(), allowed_hosts=["testserver"]),
                        raise_server_exceptions=False)
    view = client.get("/profiles/old1").json()
    assert view["delivery_topic"] == "onyx.deliver.b4" and view["subscriber_id"] is None
    # Its custom topic stays its own: nobody can claim it ...
    r = client.post("/profiles", json={"text": "/nitf", "delivery": {"topic": "legacy.alerts"}})
    assert r.status_code == 409 and "before subscribers" in r.json()["detail"]
    # ... its token still updates it, but it cannot claim a topic without a subscriber.
    assert client.put("/profiles/old2", json={"text": "/nitf//hl1"}, headers={"X-Onyx-Token": "tok"}).status_code == 200
    r = client.put("/profiles/old2", json={"text": "/nitf", "delivery": {"topic": "new.topic"}},
                   headers={"X-Onyx-Token": "tok"})
    assert r.status_code == 422 and "register it again" in r.json()["detail"]
    assert _profile(client)["delivery_topic"].startswith(topics.DELIVER_PREFIX)
    Store(f"sqlite:///{db}")  # opening it again changes nothing
