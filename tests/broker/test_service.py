"""The registration service: HTTP API semantics, with a small in-memory packet sink."""

import pytest
from fastapi.testclient import TestClient

from broker.registry.app import create_app
from broker.registry.control_packets import PacketSendError
from broker.registry.store import Store
from routing.overlay import builtin


class RecordingSender:
    """Collects packets; ``fail`` makes the next send raise like an unreachable Kafka."""

    def __init__(self):
        self.sent = []
        self.fail = False

    def send(self, topic, packet):
        if self.fail:
            raise PacketSendError("could not write to Kafka topic onyx.broker.b1: timed out")
        self.sent.append((topic, packet))


@pytest.fixture
def api(tmp_path):
    sender = RecordingSender()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender,
                                   allowed_hosts=["testserver"]), raise_server_exceptions=False)
    return client, sender, store


def _register(client, text="/nitf/head/title", **extra):
    r = client.post("/profiles", json={"text": text, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def test_register_returns_id_host_token_and_default_delivery_topic(api):
    client, sender, _ = api
    body = _register(client)
    # DESIGN.md's four fields, and the subscriber created with the profile (no token was sent).
    assert set(body) == {"profile_id", "host_broker", "token", "delivery_topic", "subscriber_id", "subscriber_token"}
    assert body["delivery_topic"] == f"onyx.deliver.{body['subscriber_id']}"
    topics_sent = [t for t, _ in sender.sent]
    assert topics_sent[-2:] == [f"onyx.broker.{body['host_broker']}", "onyx.profiles"]


def test_round_robin_spreads_profiles_over_all_brokers(api):
    client, _, _ = api
    hosts = [_register(client, f"/nitf/p{i}")["host_broker"] for i in range(12)]
    assert sorted(set(hosts)) == builtin().brokers
    assert all(hosts.count(b) == 2 for b in set(hosts))


def test_nearest_placement_honours_the_hint(api):
    client, _, _ = api
    assert _register(client, near="b6")["host_broker"] == "b6"


def test_bad_profile_is_422_with_position_and_leaves_nothing_behind(api):
    client, sender, store = api
    before = len(sender.sent)
    r = client.post("/profiles", json={"text": "/nitf/head/parent::x"})
    assert r.status_code == 422
    assert "parent::" in r.json()["detail"] and r.json()["column"] == 12
    assert len(sender.sent) == before
    assert store.list_profiles() == []


def test_kafka_failure_rolls_the_registration_back(api):
    client, sender, store = api
    sender.fail = True
    r = client.post("/profiles", json={"text": "/nitf"})
    assert r.status_code == 503 and "nothing was changed" in r.json()["detail"]
    assert store.list_profiles() == []


def test_update_and_delete_need_the_token(api):
    client, sender, store = api
    body = _register(client)
    pid, token = body["profile_id"], body["token"]
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf"}).status_code == 401
    # A token no profile has is no credential (401); another profile's is one, but not for this profile (403).
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf"}, headers={"X-Onyx-Token": "nope"}).status_code == 401
    other = _register(client, "/nitf/other")["token"]
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf"}, headers={"X-Onyx-Token": other}).status_code == 403
    r = client.put(f"/profiles/{pid}", json={"text": "/nitf//hl1"}, headers={"X-Onyx-Token": token})
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["text"] == "/nitf//hl1"
    assert client.get(f"/profiles/{pid}").json()["text"] == "/nitf//hl1"
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": f"Bearer {other}"}).status_code == 403
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": f"Bearer {token}"}).status_code == 204
    assert client.get(f"/profiles/{pid}").status_code == 404
    # Its token went with it; with another profile's, the answer is that there is no such profile.
    assert client.delete(f"/profiles/{pid}", headers={"X-Onyx-Token": token}).status_code == 401
    assert client.delete(f"/profiles/{pid}", headers={"X-Onyx-Token": other}).status_code == 404
    assert sender.sent[-1][0] == "onyx.profiles" and sender.sent[-1][1][1] is None  # tombstone


def test_update_with_a_bad_profile_keeps_the_old_one(api):
    client, _, _ = api
    body = _register(client)
    r = client.put(f"/profiles/{body['profile_id']}", json={"text": "//"}, headers={"X-Onyx-Token": body["token"]})
    assert r.status_code == 422
    assert client.get(f"/profiles/{body['profile_id']}").json()["text"] == "/nitf/head/title"


def test_tokens_are_not_stored_in_clear(api, tmp_path):
    client, _, _ = api
    body = _register(client)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("onyx.db*"))  # the file and its write-ahead log
    assert body["token"].encode() not in stored and body["subscriber_token"].encode() not in stored


def test_sources_get_ids_root_brokers_and_topics(api):
    client, sender, _ = api
    r = client.post("/sources", json={"name": "AFP World", "rate": 50, "size": 4000})
    assert r.status_code == 201
    assert r.json()["source_id"] == "afp-world" and r.json()["topic"] == "onyx.src.afp-world"
    assert r.json()["root_broker"] in builtin().brokers
    assert client.post("/sources", json={"name": "AFP World"}).status_code == 409
    assert client.post("/sources", json={"name": "x", "root_broker": "b99"}).status_code == 422
    told = {t for t, (k, v, h) in sender.sent if k in (b"afp-world", b"metadata", b"urn:onyx:sources:afp-world")}
    # the catalog log, the metadata log, and every broker's repository (its sources' trees reach them all)
    assert told == {"onyx.catalog", "onyx.metadata"} | {f"onyx.broker.{b}" for b in builtin().brokers}


@pytest.mark.parametrize("payload", [{}, {"text": ""}, {"text": "/a", "delivery": {"topic": "bad topic!"}},
                                     {"text": "/a", "near": "b99"}])
def test_bad_requests_are_4xx_with_a_message(api, payload):
    client, _, _ = api
    r = client.post("/profiles", json=payload)
    assert 400 <= r.status_code < 500
    assert r.json()["detail"]


def test_unknown_profile_is_404(api):
    client, _, _ = api
    assert client.get("/profiles/nope").status_code == 404


def test_brokers_health_and_openapi(api):
    client, _, _ = api
    _register(client, near="b5")
    brokers = {b["broker_id"]: b for b in client.get("/brokers").json()}
    assert brokers["b5"]["profiles"] == 1 and brokers["b1"]["sources"] == ["news"]
    assert client.get("/health").json()["status"] == "ok"
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/sources", "/subscribers", "/profiles", "/profiles/{profile_id}", "/brokers", "/health"} <= set(paths)


def test_registrations_survive_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'onyx.db'}"
    client = TestClient(create_app(Store(url), builtin(), RecordingSender(), allowed_hosts=["testserver"]))
    body = _register(client)
    again = TestClient(create_app(Store(url), builtin(), RecordingSender(), allowed_hosts=["testserver"]))
    assert again.get(f"/profiles/{body['profile_id']}").json()["text"] == "/nitf/head/title"
