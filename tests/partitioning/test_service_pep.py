"""The registration service choosing host brokers with the ``pep`` strategy."""

from collections import Counter

import pytest
from fastapi.testclient import TestClient

from broker.placement import STRATEGIES, PlacementRequest, choose_host
from broker.service import create_app
from broker.store import Store
from routing.overlay import builtin


class Sink:
    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


@pytest.fixture
def client(tmp_path):
    app = create_app(Store(f"sqlite:///{tmp_path / 'onyx.db'}"), builtin(), Sink(), placement="pep")
    return TestClient(app, raise_server_exceptions=False)


def _host(client, text):
    r = client.post("/profiles", json={"text": text})
    assert r.status_code == 201, r.text
    return r.json()["host_broker"]


def test_pep_is_a_registered_strategy():
    assert "pep" in STRATEGIES
    overlay = builtin()
    assert choose_host("pep", PlacementRequest(overlay, text="/nitf")) in overlay.brokers
    assert choose_host("pep", PlacementRequest(overlay)) in overlay.brokers  # no text: round robin


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
    brokers = {b["broker_id"]: b["profiles"] for b in client.get("/brokers").json()}
    assert sum(brokers.values()) == 6 * len(areas)


def test_profiles_without_equalities_are_spread_by_load(client):
    hosts = Counter(_host(client, f"/nitf/body/p{i % 3}") for i in range(12))
    assert sorted(hosts) == builtin().brokers and set(hosts.values()) == {2}


def test_each_overlay_gets_its_own_pep_state(tmp_path):
    a = TestClient(create_app(Store("sqlite://"), builtin(), Sink(), placement="pep"))
    b = TestClient(create_app(Store(f"sqlite:///{tmp_path / 'b.db'}"), builtin(), Sink(), placement="pep"))
    for i in range(4):
        a.post("/profiles", json={"text": f"/nitf[@version = 'v{i}']"})
    first_b = b.post("/profiles", json={"text": "/nitf[@version = 'v9']"}).json()["host_broker"]
    assert first_b == "b1"  # b's PEP has seen nothing yet: a don't-care profile on the least-loaded broker
