"""The console's endpoints, /metrics and the rules of webhook registration, on the service in
process (no Kafka: the brokers' figures come from a fixed source, as `onyx up` hands them)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from broker.registry.app import create_app
from broker.registry.console import add_console
from broker.registry.figures import Figures
from broker.registry.metrics import add_metrics
from broker.registry.store import Store
from routing.overlay import builtin
from tests.broker.test_service import RecordingSender

ADMIN = "operator-secret"
FIGURES = {"brokers": [{"broker": b, "running": True, "messages": 10 * i, "forwarded": i, "delivered": 2 * i,
                        "dead_letters": 0, "lag": 0, "last_batch_ms": 120, "routing": {"b1": {"links": 1, "atoms": 4}},
                        "false_positives": {}} for i, b in enumerate(["b1", "b2", "b3", "b4", "b5", "b6"], 1)]}


OPERATOR = {"X-Onyx-Admin-Token": ADMIN}
OPERATOR_PATHS = ("/console/overlay", "/console/figures", "/console/profiles", "/console/dead-letters", "/metrics")


def service(tmp_path, admin_token=ADMIN, allow_private=False):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    overlay = builtin()
    app = create_app(store, overlay, RecordingSender(), admin_token=admin_token, webhook_allow_private=allow_private,
                     allowed_hosts=["testserver"])
    figures = Figures(lambda: FIGURES, every=0)
    add_console(app, store, overlay, figures, None)
    add_metrics(app, figures, store.profile_counts)
    return TestClient(app, raise_server_exceptions=False), store


def test_console_page_and_its_data(tmp_path):
    client, _ = service(tmp_path)
    page = client.get("/console")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"] and "Onyx console" in page.text
    client.post("/profiles", json={"text": "/nitf[head/title = 'x']", "near": "b5"})
    view = client.get("/console/overlay", headers=OPERATOR).json()
    assert [b["broker_id"] for b in view["brokers"]] == ["b1", "b2", "b3", "b4", "b5", "b6"]
    assert sum(b["profiles"] for b in view["brokers"]) == 1
    news = next(s for s in view["sources"] if s["source_id"] == "news")
    assert len(news["tree"]) == 5 and news["tree"][0][0] == news["root_broker"]  # a spanning tree from the root
    assert client.get("/console/figures", headers=OPERATOR).json()["brokers"][5]["messages"] == 60
    assert client.get("/console/profiles", params={"q": "TITLE b5"}, headers=OPERATOR).json()["total"] == 1
    assert client.get("/console/profiles", params={"q": "nothing-like-this"}, headers=OPERATOR).json()["total"] == 0
    assert client.get("/console/dead-letters", headers=OPERATOR).json() == []  # no Kafka here


def test_console_data_and_metrics_need_the_operator_token(tmp_path):
    client, _ = service(tmp_path)
    assert client.get("/console").status_code == 200  # the page holds no data
    registered = client.post("/profiles", json={"text": "/nitf"}).json()
    publisher = client.post("/sources", json={"name": "wire"}).json()["publisher_token"]
    for path in OPERATOR_PATHS:
        refused = client.get(path)
        assert refused.status_code == 401 and "X-Onyx-Admin-Token" in refused.json()["detail"], path
        assert client.get(path, headers={"X-Onyx-Admin-Token": "wrong"}).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        # A token of another kind is no operator's (403), whatever it is.
        for other in ({"X-Onyx-Subscriber-Token": registered["subscriber_token"]},
                      {"X-Onyx-Token": registered["token"]}, {"X-Onyx-Publisher-Token": publisher},
                      {"Authorization": f"Bearer {registered['subscriber_token']}"}):
            assert client.get(path, headers=other).status_code == 403, (path, other)
        assert client.get(path, headers={"X-Onyx-Admin-Token": ADMIN}).status_code == 200, path
        assert client.get(path, headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200, path


def test_without_an_operator_token_the_operator_surfaces_are_closed(tmp_path):
    client, _ = service(tmp_path, admin_token=None)
    assert client.get("/console").status_code == 200
    registered = client.post("/profiles", json={"text": "/nitf"}).json()
    for path in OPERATOR_PATHS:
        for headers in ({}, {"X-Onyx-Admin-Token": ADMIN}, {"X-Onyx-Admin-Token": ""},
                        {"Authorization": f"Bearer {ADMIN}"}):
            assert client.get(path, headers=headers).status_code == 401, (path, headers)
        # Never open, never 200, to anyone: a subscriber's token is of another kind.
        assert client.get(path, headers={"X-Onyx-Subscriber-Token": registered["subscriber_token"]}
                          ).status_code == 403, path
    assert client.post("/rebalance", headers={"X-Onyx-Admin-Token": ADMIN}).status_code == 401
    assert client.post("/publishers", headers={"X-Onyx-Admin-Token": ADMIN}).status_code == 401


def test_metrics_have_the_brokers_figures(tmp_path):
    client, _ = service(tmp_path)
    client.post("/profiles", json={"text": "/nitf", "near": "b2"})
    text = client.get("/metrics", headers=OPERATOR).text
    assert 'onyx_messages_in_total{broker="b6"} 60.0' in text
    assert 'onyx_batch_duration_seconds{broker="b1"} 0.12' in text
    assert 'onyx_profiles_hosted{broker="b2"} 1.0' in text
    assert 'onyx_routing_atoms{broker="b3"} 4.0' in text


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://10.1.2.3/x", "http://169.254.169.254/latest",
                                 "http://[::1]/x", "http://localhost/x", "file:///etc/passwd",
                                 "http://user:pw@example.org/x"])
def test_a_webhook_to_an_internal_host_is_refused_and_nothing_is_registered(tmp_path, url):
    client, store = service(tmp_path)
    answer = client.post("/profiles", json={"text": "/nitf", "delivery": {"webhook": url}})
    assert answer.status_code == 422 and "delivery.webhook" in answer.json()["detail"], answer.text
    assert store.list_profiles() == [] and store.webhooks() == []


def test_a_webhook_on_loopback_when_the_operator_allows_it_gets_a_secret(tmp_path):
    client, store = service(tmp_path, allow_private=True)
    answer = client.post("/profiles", json={"text": "/nitf", "delivery": {"webhook": "http://127.0.0.1:9/hook"}})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert len(body["webhook_secret"]) == 64
    [hook] = store.webhooks()
    assert (hook.profile_id, hook.url, hook.secret) == (body["profile_id"], "http://127.0.0.1:9/hook",
                                                        body["webhook_secret"])
    plain = client.post("/profiles", json={"text": "/nitf"}).json()
    assert "webhook_secret" not in plain
    batch = client.post("/profiles:batch", json={"profiles": [{"text": "/nitf", "delivery": {
        "webhook": "http://127.0.0.1:9/hook"}}]}).json()
    assert batch["results"][0]["status"] == 422 and "POST /profiles" in batch["results"][0]["error"]["detail"]
    assert client.delete(f"/profiles/{body['profile_id']}", headers={"X-Onyx-Token": body["token"]}).status_code == 204
    assert store.webhooks() == []
