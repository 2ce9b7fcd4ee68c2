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
from broker import cli
from broker.clients import ApiError, api
from broker.local.devcluster import free_port
from broker.query_client import query
from broker.registry.app import create_app
from broker.registry.queries import add_queries
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from routing.overlay import builtin
from tests.broker.test_time_travel_service import T0, Sender, source_rows
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

SF = "/nitf/head/pubdata[@edition.area = 'SF']"


def _app(tmp_path, archive_dir):
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    app = create_app(store, builtin(), Sender())
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


@pytest.fixture
def world(tmp_path, serve):
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=2, seed=41)
    docs = [gen.generate() for _ in range(120)]
    archive_rows(tmp_path / "archive", source_rows(docs))
    return serve(_app(tmp_path, tmp_path / "archive")), docs


def _lines(url, body):
    req = urllib.request.Request(f"{url}/queries", json.dumps(body).encode(), {"Content-Type": "application/json"})
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
    url, docs = world
    body = {"source": "news", "query": SF, "from": T0 + 10_000, "to": T0 + 90_000}     # messages 10 .. 90
    want = _engine(SF, docs, range(10, 91))
    items, done = _lines(url, body)
    assert {i["message_id"] for i in items} == want and len(items) == len(want) > 0
    assert all(i["xml"].encode() == docs[int(i["message_id"][1:])] for i in items)
    assert (done["items"], done["from_cache"], done["from_source"]) == (len(want), 0, len(want))
    assert done["remainder"] and done["window"] == {"from": T0 + 10_000, "to": T0 + 90_000}

    items, done = _lines(url, body)
    assert {i["message_id"] for i in items} == want and all(i["cached"] for i in items)
    assert (done["from_cache"], done["from_source"], done["remainder"]) == (len(want), 0, None)
    assert done["match_types"] == ["exact"]

    # Widened (in time and condition): the cached part first, then the remainder's.
    wide = "/nitf/head/pubdata[@edition.area = 'SF' or @edition.area = 'NY']"
    items, done = _lines(url, {**body, "query": wide, "to": T0 + 110_000})
    assert {i["message_id"] for i in items} == _engine(wide, docs, range(10, 111))
    flags = [i["cached"] for i in items]
    assert flags == sorted(flags, reverse=True) and done["from_cache"] == len(want) == flags.count(True)
    assert done["from_source"] == flags.count(False) > 0


def test_the_default_window_is_the_last_hour_up_to_the_settled_time(world):
    url, docs = world
    settled = T0 + 119_000 - 1                       # one partition, its last message at T0 + 119 s
    items, done = _lines(url, {"source": "news", "query": "/nitf/head/title"})
    assert done["window"] == {"from": settled - 3_600_000, "to": settled} and done["settled"] == settled
    assert {i["message_id"] for i in items} == _engine("/nitf/head/title", docs, range(119))
    _, done = _lines(url, {"source": "news", "query": "/nitf/head/title", "from": T0, "to": T0 + 10**9})
    assert done["window"]["to"] == settled and done["cut"]
    _, done = _lines(url, {"source": "news", "query": "/nitf/head/title", "from": T0 + 5, "to": T0 + 1})
    assert done["items"] == 0                        # an empty window


def _refused(url, body) -> int:
    """The status ``POST /queries`` refuses ``body`` with."""
    with pytest.raises(ApiError) as refused:
        api("POST", f"{url}/queries", body)
    return int(str(refused.value).split("HTTP ")[1][:3])


def test_refusals(world, tmp_path, serve):
    url, _ = world
    req = urllib.request.Request(f"{url}/queries", json.dumps({"source": "news", "query": "/nitf[position() = 2]"})
                                 .encode(), {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    error = json.loads(refused.value.read())
    assert refused.value.code == 400 and error["column"] == 7 and "position()" in error["detail"]
    assert _refused(url, {"source": "nope", "query": SF}) == 404
    assert _refused(url, {"source": "news"}) == 422
    assert _refused(url, {"source": "news", "query": "/nitf[@a", "from": -1}) == 422
    assert _refused(url, {"source": "news", "query": SF, "to": False}) == 422          # a JSON integer, not a boolean
    (tmp_path / "other").mkdir()
    no_archive = serve(_app(tmp_path / "other", None))
    assert _refused(no_archive, {"source": "news", "query": SF}) == 503
    assert api("GET", f"{no_archive}/cache")["sources"] == []


def test_the_cache_s_statistics_and_regions(world):
    url, docs = world
    _lines(url, {"source": "news", "query": SF, "from": T0, "to": T0 + 50_000})
    _lines(url, {"source": "news", "query": SF, "from": T0, "to": T0 + 50_000})
    view = api("GET", f"{url}/cache")
    (news,) = view["sources"]
    assert news["source"] == "news" and news["stats"]["queries"] == 2 and news["stats"]["regions"] >= 1
    assert news["stats"]["items_from_cache"] == news["stats"]["items_from_source"] == len(
        _engine(SF, docs, range(51)))
    (region,) = news["regions"]
    assert region["concept"] == "/nitf/head/pubdata" and region["window"] == [T0, T0 + 50_000]
    assert region["items"] == news["stats"]["items_from_source"] and region["bytes"] == news["stats"]["bytes"]


def test_the_command_line(world, capsys):
    url, docs = world
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
