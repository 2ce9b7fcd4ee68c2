"""POST /profiles:changes: many updates and deletions in one request, each refused or made
as PUT / DELETE /profiles/{id} would, the made ones in one transaction and one batch of
query packets; and the same against the real service (uvicorn, a SQLite file, Kafka)."""

import json
import time

import pytest
from fastapi.testclient import TestClient

from broker.clients import TopicTail, api
from broker.local.devcluster import free_port
from broker.registry.app import create_app
from broker.registry.serve import BackgroundServer, ServiceSettings
from broker.registry.store import Store
from routing.overlay import builtin
from tests.broker.test_service_batch import Admin, BatchSender, _batch


def _own_metadata():
    """The service's metadata provider on a sender of its own: its documents and deliveries
    (some sent by its batch thread) stay out of the packets these tests count."""
    from broker.metadata.provider import MetadataProvider
    from tests.broker.metadata_packets import Recorder

    return MetadataProvider(Recorder(), builtin())


@pytest.fixture
def batch_api(tmp_path):
    sender, store = BatchSender(), Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    client = TestClient(create_app(store, builtin(), sender, topic_admin=Admin(), metadata=_own_metadata(),
                                   allowed_hosts=["testserver"]), raise_server_exceptions=False)
    sender.sent.clear()  # the default source's catalog packets, sent at start
    return client, sender, store, None


def _changes(client, changes, token=None):
    headers = {"X-Onyx-Subscriber-Token": token} if token else {}
    return client.post("/profiles:changes", json={"changes": changes}, headers=headers)


def test_changes_are_made_or_refused_in_order_with_one_packet_batch(batch_api):
    client, sender, store, _ = batch_api
    body = _batch(client, [{"text": "/a"}, {"text": "/b"}, {"text": "/c"}]).json()
    sub = body["subscriber_token"]
    (a, b, c) = [r["profile"] for r in body["results"]]
    other = _batch(client, [{"text": "/d"}]).json()["results"][0]["profile"]  # another subscriber's
    sender.batches.clear()
    changes = [
        {"op": "update", "profile_id": a["profile_id"], "text": "/a/x"},               # 0 ok (subscriber token)
        {"op": "update", "profile_id": b["profile_id"], "text": "/b["},                # 1 422, column 4
        {"op": "delete", "profile_id": c["profile_id"]},                               # 2 ok
        {"op": "update", "profile_id": c["profile_id"], "text": "/c/y"},               # 3 404: deleted by 2
        {"op": "delete", "profile_id": other["profile_id"]},                           # 4 404: not its own
        {"op": "delete", "profile_id": other["profile_id"], "token": a["token"]},      # 5 404: a's token
        {"op": "update", "profile_id": other["profile_id"], "text": "/d/z",
         "token": other["token"]},                                                     # 6 ok (the profile's token)
        {"op": "rename", "profile_id": a["profile_id"]},                               # 7 422
        {"op": "update", "profile_id": a["profile_id"]},                               # 8 422: no text
        {"op": "update", "profile_id": a["profile_id"], "text": "/a/x2"},              # 9 ok: version 3
        {"op": "delete", "profile_id": "nope"},                                        # 10 404
        {"op": "delete", "profile_id": other["profile_id"], "token": "wrong"},         # 11 401: nobody's token
    ]
    r = _changes(client, changes, token=sub)
    assert r.status_code == 200, r.text
    out = r.json()
    # Another subscriber's profile is no profile of this caller's (404), whatever token of its own it shows.
    assert [x["status"] for x in out["results"]] == [200, 422, 204, 404, 404, 404, 200, 422, 422, 200, 404, 401]
    assert (out["applied"], out["failed"]) == (4, 8)
    assert "of yours" in out["results"][4]["error"]["detail"] and "of yours" in out["results"][5]["error"]["detail"]
    assert out["results"][1]["error"]["column"] == 4
    assert out["results"][9]["profile"]["version"] == 3 and out["results"][9]["profile"]["text"] == "/a/x2"
    # Stored, and sent as one batch: per change its query packet and its profile-log record.
    assert store.profile(a["profile_id"]).text == "/a/x2" and store.profile(c["profile_id"]) is None
    assert store.profile(b["profile_id"]).text == "/b" and store.profile(other["profile_id"]).version == 2
    [batch] = sender.batches
    packets = [(t, json.loads(v)) for t, (_, v, _) in batch if t.startswith("onyx.broker.")]
    assert [(p["op"], p["profile_id"], p["version"]) for _, p in packets] == [
        ("update", a["profile_id"], 2), ("delete", c["profile_id"], 2),
        ("update", other["profile_id"], 2), ("update", a["profile_id"], 3)]
    assert all(t == f"onyx.broker.{a['host_broker']}" for t, p in packets if p["profile_id"] == a["profile_id"])


def test_without_a_subscriber_token_each_change_needs_its_profiles_token(batch_api):
    client, _, store, _ = batch_api
    body = _batch(client, [{"text": "/a"}, {"text": "/b"}]).json()
    a, b = [r["profile"] for r in body["results"]]
    r = _changes(client, [{"op": "update", "profile_id": a["profile_id"], "text": "/a/x"},   # 401: no token
                          {"op": "update", "profile_id": a["profile_id"], "text": "/a/y", "token": a["token"]},
                          {"op": "delete", "profile_id": b["profile_id"], "token": b["token"]},
                          {"op": "delete", "profile_id": a["profile_id"], "token": "nobody's"}])  # 401
    assert [x["status"] for x in r.json()["results"]] == [401, 200, 204, 401]
    assert store.profile(a["profile_id"]).text == "/a/y" and store.profile(b["profile_id"]) is None
    # A profile's token in the header speaks for that profile only.
    other = _batch(client, [{"text": "/c"}]).json()["results"][0]["profile"]
    r = client.post("/profiles:changes", headers={"X-Onyx-Token": a["token"]},
                    json={"changes": [{"op": "update", "profile_id": a["profile_id"], "text": "/a/z"},
                                      {"op": "delete", "profile_id": other["profile_id"]}]})
    assert [x["status"] for x in r.json()["results"]] == [200, 404]
    assert store.profile(other["profile_id"]) is not None


def test_a_change_token_with_a_lone_surrogate_is_401_not_500(batch_api):
    client, _, store, _ = batch_api
    a = _batch(client, [{"text": "/a"}]).json()["results"][0]["profile"]
    for pid in (a["profile_id"], "nope"):  # JSON may hold a lone surrogate; no token has one
        body = b'{"changes": [{"op": "delete", "profile_id": "%s", "token": "\\ud800"}]}' % pid.encode()
        r = client.post("/profiles:changes", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["status"] == 401
    assert store.profile(a["profile_id"]) is not None


def test_changes_without_a_token_have_the_anonymous_limits(batch_api):
    from broker import config

    client, sender, _, _ = batch_api
    r = _changes(client, [{"op": "delete", "profile_id": f"p{i}", "token": "t"}
                          for i in range(config.ANONYMOUS_MAX_BATCH + 1)])
    assert r.status_code == 413 and not sender.sent


def test_a_request_that_is_not_a_list_of_changes_changes_nothing(batch_api):
    client, sender, _, _ = batch_api
    for body in ({"changes": []}, {"changes": "x"}, {}, {"changes": [{}] * 10_001}):
        r = client.post("/profiles:changes", json=body)
        assert r.status_code == 422, r.text
    r = _changes(client, [{"op": "delete", "profile_id": "x"}], token="not-a-token")
    assert r.status_code == 401
    assert not sender.sent


@pytest.mark.kafka
def test_changes_reach_their_host_brokers_for_real(kafka, tmp_path, unique):
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{tmp_path / 'onyx.db'}",
                                              "127.0.0.1", free_port())).start()
    try:
        body = api("POST", f"{server.url}/profiles:batch",
                   {"profiles": [{"text": f"/x[@u = 'CH-{unique}-{i}']", "near": "b5"} for i in range(3)]})
        ids = [r["profile"]["profile_id"] for r in body["results"]]
        reader = TopicTail(kafka.bootstrap_servers, ["onyx.broker.b5"])
        changes = [{"op": "update", "profile_id": ids[0], "text": f"/y[@u = 'CH-{unique}-0']"},
                   {"op": "delete", "profile_id": ids[1]}]
        out = api("POST", f"{server.url}/profiles:changes", {"changes": changes},
                  subscriber_token=body["subscriber_token"])
        assert [x["status"] for x in out["results"]] == [200, 204]
        seen, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 2:
            seen += [json.loads(r.value) for r in reader if r.value and r.key and r.key.decode() in ids[:2]]
        reader.close()
        assert [(p["op"], p["profile_id"], p["version"]) for p in seen] == [("update", ids[0], 2), ("delete", ids[1], 2)]
        assert api("GET", f"{server.url}/profiles/{ids[0]}", subscriber_token=body["subscriber_token"]
                   )["text"] == f"/y[@u = 'CH-{unique}-0']"
    finally:
        server.stop()
