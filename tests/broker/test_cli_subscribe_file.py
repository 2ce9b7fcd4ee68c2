"""`onyx subscribe --file`: parsing the file and the command line, and a run against the
registration service on a real HTTP server (uvicorn; Kafka faked)."""

import json
import threading
import time

import pytest
import uvicorn

from broker import cli, clients
from broker.local.devcluster import free_port
from broker.registry.app import create_app
from broker.registry.store import Store
from routing.overlay import builtin

PROFILES = """\
# news for the SF desk
/nitf[head/pubdata/@edition.area='SF']

  //hl1
/nitf/head/parent::x
for $n in $msg/nitf return <r>{$n/body}</r>
   # an indented comment
/nitf[
/nitf/head/title
"""


class Sink:
    def __init__(self):
        self.sent, self.batches = [], 0

    def send(self, topic, packet):
        self.sent.append((topic, packet))

    def send_batch(self, items):
        self.batches += 1
        self.sent.extend(items)


def _own_metadata():
    """The service's metadata provider on a sender of its own: its documents and deliveries
    (some sent by its batch thread) stay out of the packets these tests count."""
    from broker.metadata.provider import MetadataProvider
    from tests.broker.metadata_packets import Recorder

    return MetadataProvider(Recorder(), builtin())


@pytest.fixture
def service(tmp_path):
    sink, store = Sink(), Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store, builtin(), sink, metadata=_own_metadata()), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", store, sink
    server.should_exit = True
    thread.join(10)


def test_profile_lines_skip_blanks_and_comments_and_keep_line_numbers():
    assert clients.profile_lines(PROFILES.splitlines()) == [
        (2, "/nitf[head/pubdata/@edition.area='SF']"), (4, "//hl1"), (5, "/nitf/head/parent::x"),
        (6, "for $n in $msg/nitf return <r>{$n/body}</r>"), (8, "/nitf["), (9, "/nitf/head/title")]


def test_the_command_line_takes_a_file_or_a_profile():
    args = cli.build_parser().parse_args(["subscribe", "--file", "p.txt", "--batch-size", "500", "--near", "b5",
                                          "--results", "out.jsonl", "--api", "http://x"])
    assert (args.file, args.profile, args.batch_size, args.near, args.results) == ("p.txt", None, 500, "b5",
                                                                                  "out.jsonl")
    args = cli.build_parser().parse_args(["subscribe", "/nitf"])
    assert (args.profile, args.file, args.batch_size) == ("/nitf", None, 10_000)


@pytest.mark.parametrize("argv", [["subscribe", "--api", "http://127.0.0.1:1"],
                                  ["subscribe", "/nitf", "--file", "p.txt", "--api", "http://127.0.0.1:1"],
                                  ["subscribe", "--file", "p.txt", "--count", "3", "--api", "http://127.0.0.1:1"],
                                  ["subscribe", "--file", "p.txt", "--batch-size", "20000",
                                   "--api", "http://127.0.0.1:1"]])
def test_conflicting_options_are_refused_with_a_message(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text("/nitf\n")
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("onyx: error: ")


def test_help_explains_the_file(capsys):
    with pytest.raises(SystemExit):
        cli.main(["subscribe", "--help"])
    out = capsys.readouterr().out
    assert "--file FILE" in out and "one per line" in out and "# skipped" in out and "Exit status 1" in out


def test_a_file_is_registered_in_batches_for_one_subscriber_with_errors_by_line(service, tmp_path, capsys):
    url, store, sink = service
    path = tmp_path / "profiles.txt"
    path.write_text(PROFILES)
    results = tmp_path / "registered.jsonl"
    code = cli.main(["subscribe", "--file", str(path), "--api", url, "--batch-size", "2", "--results", str(results)])
    out = capsys.readouterr().out
    assert code == 1  # two lines were refused
    assert f"registered 4 of 6 profiles from {path}" in out
    assert f"{path}:5: unsupported axis 'parent::' at column 12\n    /nitf/head/parent::x\n               ^" in out
    assert f"{path}:8: expected an expression, found end of profile at column 7" in out
    stored = store.list_profiles()
    assert sorted(p.text for p in stored) == sorted(["/nitf[head/pubdata/@edition.area='SF']", "//hl1",
                                                    "for $n in $msg/nitf return <r>{$n/body}</r>",
                                                    "/nitf/head/title"])
    assert len({p.subscriber_id for p in stored}) == 1 and store.counts()["subscribers"] == 1
    assert sink.batches == 3  # lines (2, 4), (5, 6), (8, 9): one packet batch each
    token = [line for line in out.splitlines() if "its token" in line][0].rsplit(": ", 1)[1]
    assert store.subscriber_by_token(token).id == stored[0].subscriber_id
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["line"], r["status"]) for r in rows] == [(2, 201), (4, 201), (5, 422), (6, 201), (8, 422), (9, 201)]
    assert rows[0]["token"] and store.token_matches(rows[0]["profile_id"], rows[0]["token"])
    assert rows[2]["error"]["column"] == 12


def test_a_clean_file_exits_0_and_joins_the_given_subscriber(service, tmp_path, capsys):
    url, store, _ = service
    sub = clients.api("POST", f"{url}/subscribers")
    path = tmp_path / "ok.txt"
    path.write_text("/a\n/b\n/c\n")
    assert cli.main(["subscribe", "--file", str(path), "--api", url, "--subscriber-token", sub["token"]]) == 0
    out = capsys.readouterr().out
    assert "registered 3 of 3 profiles" in out and sub["delivery_topic"] in out and "its token" not in out
    assert {p.subscriber_id for p in store.list_profiles()} == {sub["subscriber_id"]}


def test_an_unreachable_service_is_exit_2(tmp_path, capsys):
    path = tmp_path / "ok.txt"
    path.write_text("/a\n")
    assert cli.main(["subscribe", "--file", str(path), "--api", f"http://127.0.0.1:{free_port()}"]) == 2
    assert "lines 1-1 not registered" in capsys.readouterr().err
