"""The time-travel operations of the registration service over an archive written by the
archive writer's own code (no Spark here: the rows it would hand over), each answer
checked against the engine over the archived messages or against the profile log."""

import json

import pytest
from fastapi.testclient import TestClient

from archive.writer import archive_rows
from broker.registry.app import create_app
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from routing.overlay import builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

T0 = 1_764_115_200_000


class Sender:
    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


def source_rows(docs, partition=0, start=0, t0=T0):
    return [{"topic": "onyx.src.news", "partition": partition, "offset": start + i, "ts_ms": t0 + 1000 * i,
             "key": None, "value": d, "headers": [{"key": "onyx-message-id", "value": f"m{start + i}".encode()}]}
            for i, d in enumerate(docs)]


def _profile_rows(sent, t0):
    """What the service wrote to onyx.profiles, as the writer reads it."""
    rows = [(k, v) for topic, (k, v, _) in sent if topic == "onyx.profiles"]
    return [{"topic": "onyx.profiles", "partition": 0, "offset": i, "ts_ms": t0 + i, "key": k, "value": v,
             "headers": []} for i, (k, v) in enumerate(rows)]


@pytest.fixture
def world(tmp_path):
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=41)
    docs = [gen.generate() for _ in range(120)]
    root = tmp_path / "archive"
    archive_rows(root, source_rows(docs))
    sender = Sender()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), sender, allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), root)
    return TestClient(app, raise_server_exceptions=False), docs, root, sender


def _replay(client, body):
    r = client.post("/replay", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert "done" in lines[-1] and all(len(x) == 1 for x in lines)
    return [x["match"] for x in lines if "match" in x], lines[-1]["done"]


@pytest.mark.parametrize("profile", [
    "/nitf/head/pubdata[@edition.area = 'SF']",     # indexed
    "/nitf[head/title]//p",                         # no value predicate: a scan of the window
    "for $t in $msg/nitf/head/title return <t>{$t/text()}</t>",
])
def test_replay_of_a_text_equals_the_engine_over_the_window(world, profile):
    client, docs, _, _ = world
    lo, hi = T0 + 10_000, T0 + 90_000        # messages 10 .. 90
    engine = Engine()
    engine.add("p", profile)
    window = range(10, 91)
    if profile.startswith("for"):
        want = {f"m{i}": engine.run(docs[i]).get("p") for i in window}
        want = {k: v for k, v in want.items() if v}
    else:
        want = {f"m{i}" for i in window if engine.match(docs[i])}
    got, done = _replay(client, {"text": profile, "from": lo, "to": hi})
    assert done["matched"] == len(got) and want
    if profile.startswith("for"):
        assert {m["message_id"]: [r.encode() for r in m["results"]] for m in got} == want
    else:
        assert {m["message_id"] for m in got} == want
        assert all(m["xml"].encode() == docs[int(m["message_id"][1:])] for m in got)
    assert done["indexed"] == ("@edition.area = 'SF'" in profile)


def test_replay_of_a_registered_profile_and_its_errors(world):
    client, docs, _, _ = world
    reg = client.post("/profiles", json={"text": "/nitf/head/title"}).json()
    got, _ = _replay(client, {"profile_id": reg["profile_id"], "from": T0, "to": T0 + 10**6})
    engine = Engine()
    engine.add("p", "/nitf/head/title")
    assert {m["message_id"] for m in got} == {f"m{i}" for i, d in enumerate(docs) if engine.match(d)}
    assert client.post("/replay", json={"profile_id": "0" * 16, "from": 0, "to": 1}).status_code == 404
    bad = client.post("/replay", json={"text": "/nitf/head/parent::x", "from": 0, "to": 1})
    assert bad.status_code == 422 and bad.json()["column"] == 12
    assert client.post("/replay", json={"from": 0, "to": 1}).status_code == 422
    assert client.post("/replay", json={"text": "/a", "from": 5, "to": 1}).status_code == 200   # an empty window


def test_messages_at_a_time_and_by_value(world):
    client, docs, _, _ = world
    r = client.get("/archive/messages", params={"at": T0 + 4_500})
    assert [m["message_id"] for m in r.json()["messages"]] == ["m0", "m1", "m2", "m3", "m4"]
    engine = Engine()
    engine.add("p", "/nitf/head/pubdata[@edition.area = 'SF']")
    want = [f"m{i}" for i, d in enumerate(docs) if engine.match(d)]
    r = client.get("/archive/messages", params={"at": T0 + 10**6, "where": "/nitf/head/pubdata/@edition.area=SF"})
    assert sorted(m["message_id"] for m in r.json()["messages"]) == sorted(want)
    assert client.get("/archive/messages", params={"at": 1, "where": "/a"}).status_code == 422
    m7 = client.get("/archive/messages/m7")
    assert m7.status_code == 200 and m7.content == docs[7]
    assert client.get("/archive/messages/nope").status_code == 404


def test_profile_history_active_profiles_and_recipients(world):
    client, docs, root, sender = world
    a = client.post("/profiles", json={"text": "/nitf/head/title"}).json()
    b = client.post("/profiles", json={"text": "/nitf//p"}).json()
    client.put(f"/profiles/{a['profile_id']}", json={"text": "/nitf/head/pubdata"},
               headers={"X-Onyx-Token": a["token"]})
    client.delete(f"/profiles/{b['profile_id']}", headers={"X-Onyx-Token": b["token"]})
    # The profile log as the writer reads it: the changes 1 ms apart from T0 + 50.5 s on
    # (a registered, b registered, a updated, b deleted).
    archive_rows(root, _profile_rows(sender.sent, T0 + 50_500))
    archive_rows(root, _profile_rows(sender.sent, T0 + 50_500))      # a replayed batch changes nothing
    h = client.get(f"/profiles/{a['profile_id']}/history").json()
    assert [(v["from"], v["to"], v["text"]) for v in h["versions"]] == [
        (T0 + 50_500, T0 + 50_502, "/nitf/head/title"), (T0 + 50_502, None, "/nitf/head/pubdata")]
    assert client.get("/profiles/0000000000000000/history").status_code == 404
    at = client.get("/archive/profiles", params={"at": T0 + 50_501}).json()
    assert {p["profile_id"]: p["text"] for p in at["profiles"]} == {a["profile_id"]: "/nitf/head/title",
                                                                    b["profile_id"]: "/nitf//p"}
    # m50 was archived at T0 + 50 s, before both; m51 at T0 + 51 s, when only a's new text was live.
    assert client.get("/archive/messages/m50/recipients").json()["profiles"] == []
    engine = Engine()
    engine.add("p", "/nitf/head/pubdata")
    want = [a["profile_id"]] if engine.match(docs[51]) else []
    assert client.get("/archive/messages/m51/recipients").json()["profiles"] == want


def test_without_an_archive_the_operations_answer_503(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender(), allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), None)
    client = TestClient(app, raise_server_exceptions=False)
    r = client.post("/replay", json={"text": "/a", "from": 0, "to": 1})
    assert r.status_code == 503 and "archive" in r.json()["detail"]
    assert client.get("/archive/profiles", params={"at": 0}).status_code == 503


def test_source_history_follows_the_catalog_log(world):
    client, _, root, sender = world
    client.post("/sources", json={"name": "wire", "root_broker": "b3"})
    rows = [{"topic": "onyx.catalog", "partition": 0, "offset": i, "ts_ms": T0 + i, "key": k, "value": v,
             "headers": []} for i, (k, v) in enumerate((k, v) for t, (k, v, _) in sender.sent if t == "onyx.catalog")]
    archive_rows(root, rows)
    h = client.get("/sources/wire/history").json()
    assert [(v["from"], v["to"], v["record"]["root_broker"]) for v in h["versions"]] == [(T0 + 1, None, "b3")]
    assert client.get("/sources/news/history").json()["versions"][0]["record"]["source_id"] == "news"
    assert client.get("/sources/nope/history").status_code == 404


def test_an_unreadable_archive_answers_503_saying_so(world):
    """A page file without its header (another version's, or one a crash left unwritten)
    is a 503 naming the file, not a bare 500."""
    client, _, root, _ = world
    pages = root / "news" / "0" / "index.pages"
    pages.write_bytes(bytes(pages.stat().st_size))
    for r in (client.post("/replay", json={"text": "/nitf", "from": 0, "to": T0 * 2}),
              client.get("/archive/messages", params={"at": T0})):
        assert r.status_code == 503, r.text
        assert "cannot be read" in r.json()["detail"] and "index.pages" in r.json()["detail"]


@pytest.mark.parametrize("bound", [False, True, "5", 1.5])
def test_a_window_bound_that_is_not_a_whole_json_number_is_refused(world, bound):
    client = world[0]
    r = client.post("/replay", json={"text": "/nitf", "from": 0, "to": bound})
    assert r.status_code == 422, r.text
    assert "to" in r.json()["detail"]
    assert client.post("/replay", json={"text": "/nitf", "from": 0, "to": 2.0}).status_code == 200
