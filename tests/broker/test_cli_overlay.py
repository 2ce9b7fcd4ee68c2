"""The `onyx` command line on a real local overlay: up --detach, subscribe, publish,
status, down — each a separate process, as a user runs them."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("onyx-run")
    return {**os.environ, "ONYX_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1"}


def onyx(env, *args, timeout=300, check=True):
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"onyx {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def overlay(env):
    onyx(env, "up", "--detach", "--timeout", "400", timeout=450)
    with open(os.path.join(env["ONYX_RUN_DIR"], "cluster.json")) as f:
        info = json.load(f)
    yield info
    onyx(env, "down", timeout=200)


def test_commands_without_a_running_overlay_say_how_to_start_one(tmp_path):
    env = {**os.environ, "ONYX_RUN_DIR": str(tmp_path)}
    proc = onyx(env, "status", check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "onyx up --detach" in proc.stderr
    assert "nothing to publish" in onyx(env, "publish", check=False).stderr


def test_up_subscribe_publish_status_down(env, overlay, tmp_path):
    assert {"bootstrap_servers", "api_url", "source_topic", "pid"} <= set(overlay)
    assert overlay["source_topic"] == "onyx.src.news"

    sub = subprocess.Popen([sys.executable, "-m", "broker.cli", "subscribe", "/nitf[head/title = 'cli test']",
                            "--near", "b6", "--count", "1", "--timeout", "240"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = sub.stdout.readline()
    assert first.startswith("registered profile") and "on broker b6" in first, first + sub.stderr.read()
    doc = tmp_path / "story.xml"
    doc.write_text("<nitf><head><title>cli test</title></head><body/></nitf>")
    # A new profile matches from the next messages on, once its routing query has
    # reached the root: publish until the subscriber has its delivery.
    deadline = time.monotonic() + 240
    while sub.poll() is None and time.monotonic() < deadline:
        out = onyx(env, "publish", str(doc), "--generate", "2", timeout=120).stdout
        assert "published 3 messages to onyx.src.news" in out
        time.sleep(3)
    rest, err = sub.communicate(timeout=120)
    assert sub.returncode == 0, err
    assert "cli test" in rest and "1 deliveries" in rest and "deleted profile" in rest

    status = onyx(env, "status").stdout.splitlines()
    # The brokers' table, then lines of their own (the archive writer, the query cache).
    rows = {line.split()[0]: line.split() for line in status[2:] if re.match(r"b\d+ ", line)}
    assert sorted(rows) == ["b1", "b2", "b3", "b4", "b5", "b6"]
    assert any(line.startswith("archive writer: running") for line in status)
    assert status[-1].startswith("query cache: 0 regions")
    assert all(r[1] == "yes" for r in rows.values())
    assert int(rows["b1"][3]) >= 3  # messages in at the root

    proc = onyx(env, "up", "--detach", check=False)
    assert proc.returncode == 2 and "already running" in proc.stderr


def test_down_stops_everything(env, overlay):
    pid = overlay["pid"]
    onyx(env, "down", timeout=200)
    assert not os.path.exists(os.path.join(env["ONYX_RUN_DIR"], "cluster.json"))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "no local overlay is running" in onyx(env, "down").stdout
