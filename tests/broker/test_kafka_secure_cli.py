"""`onyx up --secure` and the operator token from the command line, as a user runs them: a
secure local overlay whose components log in as their own Kafka users, a publisher's user from
`onyx kafka-user add`, and the operator token made once, kept private and sent by the CLI."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request

import pytest

from broker import clients, config
from broker.local import up
from tests.broker.test_cli_overlay import onyx

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_the_operator_token_is_made_once_kept_private_and_the_environments_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "ADMIN_TOKEN_FILE", tmp_path / "admin-token")
    monkeypatch.setattr(config, "ADMIN_TOKEN", None)
    said: list[str] = []
    token = up.admin_token(said.append)
    assert token in said[0] and "shown once" in said[0]
    assert (tmp_path / "admin-token").read_text().strip() == token
    assert oct((tmp_path / "admin-token").stat().st_mode & 0o777) == "0o600"
    said.clear()
    assert up.admin_token(said.append) == token and token not in said[0] and str(tmp_path) in said[0]
    monkeypatch.setattr(config, "ADMIN_TOKEN", "from-the-environment")
    assert up.admin_token(said.append) == "from-the-environment"


def test_the_cli_proves_the_operator_token_to_its_own_overlay_only(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "ADMIN_TOKEN", None)
    monkeypatch.setattr(config, "ADMIN_TOKEN_FILE", tmp_path / "admin-token")
    monkeypatch.setattr(config, "CLUSTER_FILE", tmp_path / "cluster.json")
    assert clients.operator_token("http://127.0.0.1:9/metrics") is None     # no overlay runs here
    (tmp_path / "cluster.json").write_text(json.dumps({"api_url": "http://127.0.0.1:9"}))
    (tmp_path / "admin-token").write_text("T0k\n")
    assert clients.operator_token("http://127.0.0.1:9/metrics") == "T0k"
    assert clients.operator_token("http://127.0.0.1:90/metrics") is None    # another service
    monkeypatch.setattr(config, "ADMIN_TOKEN", "env")
    assert clients.operator_token("http://example.org/metrics") == "env"


def test_secure_refuses_a_kafka_it_did_not_start(tmp_path):
    env = {**os.environ, "ONYX_RUN_DIR": str(tmp_path)}
    proc = onyx(env, "up", "--secure", "--bootstrap-servers", "127.0.0.1:9", check=False)
    assert proc.returncode == 2 and "drop --bootstrap-servers" in proc.stderr and proc.stderr.count("\n") == 1


def _metrics(api_url: str, token: str | None) -> int:
    req = urllib.request.Request(f"{api_url}/metrics", headers={"X-Onyx-Admin-Token": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_secure_up_publisher_user_archive_and_the_operator_token(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "ONYX_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1"}
    env.pop("ONYX_ADMIN_TOKEN", None)
    started = onyx(env, "up", "--secure", "--detach", "--timeout", "400", timeout=450)
    try:
        token = (run_dir / "admin-token").read_text().strip()
        assert re.search(rf"operator token \(shown once; kept in .*admin-token, mode 0600.*\): {token}$",
                         started.stdout, re.MULTILINE), started.stdout
        info = json.loads((run_dir / "cluster.json").read_text())
        users_file = run_dir / "overlay-up" / "kafka-users.json"
        assert info["secure"] and info["kafka_users_file"] == str(users_file)
        assert oct(users_file.stat().st_mode & 0o777) == "0o600"
        secrets = [token, *json.loads(users_file.read_text()).values()]
        for kept in (run_dir / "cluster.json", run_dir / "onyx-up.log"):   # never written where others read
            assert not any(s in kept.read_text() for s in secrets), kept

        # closed by default: the operator surfaces want the token `onyx up` made
        assert _metrics(info["api_url"], None) == 401 and _metrics(info["api_url"], token) == 200

        # a publisher's user, then `onyx publish` as it
        added = onyx(env, "kafka-user", "add", "--publisher", "wire", "--source", "news").stdout
        assert "allow topic literal onyx.src.news: Write, Describe" in added
        password = re.search(r"^sasl\.password=(\S+)$", added, re.MULTILINE).group(1)
        as_wire = {**env, "ONYX_KAFKA_USERNAME": "onyx-pub-wire", "ONYX_KAFKA_PASSWORD": password}
        assert "published 5 messages to onyx.src.news" in onyx(as_wire, "publish", "--generate", "5").stdout

        # the archive writer (its own user) archives them; `onyx archive` asks as the operator
        deadline = time.monotonic() + 180
        while True:
            out = onyx(env, "archive", "messages").stdout
            if re.search(r"^5 messages in the archive", out, re.MULTILINE):
                break
            assert time.monotonic() < deadline, out
            time.sleep(2)
        status = onyx(env, "status").stdout
        assert "archive writer: running" in status and re.search(r"^b1\s+yes\s+\d+\s+5\s", status, re.MULTILINE)
    finally:
        onyx(env, "down", timeout=200)
    # Kafka logged no refusal of the overlay's own users
    log = (run_dir / "kafka-overlay-up" / "kafka.log").read_text(errors="replace")
    assert not re.search(r"User:onyx-(registry|brokers|archive|monitor) is Denied", log)
