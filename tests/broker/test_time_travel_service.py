"""The time-travel operations of the registration service over an archive written by the
archive writer's own code (no Spark here: the rows it would hand over), each answer
checked against the engine over the archived messages or against the profile log."""

import json

import pytest
from fastapi.testclient import TestClient

from archive.writer import archive_rows
from broker import config
from broker.registry.app import create_app
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from routing.overlay import builtin
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

T0 = 1_764_115_200_000
ADMIN = "operator-secret"
OPERATOR = {"X-Onyx-Admin-Token": ADMIN}
DAY = 24 * 3_600_000


class Sender:
    def __init__(self):
        self.sent = []

    def send(self, topic, packet):
        self.sent.append((topic, packet))


def source_rows(docs, partition=0, start=0, t0=T0, source="news", prefix="m"):
    return [{"topic": f"onyx.src.{source}", "partition": partition, "offset": start + i, "ts_ms": t0 + 1000 * i,
             "key": None, "value": d,
             "headers": [{"key": "onyx-message-id", "value": f"{prefix}{start + i}".encode()}]}
            for i, d in enumerate(docs)]


def _profile_rows(sent, t0):
    """What the service wrote to onyx.profiles, as the writer reads it."""
    rows = [(k, v) for topic, (k, v, _) in sent if topic == "onyx.profiles"]
    return [{"topic": "onyx.profiles", "partition": 0, "offset": i, "ts_ms": t0 + i, "key": k, "value": v,
             "headers": []} for i, (k, v) in enumerate(rows)]


class World:
    """The service over an archive of the overlay's source "news" (the operator's, not public),
    with an operator token, and a subscriber the operator granted "news" (``alice``)."""

    def __init__(self, client, docs, root, sender, store):
        self.client, self.docs, self.root, self.sender, self.store = client, docs, root, sender, store
        alice = client.post("/subscribers").json()
        self.alice_id, self.alice = alice["subscriber_id"], {"X-Onyx-Subscriber-Token": alice["token"]}
        assert client.put(f"/sources/news/grants/{self.alice_id}", headers=OPERATOR).status_code == 204

    def subscriber(self):
        """A new subscriber (granted nothing): its id and its token's header."""
        sub = self.client.post("/subscribers").json()
        return sub["subscriber_id"], {"X-Onyx-Subscriber-Token": sub["token"]}


@pytest.fixture
def world(tmp_path):
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=41)
    docs = [gen.generate() for _ in range(120)]
    root = tmp_path / "archive"
    archive_rows(root, source_rows(docs))
    sender = Sender()
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), sender, admin_token=ADMIN, allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), root)
    w = World(TestClient(app, raise_server_exceptions=False), docs, root, sender, store)
    return w


def _replay(client, body, headers):
    r = client.post("/replay", json=body, headers=headers)
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
    client, docs = world.client, world.docs
    lo, hi = T0 + 10_000, T0 + 90_000        # messages 10 .. 90
    engine = Engine()
    engine.add("p", profile)
    window = range(10, 91)
    if profile.startswith("for"):
        want = {f"m{i}": engine.run(docs[i]).get("p") for i in window}
        want = {k: v for k, v in want.items() if v}
    else:
        want = {f"m{i}" for i in window if engine.match(docs[i])}
    got, done = _replay(client, {"text": profile, "from": lo, "to": hi}, world.alice)
    assert done["matched"] == len(got) and want and done["truncated"] is None
    if profile.startswith("for"):
        assert {m["message_id"]: [r.encode() for r in m["results"]] for m in got} == want
    else:
        assert {m["message_id"] for m in got} == want
        assert all(m["xml"].encode() == docs[int(m["message_id"][1:])] for m in got)
    assert done["indexed"] == ("@edition.area = 'SF'" in profile)


def test_replay_of_a_registered_profile_and_its_errors(world):
    client, docs, alice = world.client, world.docs, world.alice
    reg = client.post("/profiles", json={"text": "/nitf/head/title"}, headers=alice).json()
    engine = Engine()
    engine.add("p", "/nitf/head/title")
    want = {f"m{i}" for i, d in enumerate(docs) if engine.match(d)}
    # The profile's subscriber, the profile's own token and an operator may replay it.
    for headers in (alice, {"X-Onyx-Token": reg["token"]}, OPERATOR):
        got, _ = _replay(client, {"profile_id": reg["profile_id"], "from": T0, "to": T0 + 10**6}, headers)
        assert {m["message_id"] for m in got} == want
    # Another subscriber's profile is no profile of the caller's: 404, as an unknown one.
    _, bob = world.subscriber()
    r = client.post("/replay", json={"profile_id": reg["profile_id"], "from": T0, "to": T0 + 10**6}, headers=bob)
    assert r.status_code == 404
    assert client.post("/replay", json={"profile_id": "0" * 16, "from": 0, "to": 1}, headers=alice).status_code == 404
    bad = client.post("/replay", json={"text": "/nitf/head/parent::x", "from": 0, "to": 1}, headers=alice)
    assert bad.status_code == 422 and bad.json()["column"] == 12
    assert client.post("/replay", json={"from": 0, "to": 1}, headers=alice).status_code == 422
    assert client.post("/replay", json={"text": "/a", "from": 5, "to": 1}, headers=alice).status_code == 200  # empty


def test_replay_needs_a_token(world):
    client = world.client
    body = {"text": "/nitf", "from": T0, "to": T0 + 10**6}
    assert client.post("/replay", json=body).status_code == 401
    assert client.post("/replay", json=body, headers={"X-Onyx-Subscriber-Token": "nope"}).status_code == 401
    assert client.get("/archive/messages", params={"at": T0}).status_code == 401
    assert client.get("/archive/messages/m7").status_code == 401
    assert client.get("/archive/profiles", params={"at": T0}).status_code == 401
    assert client.get("/sources/news/history").status_code == 401


def test_a_window_wider_than_31_days_is_422(world):
    client, alice = world.client, world.alice
    widest = config.REPLAY_MAX_WINDOW_MS
    assert widest == 31 * DAY
    r = client.post("/replay", json={"text": "/nitf", "from": T0, "to": T0 + widest + 1}, headers=alice)
    assert r.status_code == 422 and f"{widest:,}" in r.json()["detail"]
    r = client.post("/replay", json={"text": "/nitf", "from": 0, "to": T0}, headers=OPERATOR)
    assert r.status_code == 422  # an operator too: it is the answer's cost, not a right
    _, done = _replay(client, {"text": "/nitf/head/title", "from": T0 + 10**6 - widest, "to": T0 + 10**6}, alice)
    assert done["matched"] > 0


def test_backfill_is_the_profiles_own_and_at_most_31_days_back(world):
    client, alice = world.client, world.alice
    reg = client.post("/profiles", json={"text": "/nitf/head/title"}, headers=alice).json()
    path = f"/profiles/{reg['profile_id']}/backfill"
    _, bob = world.subscriber()
    assert client.post(path, json={"since": 0}).status_code == 401
    assert client.post(path, json={"since": 0}, headers=bob).status_code == 404
    assert client.post(path, json={"since": 0}, headers=OPERATOR).status_code == 403  # reads, never delivers
    r = client.post(path, json={"since": 0}, headers=alice)  # 1970: far more than 31 days ago
    assert r.status_code == 422 and "ms ago" in r.json()["detail"]
    # Within the window it gets as far as the service allows here: no Kafka (503).
    import time
    r = client.post(path, json={"since": int(time.time() * 1000) - DAY}, headers={"X-Onyx-Token": reg["token"]})
    assert r.status_code == 503 and "Kafka" in r.json()["detail"]


def test_replay_stops_at_its_limit_and_says_why(world, monkeypatch):
    client, alice = world.client, world.alice
    body = {"text": "/nitf", "from": T0, "to": T0 + 10**6}  # every message matches
    got, done = _replay(client, body, alice)
    assert len(got) == done["matched"] == len(world.docs) and done["truncated"] is None
    got, done = _replay(client, {**body, "limit": 7}, alice)
    assert [m["message_id"] for m in got] == [f"m{i}" for i in range(7)]
    assert done["matched"] == 7 and done["truncated"] == "limit"
    monkeypatch.setattr(config, "REPLAY_MAX_CANDIDATES", 20)
    got, done = _replay(client, body, alice)
    assert done["truncated"] == "candidates" and len(got) <= 20
    monkeypatch.setattr(config, "REPLAY_MAX_CANDIDATES", 10**6)
    monkeypatch.setattr(config, "REPLAY_MAX_BYTES", 1)  # the first match is past it
    got, done = _replay(client, body, alice)
    assert done["truncated"] == "bytes" and len(got) == 1


def test_messages_at_a_time_and_by_value(world):
    client, docs, alice = world.client, world.docs, world.alice
    r = client.get("/archive/messages", params={"at": T0 + 4_500}, headers=alice)
    assert [m["message_id"] for m in r.json()["messages"]] == ["m0", "m1", "m2", "m3", "m4"]
    engine = Engine()
    engine.add("p", "/nitf/head/pubdata[@edition.area = 'SF']")
    want = [f"m{i}" for i, d in enumerate(docs) if engine.match(d)]
    r = client.get("/archive/messages", params={"at": T0 + 10**6, "where": "/nitf/head/pubdata/@edition.area=SF"},
                   headers=alice)
    assert sorted(m["message_id"] for m in r.json()["messages"]) == sorted(want)
    assert client.get("/archive/messages", params={"at": 1, "where": "/a"}, headers=alice).status_code == 422
    m7 = client.get("/archive/messages/m7", headers=alice)
    assert m7.status_code == 200 and m7.content == docs[7]
    assert client.get("/archive/messages/nope", headers=alice).status_code == 404
    # A subscriber "news" was not granted to lists none of its messages and reads none.
    _, bob = world.subscriber()
    assert client.get("/archive/messages", params={"at": T0 + 4_500}, headers=bob).json()["messages"] == []
    assert client.get("/archive/messages/m7", headers=bob).status_code == 404
    assert client.get("/archive/messages/m7/recipients", headers=bob).status_code == 404


def test_profile_history_active_profiles_and_recipients(world):
    client, docs, root, sender, alice = world.client, world.docs, world.root, world.sender, world.alice
    a = client.post("/profiles", json={"text": "/nitf/head/title"}, headers=alice).json()
    b = client.post("/profiles", json={"text": "/nitf//p"}, headers=alice).json()
    client.put(f"/profiles/{a['profile_id']}", json={"text": "/nitf/head/pubdata"},
               headers={"X-Onyx-Token": a["token"]})
    client.delete(f"/profiles/{b['profile_id']}", headers={"X-Onyx-Token": b["token"]})
    # The profile log as the writer reads it: the changes 1 ms apart from T0 + 50.5 s on
    # (a registered, b registered, a updated, b deleted).
    archive_rows(root, _profile_rows(sender.sent, T0 + 50_500))
    archive_rows(root, _profile_rows(sender.sent, T0 + 50_500))      # a replayed batch changes nothing
    want = [(T0 + 50_500, T0 + 50_502, "/nitf/head/title"), (T0 + 50_502, None, "/nitf/head/pubdata")]
    for headers in (alice, {"X-Onyx-Token": a["token"]}, OPERATOR):
        h = client.get(f"/profiles/{a['profile_id']}/history", headers=headers).json()
        assert [(v["from"], v["to"], v["text"]) for v in h["versions"]] == want
    assert client.get("/profiles/0000000000000000/history", headers=alice).status_code == 404
    # Another tenant's profile's history is a 404; a deleted profile's (the archive keeps no owner) an operator's.
    _, bob = world.subscriber()
    assert client.get(f"/profiles/{a['profile_id']}/history", headers=bob).status_code == 404
    assert client.get(f"/profiles/{b['profile_id']}/history", headers=alice).status_code == 404
    assert [v["text"] for v in client.get(f"/profiles/{b['profile_id']}/history", headers=OPERATOR
                                          ).json()["versions"]] == ["/nitf//p"]
    # The profiles active at a time: an operator sees all, a subscriber its own that still exist.
    at = client.get("/archive/profiles", params={"at": T0 + 50_501}, headers=OPERATOR).json()
    assert {p["profile_id"]: p["text"] for p in at["profiles"]} == {a["profile_id"]: "/nitf/head/title",
                                                                    b["profile_id"]: "/nitf//p"}
    at = client.get("/archive/profiles", params={"at": T0 + 50_501}, headers=alice).json()
    assert {p["profile_id"]: p["text"] for p in at["profiles"]} == {a["profile_id"]: "/nitf/head/title"}
    assert client.get("/archive/profiles", params={"at": T0 + 50_501}, headers=bob).json()["profiles"] == []
    # m50 was archived at T0 + 50 s, before both; m51 at T0 + 51 s, when only a's new text was live.
    assert client.get("/archive/messages/m50/recipients", headers=alice).json()["profiles"] == []
    engine = Engine()
    engine.add("p", "/nitf/head/pubdata")
    want = [a["profile_id"]] if engine.match(docs[51]) else []
    assert client.get("/archive/messages/m51/recipients", headers=alice).json()["profiles"] == want
    assert client.get("/archive/messages/m51/recipients", headers=OPERATOR).json()["profiles"] == want
    # A subscriber granted "news" too sees the message but none of alice's profiles among its recipients.
    carol_id, carol = world.subscriber()
    client.put(f"/sources/news/grants/{carol_id}", headers=OPERATOR)
    r = client.get("/archive/messages/m51/recipients", headers=carol)
    assert r.status_code == 200 and r.json()["profiles"] == []


def test_without_an_archive_the_operations_answer_503(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender(), allowed_hosts=["testserver"])
    add_time_travel(app, store, builtin(), None)
    client = TestClient(app, raise_server_exceptions=False)
    token = {"X-Onyx-Subscriber-Token": client.post("/subscribers").json()["token"]}
    r = client.post("/replay", json={"text": "/a", "from": 0, "to": 1}, headers=token)
    assert r.status_code == 503 and "archive" in r.json()["detail"]
    assert client.get("/archive/profiles", params={"at": 0}, headers=token).status_code == 503


def test_source_history_follows_the_catalog_log(world):
    client, root, sender, alice = world.client, world.root, world.sender, world.alice
    publisher = {"X-Onyx-Publisher-Token": client.post("/sources", json={"name": "wire", "root_broker": "b3"}
                                                       ).json()["publisher_token"]}
    rows = [{"topic": "onyx.catalog", "partition": 0, "offset": i, "ts_ms": T0 + i, "key": k, "value": v,
             "headers": []} for i, (k, v) in enumerate((k, v) for t, (k, v, _) in sender.sent if t == "onyx.catalog")]
    archive_rows(root, rows)
    for headers in (publisher, OPERATOR):  # its publisher's, and the operator's
        h = client.get("/sources/wire/history", headers=headers).json()
        assert [(v["from"], v["to"], v["record"]["root_broker"]) for v in h["versions"]] == [(T0 + 1, None, "b3")]
    assert client.get("/sources/news/history", headers=alice).json()["versions"][0]["record"]["source_id"] == "news"
    assert client.get("/sources/nope/history", headers=alice).status_code == 404
    # A source the caller may not read is no source to it.
    assert client.get("/sources/wire/history", headers=alice).status_code == 404
    assert client.get("/sources/news/history", headers=publisher).status_code == 404


def test_an_unreadable_archive_answers_503_saying_so(world):
    """A page file without its header (another version's, or one a crash left unwritten)
    is a 503 naming the file, not a bare 500."""
    client, root = world.client, world.root
    pages = root / "news" / "0" / "index.pages"
    pages.write_bytes(bytes(pages.stat().st_size))
    for r in (client.post("/replay", json={"text": "/nitf", "from": T0, "to": T0 + DAY}, headers=world.alice),
              client.get("/archive/messages", params={"at": T0}, headers=world.alice)):
        assert r.status_code == 503, r.text
        assert "cannot be read" in r.json()["detail"] and "index.pages" in r.json()["detail"]


@pytest.mark.parametrize("bound", [False, True, "5", 1.5])
def test_a_window_bound_that_is_not_a_whole_json_number_is_refused(world, bound):
    client = world.client
    r = client.post("/replay", json={"text": "/nitf", "from": 0, "to": bound}, headers=world.alice)
    assert r.status_code == 422, r.text
    assert "to" in r.json()["detail"]
    assert client.post("/replay", json={"text": "/nitf", "from": 0, "to": 2.0}, headers=world.alice).status_code == 200


def _wire(world):
    """A source "wire" of a new publisher, archived (messages w0..w9, at T0 .. T0 + 9 s): the
    publisher's token header."""
    answer = world.client.post("/sources", json={"name": "wire"}).json()
    archive_rows(world.root, source_rows(world.docs[:10], source="wire", prefix="w"))
    return answer["publisher_id"], {"X-Onyx-Publisher-Token": answer["publisher_token"]}


def _ids(world, headers, **extra):
    got, _ = _replay(world.client, {"text": "/nitf", "from": T0, "to": T0 + 9_000, **extra}, headers)
    return {m["message_id"][0] for m in got}  # which sources: "m" (news), "w" (wire)


@pytest.mark.parametrize("bad", [0, -1, 10_001, 7.5, "7", True])
def test_a_replay_limit_is_a_json_integer_from_1_to_10000(world, bad):
    # As from and to: a JSON integer (7.0 is one), never a string or a boolean (the description's type).
    body = {"text": "/nitf", "from": T0, "to": T0 + 10**6, "limit": bad}
    r = world.client.post("/replay", json=body, headers=world.alice)
    assert r.status_code == 422, r.text[:200]
    assert world.client.post("/replay", json={**body, "limit": 7.0}, headers=world.alice).status_code == 200


def test_grants_and_public_decide_whose_archive_a_caller_reads(world):
    client, alice = world.client, world.alice
    _, publisher = _wire(world)
    bob_id, bob = world.subscriber()
    assert _ids(world, publisher) == {"w"}        # its own source, not the operator's
    assert _ids(world, alice) == {"m"}            # granted news, not wire
    assert _ids(world, bob) == set()              # granted nothing: the sources it may not read are left out
    assert _ids(world, OPERATOR) == {"m", "w"}    # every source
    # Naming a source it may not read is a 404; one it may read, only that one.
    body = {"text": "/nitf", "from": T0, "to": T0 + 9_000}
    assert client.post("/replay", json={**body, "source": "wire"}, headers=bob).status_code == 404
    assert client.post("/replay", json={**body, "source": "news"}, headers=publisher).status_code == 404
    assert _ids(world, OPERATOR, source="wire") == {"w"}
    # The publisher grants bob its source: bob reads it (replay, the archive's listing and messages) ...
    assert client.put(f"/sources/wire/grants/{bob_id}", headers=publisher).status_code == 204
    assert client.get("/sources/wire/grants", headers=publisher).json() == {
        "source_id": "wire", "public": False, "subscribers": [bob_id]}
    assert _ids(world, bob) == {"w"} and _ids(world, bob, source="wire") == {"w"}
    assert {m["source"] for m in client.get("/archive/messages", params={"at": T0 + 9_000}, headers=bob
                                            ).json()["messages"]} == {"wire"}
    assert client.get("/archive/messages/w3", headers=bob).content == world.docs[3]
    assert [s["source_id"] for s in client.get("/sources", headers=bob).json()] == ["wire"]
    # ... until it takes the grant back.
    assert client.delete(f"/sources/wire/grants/{bob_id}", headers=publisher).status_code == 204
    assert _ids(world, bob) == set() and client.get("/archive/messages/w3", headers=bob).status_code == 404
    # A public source is every subscriber's to read.
    r = client.patch("/sources/wire", json={"public": True}, headers=publisher)
    assert r.status_code == 200 and r.json()["public"] is True
    assert _ids(world, bob) == {"w"} and _ids(world, alice) == {"m", "w"}
    assert client.patch("/sources/wire", json={"public": False}, headers=publisher).json()["public"] is False
    assert _ids(world, bob) == set()


def test_only_a_sources_publisher_or_the_operator_manages_its_grants(world):
    client = world.client
    _, publisher = _wire(world)
    other = {"X-Onyx-Publisher-Token": client.post("/sources", json={"name": "other"}).json()["publisher_token"]}
    bob_id, bob = world.subscriber()
    for method, path in (("PUT", f"/sources/wire/grants/{bob_id}"), ("DELETE", f"/sources/wire/grants/{bob_id}"),
                         ("GET", "/sources/wire/grants"), ("PATCH", "/sources/wire")):
        json_body = {"public": True} if method == "PATCH" else None
        # Another publisher sees no such source of its own (404); a subscriber's token is of another kind (403).
        assert client.request(method, path, json=json_body, headers=other).status_code == 404, (method, path)
        assert client.request(method, path, json=json_body, headers=bob).status_code == 403, (method, path)
        assert client.request(method, path, json=json_body).status_code == 401, (method, path)
    # The overlay's own "news" is the operator's: no publisher grants it.
    assert client.put(f"/sources/news/grants/{bob_id}", headers=publisher).status_code == 404
    assert client.get("/sources/nope/grants", headers=OPERATOR).status_code == 404
    assert client.put("/sources/wire/grants/nobody", headers=publisher).status_code == 404  # no such subscriber
    assert client.put(f"/sources/wire/grants/{bob_id}", headers=OPERATOR).status_code == 204
    assert client.get("/sources/wire/grants", headers=publisher).json()["subscribers"] == [bob_id]
    assert _ids(world, bob) == {"w"}
    assert world.store.source_access("wire").public is False


def test_an_operator_registers_publishers_whose_sources_are_theirs(world):
    client = world.client
    assert client.post("/publishers").status_code == 401
    assert client.post("/publishers", headers=world.alice).status_code == 403
    r = client.post("/publishers", headers=OPERATOR)
    assert r.status_code == 201 and set(r.json()) == {"publisher_id", "token"}
    publisher = {"X-Onyx-Publisher-Token": r.json()["token"]}
    made = client.post("/sources", json={"name": "wire"}, headers=publisher).json()
    assert made["publisher_id"] == r.json()["publisher_id"] and "publisher_token" not in made
    archive_rows(world.root, source_rows(world.docs[:10], source="wire", prefix="w"))
    assert _ids(world, publisher) == {"w"}
    assert [s["source_id"] for s in client.get("/sources", headers=publisher).json()] == ["wire"]
    # The overlay's sources are the operator's, not public.
    news = {s["source_id"]: s for s in client.get("/sources", headers=OPERATOR).json()}["news"]
    assert news["publisher_id"] is None and news["public"] is False
    # Without an operator token configured, no one registers publishers.
    bare = create_app(Store("sqlite://"), builtin(), Sender(), allowed_hosts=["testserver"])
    assert TestClient(bare).post("/publishers", headers=OPERATOR).status_code == 401


def test_a_replay_read_slowly_does_not_hold_the_archive_s_lock(tmp_path):
    """The archive is read apart from the answer (broker.registry.detached): while a client
    reads nothing of a replay bigger than what the sockets buffer, the archive writer can take
    its exclusive lock (on a real uvicorn server: only a real socket pushes back)."""
    import fcntl
    import socket
    import threading
    import time

    import uvicorn

    docs = [b"<nitf><head><title>t</title></head><body>" + b"<p>%d %s</p>" % (i, b"x" * 60_000) + b"</body></nitf>"
            for i in range(100)]  # 6 MB of matches
    root = tmp_path / "archive"
    archive_rows(root, source_rows(docs))
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender(), admin_token=ADMIN)
    add_time_travel(app, store, builtin(), root)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)  # inherited by its connections: pushes back soon
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive()
            time.sleep(0.05)
        body = json.dumps({"text": "/nitf", "from": T0, "to": T0 + 10**6, "limit": 1000}).encode()
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client reading nothing, soon full
        client.connect(("127.0.0.1", port))
        client.sendall(b"POST /replay HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"X-Onyx-Admin-Token: " + ADMIN.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while b'{"progress"' not in got:  # the answer has begun: the archive is being read
            got += client.recv(4096)
        deadline, taken = time.monotonic() + 30, False
        with open(root / "news" / "0" / ".lock", "a") as handle:
            while not taken and time.monotonic() < deadline:  # a liveness bound, not a timing
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    taken = True
                    fcntl.flock(handle, fcntl.LOCK_UN)
                except BlockingIOError:
                    time.sleep(0.1)
        assert taken, "the replay held the archive's lock while its client was not reading"
        client.settimeout(30)
        while b'\r\n{"done"' not in got[-400:]:
            more = client.recv(1 << 20)
            assert more, "the answer ended early"
            got += more
        assert got.count(b'{"match"') == 100
        client.close()
    finally:
        server.should_exit = True
        thread.join(10)
