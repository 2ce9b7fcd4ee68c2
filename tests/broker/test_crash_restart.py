"""A crash of the process running the brokers, on the real thing: `onyx up` (the brokers'
Spark driver and the registration service) is killed with SIGKILL at random moments while
2,000 quotes flow, and started again (it resumes from its checkpoint and its brokers'
state logs); in the end every subscriber has every delivery the centralized engine says
it should (``yfilter.Engine`` over all profiles, message by message): 0 lost, 0 wrong.
Duplicates are allowed (at-least-once: a batch under way when the process died is
processed again) and de-duplicable by ``onyx-message-id``. Kafka is the test's own and
stays up (``onyx up --bootstrap-servers``). Afterwards nothing the killed processes started
is left running (the archive writer stops when its parent dies). The default run makes 2
kill/restart cycles (40 messages/s); ``-m slow`` runs the 20-cycle variant."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from broker.packets import profile_ids
from broker.clients import TopicTail, api, publish
from broker.local.devcluster import KafkaDevCluster
from yfilter import Engine

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SYMBOLS = 20
MESSAGES = 2000
RATE = 40.0  # messages/s with 2 cycles: the stream lasts 50 s


def onyx(env, *args, timeout=450):
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"onyx {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def start(env, bootstrap) -> dict:
    onyx(env, "up", "--detach", "--timeout", "400", "--bootstrap-servers", bootstrap)
    with open(os.path.join(env["ONYX_RUN_DIR"], "cluster.json")) as f:
        return json.load(f)


def kill(info) -> None:
    pid = int(info["pid"])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    time.sleep(2)  # the Spark JVM follows its driver when its stdin closes


def quote(rng: random.Random) -> bytes:
    return (f"<quote><symbol>S{rng.randrange(SYMBOLS):02d}</symbol><price>{rng.uniform(0, 100):.2f}</price>"
            f"</quote>").encode()


def profiles(rng: random.Random, n: int) -> list[str]:
    return [f"/quote[symbol = 'S{rng.randrange(SYMBOLS):02d}'][price >= {rng.uniform(0, 100):.2f}]" for _ in range(n)]


def converge(info, api_url, subscriber_token, topic) -> None:
    """One probe profile per broker, registered after the others: when a marker message
    reaches every probe, every host's earlier routing deltas have reached the root too
    (a broker sends its deltas up in order)."""
    brokers = [b["broker_id"] for b in api("GET", f"{api_url}/brokers", subscriber_token=subscriber_token)]
    made = [api("POST", f"{api_url}/profiles", {"text": "/quote[@probe = 'yes']", "near": b},
                subscriber_token=subscriber_token) for b in brokers]
    probes = {p["profile_id"]: p["token"] for p in made}
    tail = TopicTail(info["bootstrap_servers"], [topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(seen) < len(probes):
        publish(info["bootstrap_servers"], "onyx.src.news", [("m", b"<quote probe='yes'/>")], progress=False)
        time.sleep(1)
        seen |= {p for r in tail for p in profile_ids(r.key, r.headers) if p in probes}
    tail.close()
    assert len(seen) == len(probes), "routing tables did not converge"
    for pid, token in probes.items():
        api("DELETE", f"{api_url}/profiles/{pid}", token=token)


def survivors(marker: str, wait: float = 90.0) -> list[str]:
    """The command lines of processes still running with ``marker`` in them or in their
    working directory (a Spark executor's is its worker's folder), once they had ``wait``
    seconds to go."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError):
                continue
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                cwd = ""
            if entry.isdigit() and int(entry) != os.getpid() and (marker in cmd or marker in cwd):
                found.append(f"{entry}: {cmd[:200]}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(1)


def crash_cycles(tmp_path, cycles: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    result: dict = {}
    kafka = KafkaDevCluster(name="crash", run_dir=tmp_path).start()
    env = {**os.environ, "ONYX_RUN_DIR": str(tmp_path / "run"), "PYTHONUNBUFFERED": "1"}
    info = start(env, kafka.bootstrap_servers)
    try:
        sub = api("POST", f"{info['api_url']}/subscribers")
        texts = profiles(rng, 200)
        body = api("POST", f"{info['api_url']}/profiles:batch", {"profiles": [{"text": t} for t in texts]},
                   subscriber_token=sub["token"])
        ids = {r["profile"]["profile_id"]: t for r, t in zip(body["results"], texts)}
        converge(info, info["api_url"], sub["token"], sub["delivery_topic"])

        docs = [(f"q{i}", quote(rng)) for i in range(MESSAGES)]
        sent: list[str] = []
        # The stream lasts about as long as the cycles (a restart takes some 20 s), so that
        # every kill comes while messages flow, 1-6 s after the brokers came back.
        rate = max(RATE * 2 / cycles, MESSAGES / (cycles * 25.0))
        publisher = threading.Thread(target=lambda: sent.extend(
            publish(kafka.bootstrap_servers, "onyx.src.news", docs, rate=rate, progress=False)), daemon=True)
        publisher.start()
        for _ in range(cycles):
            time.sleep(rng.uniform(1.0, 6.0))
            kill(info)
            info = start(env, kafka.bootstrap_servers)
        publisher.join()

        engine = Engine()
        engine.add_many(ids.items())
        expected = {(pid, mid) for mid, (_, doc) in zip(sent, docs) for pid in engine.match(doc)}
        tail = TopicTail(kafka.bootstrap_servers, [sub["delivery_topic"]], from_start=True)
        received: list[tuple[str, str]] = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not expected <= set(received):
            received += [(p, dict(r.headers)["onyx-message-id"].decode())
                         for r in tail for p in profile_ids(r.key, r.headers) if p in ids]
            time.sleep(1)
        tail.close()
        got = set(received)
        result.update({"cycles": cycles, "messages": len(sent), "expected": len(expected),
                       "received": len(received), "lost": sorted(expected - got)[:10],
                       "lost_count": len(expected - got), "wrong": sorted(got - expected)[:10],
                       "wrong_count": len(got - expected), "duplicates": len(received) - len(got)})
        return result
    finally:
        subprocess.run([sys.executable, "-m", "broker.cli", "down"], env=env, capture_output=True, timeout=200)
        kafka.stop()
        result["left_running"] = survivors(str(tmp_path / "run"))


def _check(result: dict) -> None:
    print("crash/restart:", json.dumps(result))
    assert result["messages"] == MESSAGES
    assert result["lost_count"] == 0, result
    assert result["wrong_count"] == 0, result
    assert result["left_running"] == [], result
    assert result["expected"] > 1000  # the stream really exercised the profiles


def test_sigkill_of_the_brokers_process_loses_no_delivery(tmp_path):
    _check(crash_cycles(tmp_path, cycles=2))


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 20 restarts of Spark and the service
def test_sigkill_twenty_times_loses_no_delivery(tmp_path):
    _check(crash_cycles(tmp_path, cycles=20, seed=20))
