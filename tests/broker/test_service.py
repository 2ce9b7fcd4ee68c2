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


ADMIN = "operator-secret"


@pytest.fixture
def api(tmp_path):
    sender = RecordingSender()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender, admin_token=ADMIN, allowed_hosts=["testserver"]), raise_server_exceptions=False)
    return client, sender, store


def _as(token):
    """The header of a profile's token."""
    return {"X-Onyx-Token": token}


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
    assert client.get(f"/profiles/{pid}").status_code == 401  # reading it needs a token too
    # A token no profile has is no credential (401); another subscriber's profile's is one, but
    # this profile is not its tenant's: there is no such profile for it (404, not 403).
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf"}, headers={"X-Onyx-Token": "nope"}).status_code == 401
    other = _register(client, "/nitf/other")["token"]
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf"}, headers=_as(other)).status_code == 404
    assert client.get(f"/profiles/{pid}", headers=_as(other)).status_code == 404
    assert client.get(f"/profiles/{pid}", headers=_as(token)).json()["text"] == "/nitf/head/title"  # unchanged
    r = client.put(f"/profiles/{pid}", json={"text": "/nitf//hl1"}, headers=_as(token))
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["text"] == "/nitf//hl1"
    assert client.get(f"/profiles/{pid}", headers=_as(token)).json()["text"] == "/nitf//hl1"
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": f"Bearer {other}"}).status_code == 404
    assert client.get(f"/profiles/{pid}", headers=_as(token)).status_code == 200  # still there
    assert client.delete(f"/profiles/{pid}", headers={"Authorization": f"Bearer {token}"}).status_code == 204
    # Its token went with it (401); with another profile's, the answer is that there is no such profile.
    assert client.get(f"/profiles/{pid}", headers=_as(token)).status_code == 401
    assert client.get(f"/profiles/{pid}", headers=_as(other)).status_code == 404
    assert client.delete(f"/profiles/{pid}", headers=_as(token)).status_code == 401
    assert client.delete(f"/profiles/{pid}", headers=_as(other)).status_code == 404
    assert store.profile(pid) is None
    assert sender.sent[-1][0] == "onyx.profiles" and sender.sent[-1][1][1] is None  # tombstone


def test_a_profile_is_its_subscribers_and_an_operator_may_read_it(api):
    client, _, store = api
    body = _register(client)
    pid, mine = body["profile_id"], {"X-Onyx-Subscriber-Token": body["subscriber_token"]}
    stranger = client.post("/subscribers").json()["token"]
    theirs = {"X-Onyx-Subscriber-Token": stranger}
    # The subscriber's token does what the profile's does, as a header or as a Bearer token.
    assert client.get(f"/profiles/{pid}", headers=mine).json()["profile_id"] == pid
    assert client.get(f"/profiles/{pid}", headers={"Authorization": f"Bearer {body['subscriber_token']}"}
                      ).status_code == 200
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf/a"}, headers=mine).json()["version"] == 2
    # Another subscriber sees no such profile, and changes nothing.
    assert client.get(f"/profiles/{pid}", headers=theirs).status_code == 404
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf/b"}, headers=theirs).status_code == 404
    assert client.delete(f"/profiles/{pid}", headers=theirs).status_code == 404
    assert store.profile(pid).text == "/nitf/a"
    # An operator may read it, not change it; a token of another kind is 403.
    admin = {"X-Onyx-Admin-Token": ADMIN}
    assert client.get(f"/profiles/{pid}", headers=admin).json()["text"] == "/nitf/a"
    assert client.put(f"/profiles/{pid}", json={"text": "/nitf/c"}, headers=admin).status_code == 403
    assert client.delete(f"/profiles/{pid}", headers=admin).status_code == 403
    publisher = client.post("/sources", json={"name": "wire"}).json()["publisher_token"]
    assert client.get(f"/profiles/{pid}", headers={"X-Onyx-Publisher-Token": publisher}).status_code == 403
    # A wrong operator token is 401, like any token no one has.
    assert client.get(f"/profiles/{pid}", headers={"X-Onyx-Admin-Token": "nope"}).status_code == 401
    assert client.delete(f"/profiles/{pid}", headers=mine).status_code == 204
    assert client.get(f"/profiles/{pid}", headers=mine).status_code == 404


def test_a_token_with_bytes_outside_ascii_is_401_not_500(api):
    client, _, _ = api
    pid = _register(client)["profile_id"]
    for header in ("X-Onyx-Token", "X-Onyx-Subscriber-Token", "X-Onyx-Publisher-Token", "X-Onyx-Admin-Token"):
        r = client.get(f"/profiles/{pid}", headers=[(header.encode(), "tök\xffen".encode("latin-1"))])
        assert r.status_code == 401, (header, r.status_code, r.text)
    r = client.get(f"/profiles/{pid}", headers=[(b"Authorization", "Bearer tök\xffen".encode("latin-1"))])
    assert r.status_code == 401, r.text


def test_update_with_a_bad_profile_keeps_the_old_one(api):
    client, _, _ = api
    body = _register(client)
    r = client.put(f"/profiles/{body['profile_id']}", json={"text": "//"}, headers=_as(body["token"]))
    assert r.status_code == 422
    assert client.get(f"/profiles/{body['profile_id']}", headers=_as(body["token"])).json()["text"] == \
        "/nitf/head/title"


def test_tokens_are_not_stored_in_clear(api, tmp_path):
    client, _, _ = api
    body = _register(client)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("onyx.db*"))  # the file and its write-ahead log
    assert body["token"].encode() not in stored and body["subscriber_token"].encode() not in stored


def test_sources_get_ids_root_brokers_and_topics(api):
    client, sender, store = api
    r = client.post("/sources", json={"name": "AFP World", "rate": 50, "size": 4000})
    assert r.status_code == 201
    assert r.json()["source_id"] == "afp-world" and r.json()["topic"] == "onyx.src.afp-world"
    assert r.json()["root_broker"] in builtin().brokers
    # Without a token the source is a new publisher's, whose token the answer gives once; not public.
    assert r.json()["publisher_id"] and r.json()["publisher_token"] and r.json()["public"] is False
    publisher = {"X-Onyx-Publisher-Token": r.json()["publisher_token"]}
    assert client.post("/sources", json={"name": "AFP World"}).status_code == 409
    assert client.post("/sources", json={"name": "AFP World"}, headers=publisher).status_code == 409
    assert client.post("/sources", json={"name": "x", "root_broker": "b99"}).status_code == 422
    told = {t for t, (k, v, h) in sender.sent if k in (b"afp-world", b"metadata", b"urn:onyx:sources:afp-world")}
    # the catalog log, the metadata log, and every broker's repository (its sources' trees reach them all)
    assert told == {"onyx.catalog", "onyx.metadata"} | {f"onyx.broker.{b}" for b in builtin().brokers}
    # With its token, the publisher registers more sources of its own (and gets no new token).
    r = client.post("/sources", json={"name": "AFP Sport", "public": True}, headers=publisher)
    assert r.status_code == 201 and "publisher_token" not in r.json()
    assert r.json()["publisher_id"] == store.source_access("afp-world").owner
    listed = {s["source_id"]: s for s in client.get("/sources", headers=publisher).json()}
    assert set(listed) == {"afp-world", "afp-sport"} and listed["afp-sport"]["public"] is True


@pytest.mark.parametrize("name", ["AFP\x01World", "tab\there", "bell\x7f", "nul\x00"])
def test_a_source_name_with_control_characters_is_422(api, name):
    client, _, store = api
    r = client.post("/sources", json={"name": name})
    assert r.status_code == 422 and "control characters" in r.json()["detail"], r.text
    assert [s.id for s in store.list_sources()] == ["news"]


def test_a_source_needs_a_publisher_or_operator_token(api):
    client, _, store = api
    subscriber = client.post("/subscribers").json()["token"]
    r = client.post("/sources", json={"name": "wire"}, headers={"X-Onyx-Subscriber-Token": subscriber})
    assert r.status_code == 403
    assert client.post("/sources", json={"name": "wire"}, headers={"X-Onyx-Publisher-Token": "nope"}
                       ).status_code == 401
    r = client.post("/sources", json={"name": "wire"}, headers={"X-Onyx-Admin-Token": ADMIN})
    assert r.status_code == 201 and "publisher_token" not in r.json()
    assert r.json().get("publisher_id") is None  # the operator's
    assert store.source_access("wire").owner is None


@pytest.mark.parametrize("payload", [{}, {"text": ""}, {"text": "/a", "delivery": {"topic": "bad topic!"}},
                                     {"text": "/a", "near": "b99"}])
def test_bad_requests_are_4xx_with_a_message(api, payload):
    client, _, _ = api
    r = client.post("/profiles", json=payload)
    assert 400 <= r.status_code < 500
    assert r.json()["detail"]


def test_unknown_profile_is_404(api):
    client, _, _ = api
    subscriber = client.post("/subscribers").json()["token"]
    assert client.get("/profiles/nope", headers={"X-Onyx-Subscriber-Token": subscriber}).status_code == 404
    assert client.get("/profiles/nope", headers={"X-Onyx-Admin-Token": ADMIN}).status_code == 404
    assert client.get("/profiles/nope").status_code == 401  # without a token, nothing is said of it


def test_brokers_health_and_openapi(api):
    client, _, _ = api
    body = _register(client, near="b5")
    assert client.get("/brokers").status_code == 401
    # A subscriber sees the brokers and their profile counts, and only the sources it may read:
    # the overlay's "news" is the operator's and not public; an operator sees it.
    brokers = {b["broker_id"]: b for b in client.get("/brokers", headers=_as(body["token"])).json()}
    assert brokers["b5"]["profiles"] == 1 and brokers["b1"]["sources"] == []
    brokers = {b["broker_id"]: b for b in client.get("/brokers", headers={"X-Onyx-Admin-Token": ADMIN}).json()}
    assert brokers["b5"]["profiles"] == 1 and brokers["b1"]["sources"] == ["news"]
    assert client.get("/health").json()["status"] == "ok"
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"/sources", "/subscribers", "/profiles", "/profiles/{profile_id}", "/brokers", "/health",
            "/publishers", "/sources/{source_id}/grants/{subscriber_id}"} <= set(paths)
    # Every operation states who may call it, and its security comes from that.
    assert set(spec["components"]["securitySchemes"]) == {"SubscriberToken", "ProfileToken", "PublisherToken",
                                                          "AdminToken", "Bearer"}
    assert paths["/health"]["get"]["security"] == []
    get_profile = paths["/profiles/{profile_id}"]["get"]
    assert set(get_profile["x-onyx-access"]["callers"]) == {"owner", "subscriber", "operator"}
    assert {} not in get_profile["security"] and {"Bearer": []} in get_profile["security"]
    register = paths["/profiles"]["post"]
    assert set(register["x-onyx-access"]["callers"]) == {"anonymous", "subscriber"}
    assert {} in register["security"] and {"SubscriberToken": []} in register["security"]
    assert paths["/publishers"]["post"]["security"] == [{"AdminToken": []}, {"Bearer": []}]


def test_registrations_survive_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'onyx.db'}"
    client = TestClient(create_app(Store(url), builtin(), RecordingSender(), allowed_hosts=["testserver"]))
    body = _register(client)
    again = TestClient(create_app(Store(url), builtin(), RecordingSender(), allowed_hosts=["testserver"]))
    # The profile, its token and its subscriber's token all survive.
    assert again.get(f"/profiles/{body['profile_id']}", headers=_as(body["token"])).json()["text"] == \
        "/nitf/head/title"
    assert again.get(f"/profiles/{body['profile_id']}", headers={"X-Onyx-Subscriber-Token": body["subscriber_token"]}
                     ).status_code == 200
