"""`onyx down` and `onyx up` again keep the overlay: sources, profiles, Kafka's records and
the brokers' state survive, deliveries keep flowing; `onyx up --fresh` and `onyx reset`
start from nothing. Each command a separate process, as a user runs them."""

import json
import os
import subprocess
import sys
import time

import pytest

from broker.packets import delivers_to
from broker.clients import ApiError, TopicTail, api, publish

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DOC = b"<quote><symbol>RSM</symbol><price>7</price></quote>"


def onyx(env, *args, timeout=450, check=True):
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, f"onyx {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def up(env) -> dict:
    onyx(env, "up", "--detach", "--timeout", "400")
    with open(os.path.join(env["ONYX_RUN_DIR"], "cluster.json")) as f:
        return json.load(f)


def delivered(info, topic, source_topic, profile_id, attempts=40) -> list:
    """Publish DOC to the source until the profile's delivery topic has it (a new
    profile matches once its routing query has reached the root); the records read."""
    tail = TopicTail(info["bootstrap_servers"], [topic])
    try:
        for _ in range(attempts):
            publish(info["bootstrap_servers"], source_topic, [("q", DOC)], progress=False)
            got = [r for r in tail if delivers_to(profile_id, r.key, r.headers)]
            if got:
                return got
            time.sleep(2)
    finally:
        tail.close()
    raise AssertionError(f"no delivery to {profile_id} on {topic}")


def test_down_and_up_keep_sources_profiles_and_deliveries_then_reset_wipes_them(tmp_path):
    env = {**os.environ, "ONYX_RUN_DIR": str(tmp_path / "run"), "PYTHONUNBUFFERED": "1"}
    info = up(env)
    try:
        source = api("POST", f"{info['api_url']}/sources", {"name": "wire", "root_broker": "b3"})
        body = api("POST", f"{info['api_url']}/profiles", {"text": "/quote[symbol = 'RSM']", "near": "b5"})
        pid, topic = body["profile_id"], body["delivery_topic"]
        before = delivered(info, topic, source["topic"], pid)
    finally:
        onyx(env, "down")

    info = up(env)  # resumes
    operator = {"X-Onyx-Admin-Token": (tmp_path / "run" / "admin-token").read_text().strip()}  # onyx up's, kept
    try:
        assert api("GET", f"{info['api_url']}/profiles/{pid}", token=body["token"])["host_broker"] == "b5"
        brokers = {b["broker_id"]: b for b in api("GET", f"{info['api_url']}/brokers", headers=operator)}
        assert "wire" in brokers["b3"]["sources"] and brokers["b5"]["profiles"] == 1
        # Kafka kept its records: the deliveries made before the restart are still there.
        old = TopicTail(info["bootstrap_servers"], [topic], from_start=True)
        assert {r.value for r in old if delivers_to(pid, r.key, r.headers)} >= {r.value for r in before}
        old.close()
        after = delivered(info, topic, source["topic"], pid, attempts=10)  # the brokers remember the route
        assert after and all(r.value == DOC for r in after)
        proc = onyx(env, "reset", "--yes", check=False)
        assert proc.returncode == 2 and "onyx down" in proc.stderr  # not while it runs
    finally:
        onyx(env, "down")

    proc = onyx(env, "reset", check=False)  # no terminal to ask on
    assert proc.returncode == 2 and "--yes" in proc.stderr and "overlay-up" in proc.stderr
    assert "deleted 2 folder(s)" in onyx(env, "reset", "--yes").stdout
    info = up(env)
    try:
        with pytest.raises(ApiError, match="404|no profile"):  # the operator token survives a reset
            api("GET", f"{info['api_url']}/profiles/{pid}", headers=operator)
    finally:
        onyx(env, "down")
    assert "nothing to reset" not in onyx(env, "reset", "--yes").stdout
