"""Result volume (issue 41): a host broker writes one delivery record per delivery topic and
message for all the filters there that match it (key: the first id, header ``onyx-profiles``:
every id, split past a size), transformation profiles a record per result, and profiles
delivering by reference a JSON reference to the archived message, which the registration
service serves to whoever it was delivered to. No Kafka here: the plan on its own, the service
in-process over an archive written by the archive writer's code."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from archive.writer import archive_rows
from broker import packets, topics
from broker.control.state import BrokerState
from broker.dataplane.plan import Plan, PlanSettings
from broker.registry.app import create_app
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from routing.overlay import builtin

MESSAGE = b"<nitf><head><title>SF</title></head><body><p>x</p></body></nitf>"
FLWR = "for $n in $msg/nitf return <t>{$n/head/title}</t>"


def _plan(profiles: list[tuple[str, str, str, str | None]], header_bytes: int | None = None) -> Plan:
    """Broker b1 of Figure 4 hosting ``(id, text, delivery topic, delivery_by)`` profiles."""
    state = BrokerState("b1", builtin("figure4"))
    for pid, text, topic, by in profiles:
        body = {"op": "add", "profile_id": pid, "version": 1, "text": text, "delivery_topic": topic,
                **({"delivery_by": by} if by else {})}
        rows = state.apply("query", pid.encode(), json.dumps(body).encode(), [], topics.broker_topic("b1"))
        assert all(r[0] != topics.DEAD_LETTER for r in rows)
    settings = PlanSettings(guard=True) if header_bytes is None else PlanSettings(guard=True,
                                                                                  profiles_header_bytes=header_bytes)
    return Plan(state, settings)


def _deliveries(plan: Plan, value: bytes = MESSAGE) -> list[tuple[str, bytes, bytes, dict[str, bytes]]]:
    rows = plan.process(topics.source_topic("news"), b"k", value, [], 0, 7)
    return [(t, k, v, dict(h)) for t, k, v, h in rows if not t.startswith(topics.BROKER_PREFIX)]


def test_several_filters_of_one_topic_make_one_record_listing_them_all():
    plan = _plan([(f"p{i}", text, "onyx.deliver.s1", None)
                  for i, text in enumerate(["/nitf", "/nitf/head/title", "//p", "/nitf/body", "/rss"])])
    [(topic, key, value, headers)] = _deliveries(plan)
    assert topic == "onyx.deliver.s1" and key == b"p0" and value == MESSAGE
    assert headers[packets.PROFILES] == b"p0,p1,p2,p3" and headers["onyx-message-id"] == b"news-0-7"
    assert packets.DELIVERY not in headers
    for pid in ("p0", "p1", "p2", "p3"):
        assert packets.delivers_to(pid, key, list(headers.items()))
    assert not packets.delivers_to("p4", key, list(headers.items()))  # /rss does not match


def test_two_topics_make_two_records():
    plan = _plan([("a1", "/nitf", "onyx.deliver.s1", None), ("a2", "//title", "onyx.deliver.s1", None),
                  ("b1", "/nitf", "onyx.deliver.s2", None)])
    got = {t: (k, h[packets.PROFILES]) for t, k, _, h in _deliveries(plan)}
    assert got == {"onyx.deliver.s1": (b"a1", b"a1,a2"), "onyx.deliver.s2": (b"b1", b"b1")}


def test_a_single_match_is_keyed_by_its_profile_id_as_before():
    [(_, key, value, headers)] = _deliveries(_plan([("p1", "/nitf", "t.one", None)]))
    assert key == b"p1" and value == MESSAGE and headers[packets.PROFILES] == b"p1"


def test_transformation_profiles_get_records_of_their_own():
    plan = _plan([("f1", "/nitf", "onyx.deliver.s1", None), ("f2", "//p", "onyx.deliver.s1", None),
                  ("q1", FLWR, "onyx.deliver.s1", None)])
    rows = _deliveries(plan)
    assert len(rows) == 2
    flwr = next(r for r in rows if r[1] == b"q1")
    assert flwr[2] == b"<t><title>SF</title></t>" and flwr[3][packets.PROFILES] == b"q1"
    shared = next(r for r in rows if r[1] == b"f1")
    assert shared[2] == MESSAGE and shared[3][packets.PROFILES] == b"f1,f2"


def test_the_header_is_split_past_its_size_each_record_with_the_message():
    ids = [f"{i:016x}" for i in range(10)]  # service-made ids: 16 hex digits
    plan = _plan([(pid, "/nitf", "onyx.deliver.s1", None) for pid in ids], header_bytes=3 * 17 - 1)
    rows = _deliveries(plan)
    assert [r[3][packets.PROFILES].decode().split(",") for r in rows] == [ids[0:3], ids[3:6], ids[6:9], ids[9:]]
    assert all(r[1] == r[3][packets.PROFILES].split(b",")[0] and r[2] == MESSAGE for r in rows)
    assert all(len(r[3][packets.PROFILES]) <= 50 for r in rows)


def test_by_reference_filters_share_a_reference_record_apart_from_copies():
    plan = _plan([("c1", "/nitf", "onyx.deliver.s1", None), ("r1", "/nitf", "onyx.deliver.s1", "reference"),
                  ("r2", "//title", "onyx.deliver.s1", "reference")])
    rows = {r[1]: r for r in _deliveries(plan)}
    assert set(rows) == {b"c1", b"r1"} and rows[b"c1"][2] == MESSAGE
    _, _, value, headers = rows[b"r1"]
    assert headers[packets.DELIVERY] == packets.REFERENCE and headers[packets.PROFILES] == b"r1,r2"
    assert json.loads(value) == {"by": "reference", "message_id": "news-0-7", "source": "news",
                                 "href": "/profiles/r1/messages/news-0-7"}
    # Over HTTP each profile gets the reference with its own href.
    mine = packets.for_profile("r2", value, list(headers.items()))
    assert json.loads(mine)["href"] == "/profiles/r2/messages/news-0-7"
    assert packets.for_profile("c1", MESSAGE, list(rows[b"c1"][3].items())) == MESSAGE


def test_an_update_back_to_copies_and_a_deletion_leave_no_reference_behind():
    plan = _plan([("r1", "/nitf", "t.one", "reference")])
    body = {"op": "update", "profile_id": "r1", "version": 2, "text": "/nitf", "delivery_topic": "t.one"}
    plan.control("query", b"r1", json.dumps(body).encode(), [], topics.broker_topic("b1"))
    [(_, _, value, headers)] = _deliveries(plan)
    assert value == MESSAGE and packets.DELIVERY not in headers
    stale = {**body, "version": 1, "delivery_by": "reference"}  # an older packet changes nothing
    plan.control("query", b"r1", json.dumps(stale).encode(), [], topics.broker_topic("b1"))
    assert plan.state.by_reference == set()
    plan.control("query", b"r1", json.dumps({"op": "delete", "profile_id": "r1", "version": 3}).encode(), [],
                 topics.broker_topic("b1"))
    assert _deliveries(plan) == [] and plan.state.by_reference == set()


def test_an_id_with_a_comma_gets_a_record_of_its_own_without_the_header():
    plan = _plan([("a,b", "/nitf", "t.one", None), ("c", "/nitf", "t.one", None)])
    rows = {r[1]: r[3] for r in _deliveries(plan)}
    assert set(rows) == {b"a,b", b"c"} and packets.PROFILES not in rows[b"a,b"]
    assert packets.delivers_to("a,b", b"a,b", list(rows[b"a,b"].items()))
    assert not packets.delivers_to("a,b", b"c", list(rows[b"c"].items()))


def test_a_refused_topic_is_still_a_dead_letter_per_profile():
    plan = _plan([("p1", "/nitf", "onyx.broker.b2", None), ("p2", "/nitf", "onyx.broker.b2", None),
                  ("p3", "/nitf", "t.ok", None)])
    rows = _deliveries(plan)
    assert [r[0] for r in rows].count(topics.DEAD_LETTER) == 2
    [ok] = [r for r in rows if r[0] == "t.ok"]
    assert ok[3][packets.PROFILES] == b"p3"


def test_a_header_size_below_one_is_refused_with_the_setting_named():
    with pytest.raises(ValueError, match="ONYX_DELIVERY_PROFILES_HEADER_BYTES"):
        PlanSettings(profiles_header_bytes=0)


# -- the service: delivery.by and GET /profiles/{id}/messages/{message id} -------------------------


class Sender:
    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


@pytest.fixture
def service(tmp_path):
    """The service over an archive of two messages of "news" (the operator's source: no
    subscriber here may read it as a source)."""
    root = tmp_path / "archive"
    docs = [MESSAGE, b"<rss><channel/></rss>"]
    archive_rows(root, [{"topic": "onyx.src.news", "partition": 0, "offset": i, "ts_ms": 1_764_115_200_000 + i,
                         "key": None, "value": d, "headers": [{"key": "onyx-message-id", "value": f"m{i}".encode()}]}
                        for i, d in enumerate(docs)])
    sender = Sender()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), sender, admin_token="op", allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), root)
    return TestClient(app, raise_server_exceptions=False), sender


def test_delivery_by_reference_is_stored_shown_and_sent_to_the_host(service):
    client, sender = service
    made = client.post("/profiles", json={"text": "/nitf", "delivery": {"by": "reference"}})
    assert made.status_code == 201 and made.json()["delivery_by"] == "reference"
    pid, token = made.json()["profile_id"], {"X-Onyx-Token": made.json()["token"]}
    packet = next(json.loads(v) for t, (k, v, _) in sender.sent
                  if t.startswith(topics.BROKER_PREFIX) and k == pid.encode())
    assert packet["delivery_by"] == "reference"
    assert client.get(f"/profiles/{pid}", headers=token).json()["delivery_by"] == "reference"
    # A PUT without delivery.by keeps it; with copy, it goes back to copies.
    assert client.put(f"/profiles/{pid}", json={"text": "//title"}, headers=token).json()["delivery_by"] == "reference"
    assert client.put(f"/profiles/{pid}", json={"text": "//title", "delivery": {"by": "copy"}},
                      headers=token).json()["delivery_by"] == "copy"
    plain = client.post("/profiles", json={"text": "/nitf"}).json()
    assert "delivery_by" not in plain


def test_a_transformation_profile_asking_for_references_is_accepted_and_delivers_its_results(service):
    """Every request the description admits is accepted; a transformation's results are not in
    the archive, so its host delivers them as they are (the choice applies once it is a filter)."""
    client, sender = service
    made = client.post("/profiles", json={"text": FLWR, "delivery": {"by": "reference"}})
    assert made.status_code == 201 and made.json()["delivery_by"] == "reference"
    pid = made.json()["profile_id"]
    packet = next(json.loads(v) for t, (k, v, _) in sender.sent
                  if t.startswith(topics.BROKER_PREFIX) and k == pid.encode())
    plan = _plan([(pid, FLWR, "onyx.deliver.s1", packet["delivery_by"])])
    [(_, key, value, headers)] = _deliveries(plan)
    assert (key, value) == (pid.encode(), b"<t><title>SF</title></t>") and packets.DELIVERY not in headers
    batch = client.post("/profiles:batch", json={"profiles": [{"text": FLWR, "delivery": {"by": "reference"}}]})
    assert [r["status"] for r in batch.json()["results"]] == [201]


def test_a_message_delivered_by_reference_is_served_to_its_subscriber_only(service):
    client, _ = service
    mine = client.post("/profiles", json={"text": "/nitf/head/title", "delivery": {"by": "reference"}}).json()
    sub = {"X-Onyx-Subscriber-Token": mine["subscriber_token"]}
    other = client.post("/profiles", json={"text": "/rss", "delivery": {"by": "reference"}}, headers=sub).json()
    stranger = client.post("/profiles", json={"text": "/nitf"}).json()  # another subscriber's

    got = client.get(packets.message_path(mine["profile_id"], "m0"), headers=sub)
    assert got.status_code == 200 and got.content == MESSAGE and got.headers["X-Onyx-Source"] == "news"
    assert got.headers["content-type"].startswith("application/xml")
    assert client.get(f"/profiles/{mine['profile_id']}/messages/m0",
                      headers={"X-Onyx-Token": mine["token"]}).status_code == 200
    # Its other profile was not delivered m0 (and the subscriber may not read "news" as a source).
    refused = client.get(packets.message_path(other["profile_id"], "m0"), headers=sub)
    assert refused.status_code == 404 and refused.headers["Retry-After"]
    # Another subscriber's token on this profile: no such profile of theirs.
    assert client.get(packets.message_path(mine["profile_id"], "m0"),
                      headers={"X-Onyx-Token": stranger["token"]}).status_code == 404
    # Not archived (yet): 404 with Retry-After, the same answer as a message not delivered.
    missing = client.get(packets.message_path(mine["profile_id"], "m9"), headers=sub)
    assert missing.status_code == 404 and "Retry-After" in missing.headers
    assert client.get(packets.message_path(mine["profile_id"], "m0")).status_code == 401
    # The operator reads any.
    assert client.get(packets.message_path(other["profile_id"], "m1"), headers={"X-Onyx-Admin-Token": "op"}).content \
        == b"<rss><channel/></rss>"


def test_the_fetch_answers_503_without_an_archive(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender(), allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), None)
    client = TestClient(app, raise_server_exceptions=False)
    made = client.post("/profiles", json={"text": "/nitf", "delivery": {"by": "reference"}}).json()
    answer = client.get(packets.message_path(made["profile_id"], "m0"), headers={"X-Onyx-Token": made["token"]})
    assert answer.status_code == 503 and "archive" in answer.json()["detail"]
