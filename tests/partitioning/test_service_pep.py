"""The registration service choosing host brokers with the ``pep`` strategy."""

import json
from collections import Counter

import pytest
from fastapi.testclient import TestClient

from broker.registry.app import create_app
from broker.registry.store import Store
from routing.overlay import builtin


class Sink:
    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


@pytest.fixture
def client(tmp_path):
    app = create_app(Store(f"sqlite:///{tmp_path / 'onyx.db'}"), builtin(), Sink(), placement="pep",
                     allowed_hosts=["testserver"])
    return TestClient(app, raise_server_exceptions=False)


def _host(client, text):
    r = client.post("/profiles", json={"text": text})
    assert r.status_code == 201, r.text
    return r.json()["host_broker"]


def test_profiles_with_the_same_value_share_a_host_and_values_spread_over_brokers(client):
    areas = ["SF", "NY", "LA", "Paris", "Oslo", "Lima", "Seoul", "Delhi", "Cairo", "Riga", "Doha", "Kyiv"]
    hosts = {}
    for round_ in range(6):
        for area in areas:
            text = f"/nitf[head/pubdata/@edition.area = '{area}'][head/title = 'story {round_}']"
            hosts.setdefault(area, []).append(_host(client, text))
    # Once the pattern is known (after the first round), every profile of an area goes to one broker.
    assert all(len(set(h[1:])) == 1 for h in hosts.values()), hosts
    used = Counter(h[-1] for h in hosts.values())
    assert len(used) >= 3  # areas are spread, not piled on one broker
    token = client.post("/subscribers").json()["token"]
    brokers = {b["broker_id"]: b["profiles"]
               for b in client.get("/brokers", headers={"X-Onyx-Subscriber-Token": token}).json()}
    assert sum(brokers.values()) == 6 * len(areas)


def test_profiles_without_equalities_are_spread_by_load(client):
    hosts = Counter(_host(client, f"/nitf/body/p{i % 3}") for i in range(12))
    assert sorted(hosts) == builtin().brokers and set(hosts.values()) == {2}


def test_each_overlay_gets_its_own_pep_state(tmp_path):
    a = TestClient(create_app(Store("sqlite://"), builtin(), Sink(), placement="pep", allowed_hosts=["testserver"]))
    b = TestClient(create_app(Store(f"sqlite:///{tmp_path / 'b.db'}"), builtin(), Sink(), placement="pep",
                              allowed_hosts=["testserver"]))
    for i in range(4):
        a.post("/profiles", json={"text": f"/nitf[@version = 'v{i}']"})
    first_b = b.post("/profiles", json={"text": "/nitf[@version = 'v9']"}).json()["host_broker"]
    assert first_b == "b1"  # b's PEP has seen nothing yet: a don't-care profile on the least-loaded broker


AREAS = ["SF", "NY", "LA", "Paris", "Oslo", "Lima"]


def _admin_client(store, sink, token="s3cret"):
    return TestClient(create_app(store, builtin(), sink, placement="pep", admin_token=token,
                                 allowed_hosts=["testserver"]),
                      raise_server_exceptions=False)


def test_a_restarted_service_restores_pep_from_its_store(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    first = _admin_client(store, Sink())

    def text(area, n):
        return f"/nitf[head/pubdata/@edition.area = '{area}'][contains(head/title, 'story {n}')]"

    for n in range(3):
        hosts = {a: _host(first, text(a, n)) for a in AREAS}
    restarted = _admin_client(store, Sink())  # same database, fresh process state
    assert {a: _host(restarted, text(a, 9)) for a in AREAS} == hosts  # each area joins its profiles
    assert len(set(hosts.values())) >= 3


def test_rebalance_moves_profiles_with_a_delete_and_a_newer_add(tmp_path):
    store, sink = Store(f"sqlite:///{tmp_path / 'onyx.db'}"), Sink()
    client = _admin_client(store, sink)
    for round_ in range(4):
        for a in AREAS:
            _host(client, f"/nitf[head/pubdata/@edition.area = '{a}'][head/title = 't{round_}']")
    assert client.post("/rebalance").status_code == 401
    assert client.post("/rebalance", headers={"X-Onyx-Admin-Token": "wrong"}).status_code == 401
    subscriber = client.post("/subscribers").json()["token"]
    assert client.post("/rebalance", headers={"X-Onyx-Subscriber-Token": subscriber}).status_code == 403
    assert client.post("/rebalance", headers={"Authorization": f"Bearer {subscriber}"}).status_code == 403
    sink.sent.clear()
    r = client.post("/rebalance", headers={"X-Onyx-Admin-Token": "s3cret"})
    assert r.status_code == 200, r.text
    for move in r.json():
        record = store.profile(move["profile_id"])
        assert record.host_broker == move["to_broker"] != move["from_broker"]
        packets = [(t, json.loads(v)) for t, (k, v, h) in sink.sent
                   if k == move["profile_id"].encode() and t.startswith("onyx.broker.")]
        assert packets == [(f"onyx.broker.{move['from_broker']}", {**packets[0][1], "op": "delete",
                                                                    "version": record.version - 1}),
                           (f"onyx.broker.{move['to_broker']}", {**packets[1][1], "op": "add",
                                                                  "version": record.version})]
        assert record.delivery_topic == packets[1][1]["delivery_topic"]
    counts = Counter(p.host_broker for p in store.list_profiles())
    assert max(counts.values()) - min(counts.get(b, 0) for b in builtin().brokers) <= len(AREAS) * 4


def test_rebalance_is_closed_without_an_operator_token(tmp_path):
    store, sink = Store("sqlite://"), Sink()
    client = _admin_client(store, sink, token=None)
    _host(client, "/nitf[@version = 'v1']")
    sink.sent.clear()
    # No request is an operator's: 401 (not 403, not 200), saying why.
    r = client.post("/rebalance", headers={"X-Onyx-Admin-Token": "x"})
    assert r.status_code == 401 and "ONYX_ADMIN_TOKEN" in r.json()["detail"]
    assert client.post("/rebalance").status_code == 401
    assert client.post("/rebalance", headers={"Authorization": "Bearer x"}).status_code == 401
    assert sink.sent == []
