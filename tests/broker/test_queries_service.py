"""The query service (``POST /queries``, ``GET /cache``, ``onyx query``, ``onyx cache``) on
a real HTTP server (uvicorn on a free loopback port) over an archive written by the
archive writer's own code: every answer equals the engine over the archived messages of
the window, asked again it comes from the cache, and the cached part comes first."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
import uvicorn

from archive.writer import archive_rows
from broker import cli, config
from broker.clients import ApiError, api
from broker.local.devcluster import free_port
from broker.query_client import query
from broker.registry.app import create_app
from broker.registry.queries import add_queries
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from routing.overlay import builtin
from tests.broker.test_time_travel_service import ADMIN, DAY, OPERATOR, T0, Sender, source_rows
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

SF = "/nitf/head/pubdata[@edition.area = 'SF']"


def _app(tmp_path, archive_dir):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender(), admin_token=ADMIN, allowed_hosts=["testserver", "127.0.0.1"])
    add_time_travel(app, store, builtin(), archive_dir)
    add_queries(app, store, builtin(), archive_dir)
    return app


@pytest.fixture
def serve():
    """Serve an app on uvicorn in a thread; its URL."""
    servers = []

    def start(app) -> str:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the service did not start"
            time.sleep(0.05)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


def _request(method, url, body=None, headers=None):
    """One request; its status and JSON answer (an error's too)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json", **(headers or {})}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _subscriber(url):
    """A new subscriber: its id and its token."""
    status, sub = _request("POST", f"{url}/subscribers")
    assert status == 201
    return sub["subscriber_id"], sub["token"]


@pytest.fixture
def world(tmp_path, serve):
    """The service over an archive of the overlay's source "news" (the operator's, not
    public), and a subscriber the operator granted it: the URL, the documents, the
    subscriber's token."""
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=41)
    docs = [gen.generate() for _ in range(120)]
    archive_rows(tmp_path / "archive", source_rows(docs))
    url = serve(_app(tmp_path, tmp_path / "archive"))
    alice, token = _subscriber(url)
    assert _request("PUT", f"{url}/sources/news/grants/{alice}", headers=OPERATOR)[0] == 204
    return url, docs, token


def _lines(url, body, token):
    req = urllib.request.Request(f"{url}/queries", json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "X-Onyx-Subscriber-Token": token})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(x) for x in r.read().splitlines()]
    assert "done" in lines[-1] and all(len(x) == 1 for x in lines)
    return [x["item"] for x in lines if "item" in x], lines[-1]["done"]


def _engine(profile, docs, window):
    engine = Engine()
    engine.add("p", profile)
    return {f"m{i}" for i in window if engine.match(docs[i])}


def test_a_query_equals_the_engine_and_asked_again_comes_from_the_cache(world):
    url, docs, token = world
    body = {"source": "news", "query": SF, "from": T0 + 10_000, "to": T0 + 90_000}     # messages 10 .. 90
    want = _engine(SF, docs, range(10, 91))
    items, done = _lines(url, body, token)
    assert {i["message_id"] for i in items} == want and len(items) == len(want) > 0
    assert all(i["xml"].encode() == docs[int(i["message_id"][1:])] for i in items)
    assert (done["items"], done["from_cache"], done["from_source"]) == (len(want), 0, len(want))
    # The remainder is made of the cache's regions (other users' predicates): an operator's to see.
    assert done["remainder"] is None and done["window"] == {"from": T0 + 10_000, "to": T0 + 90_000}
    assert done["truncated"] is False

    items, done = _lines(url, body, token)
    assert {i["message_id"] for i in items} == want and all(i["cached"] for i in items)
    assert (done["from_cache"], done["from_source"], done["remainder"]) == (len(want), 0, None)
    assert done["match_types"] == ["exact"]

    # Widened (in time and condition): the cached part first, then the remainder's.
    wide = "/nitf/head/pubdata[@edition.area = 'SF' or @edition.area = 'NY']"
    items, done = _lines(url, {**body, "query": wide, "to": T0 + 110_000}, token)
    assert {i["message_id"] for i in items} == _engine(wide, docs, range(10, 111))
    flags = [i["cached"] for i in items]
    assert flags == sorted(flags, reverse=True) and done["from_cache"] == len(want) == flags.count(True)
    assert done["from_source"] == flags.count(False) > 0


def test_the_default_window_is_the_last_hour_up_to_the_settled_time(world):
    url, docs, token = world
    settled = T0 + 119_000 - 1                       # one partition, its last message at T0 + 119 s
    items, done = _lines(url, {"source": "news", "query": "/nitf/head/title"}, token)
    assert done["window"] == {"from": settled - 3_600_000, "to": settled} and done["settled"] == settled
    assert {i["message_id"] for i in items} == _engine("/nitf/head/title", docs, range(119))
    _, done = _lines(url, {"source": "news", "query": "/nitf/head/title", "from": T0, "to": T0 + 10**9}, token)
    assert done["window"]["to"] == settled and done["cut"]
    _, done = _lines(url, {"source": "news", "query": "/nitf/head/title", "from": T0 + 5, "to": T0 + 1}, token)
    assert done["items"] == 0                        # an empty window


def _refused(url, body, token) -> int:
    """The status ``POST /queries`` refuses ``body`` with."""
    with pytest.raises(ApiError) as refused:
        api("POST", f"{url}/queries", body, subscriber_token=token)
    return int(str(refused.value).split("HTTP ")[1][:3])


def test_refusals(world, tmp_path, serve):
    url, _, token = world
    req = urllib.request.Request(f"{url}/queries", json.dumps({"source": "news", "query": "/nitf[position() = 2]"})
                                 .encode(), {"Content-Type": "application/json", "X-Onyx-Subscriber-Token": token})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    error = json.loads(refused.value.read())
    assert refused.value.code == 400 and error["column"] == 7 and "position()" in error["detail"]
    assert _refused(url, {"source": "nope", "query": SF}, token) == 404
    assert _refused(url, {"source": "news"}, token) == 422
    assert _refused(url, {"source": "news", "query": "/nitf[@a", "from": -1}, token) == 422
    assert _refused(url, {"source": "news", "query": SF, "to": False}, token) == 422  # a JSON integer, not a boolean
    for bad in (0, 10_001):
        assert _refused(url, {"source": "news", "query": SF, "limit": bad}, token) == 422
    (tmp_path / "other").mkdir()
    no_archive = serve(_app(tmp_path / "other", None))
    _, elsewhere = _subscriber(no_archive)
    assert _refused(no_archive, {"source": "news", "query": SF}, elsewhere) == 503
    assert _request("GET", f"{no_archive}/cache", headers=OPERATOR) == (200, {
        "capacity_bytes": _request("GET", f"{url}/cache", headers=OPERATOR)[1]["capacity_bytes"], "sources": []})


@pytest.mark.parametrize("bad", ["7", True])
def test_a_query_limit_is_a_json_integer(world, bad):
    url, _, token = world
    assert _refused(url, {"source": "news", "query": SF, "limit": bad}, token) == 422


def test_a_query_needs_a_token_and_a_source_the_caller_may_read(world):
    url, docs, token = world
    body = {"source": "news", "query": SF, "from": T0, "to": T0 + 50_000}
    assert _request("POST", f"{url}/queries", body)[0] == 401
    assert _request("POST", f"{url}/queries", body, {"X-Onyx-Subscriber-Token": "nope"})[0] == 401
    # A subscriber "news" was not granted to: no such source for it (404), as for a publisher of another source.
    bob_id, bob = _subscriber(url)
    status, error = _request("POST", f"{url}/queries", body, {"X-Onyx-Subscriber-Token": bob})
    assert status == 404 and "news" in error["detail"]
    status, wire = _request("POST", f"{url}/sources", {"name": "wire"})
    publisher = {"X-Onyx-Publisher-Token": wire["publisher_token"]}
    assert _request("POST", f"{url}/queries", body, publisher)[0] == 404
    # Granted (or public), it may; the operator always may.
    assert _request("PUT", f"{url}/sources/news/grants/{bob_id}", headers=OPERATOR)[0] == 204
    want = _engine(SF, docs, range(51))
    assert {i["message_id"] for i in _lines(url, body, bob)[0]} == want
    assert _request("DELETE", f"{url}/sources/news/grants/{bob_id}", headers=OPERATOR)[0] == 204
    assert _request("POST", f"{url}/queries", body, {"X-Onyx-Subscriber-Token": bob})[0] == 404
    assert _request("PATCH", f"{url}/sources/news", {"public": True}, OPERATOR)[0] == 200
    assert {i["message_id"] for i in _lines(url, body, bob)[0]} == want


def test_a_query_summary_tells_no_one_another_subscribers_predicates(world):
    """The cache's regions hold every user's query predicates (GET /cache is the operator's):
    another subscriber reading the same source gets the messages, not what others asked."""
    url, _, alice = world
    secret = "/nitf/head/pubdata[@edition.area = 'SF' and @position.section = 'alice-secret-desk']"
    _lines(url, {"source": "news", "query": secret, "from": T0, "to": T0 + 50_000}, alice)
    bob_id, bob = _subscriber(url)
    assert _request("PUT", f"{url}/sources/news/grants/{bob_id}", headers=OPERATOR)[0] == 204
    _, done = _lines(url, {"source": "news", "query": "/nitf/head/pubdata[@edition.area = 'SF']",
                           "from": T0, "to": T0 + 50_000}, bob)
    assert "alice-secret-desk" not in json.dumps(done), done


def test_a_window_wider_than_31_days_is_422(world):
    url, _, token = world
    status, error = _request("POST", f"{url}/queries", {"source": "news", "query": SF, "from": T0 - 31 * DAY - 1,
                                                        "to": T0}, {"X-Onyx-Subscriber-Token": token})
    assert status == 422 and "ask for it in pieces" in error["detail"]
    # The window is the one answered: a late to is cut at the settled time first.
    settled = T0 + 119_000 - 1
    _, done = _lines(url, {"source": "news", "query": SF, "from": settled - 31 * DAY, "to": T0 + 10**12}, token)
    assert done["window"] == {"from": settled - 31 * DAY, "to": settled} and done["cut"]


def test_a_query_stops_at_its_limit_and_says_so(world):
    url, docs, token = world
    body = {"source": "news", "query": "/nitf/head/title", "from": T0, "to": T0 + 100_000}
    want = _engine("/nitf/head/title", docs, range(101))
    assert len(want) > 3
    items, done = _lines(url, {**body, "limit": 3}, token)
    assert len(items) == 3 and {i["message_id"] for i in items} <= want
    assert done["truncated"] is True and done["items"] == len(want)
    items, done = _lines(url, {**body, "limit": 3}, token)  # from the cache, cut the same way
    assert len(items) == 3 and all(i["cached"] for i in items) and done["truncated"] is True
    items, done = _lines(url, body, token)
    assert {i["message_id"] for i in items} == want and done["truncated"] is False


def test_the_cache_s_statistics_and_regions(world):
    url, docs, token = world
    _lines(url, {"source": "news", "query": SF, "from": T0, "to": T0 + 50_000}, token)
    _lines(url, {"source": "news", "query": SF, "from": T0, "to": T0 + 50_000}, token)
    # The regions hold every user's predicates: the operator's to see.
    assert _request("GET", f"{url}/cache")[0] == 401
    assert _request("GET", f"{url}/cache", headers={"X-Onyx-Subscriber-Token": token})[0] == 403
    assert _request("GET", f"{url}/cache", headers={"X-Onyx-Admin-Token": "wrong"})[0] == 401
    status, view = _request("GET", f"{url}/cache", headers={"Authorization": f"Bearer {ADMIN}"})
    assert status == 200
    (news,) = view["sources"]
    assert news["source"] == "news" and news["stats"]["queries"] == 2 and news["stats"]["regions"] >= 1
    assert news["stats"]["items_from_cache"] == news["stats"]["items_from_source"] == len(
        _engine(SF, docs, range(51)))
    (region,) = news["regions"]
    assert region["concept"] == "/nitf/head/pubdata" and region["window"] == [T0, T0 + 50_000]
    assert region["items"] == news["stats"]["items_from_source"] and region["bytes"] == news["stats"]["bytes"]


def test_the_command_line(world, capsys, monkeypatch):
    url, docs, _ = world
    monkeypatch.setattr(config, "ADMIN_TOKEN", ADMIN)  # the CLI reads the archive as the operator
    want = _engine(SF, docs, range(10, 91))
    argv = ["query", "news", SF, "--from", str(T0 + 10_000), "--to", str(T0 + 90_000), "--api", url]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in out[:-1]} == want
    assert out[-1].startswith(f"{len(want)} items: 0 from the cache, {len(want)} from the source; remainder: ")
    assert cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(line.split()[1] == "cache" for line in out[:-1])
    assert out[-1].startswith(f"{len(want)} items: {len(want)} from the cache, 0 from the source; remainder: none")
    assert cli.main(["cache", "--api", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("query cache: 1 regions of 1 source") and "/nitf/head/pubdata[" in out
    assert cli.main(["query", "news", "/nitf[contains(., 'x')", "--api", url]) == 2
    assert "HTTP 400" in capsys.readouterr().err
    done = query(url, "news", SF, lambda _: None, start=T0 + 10_000, end=T0 + 90_000, as_json=True)
    assert done["from_source"] == 0
