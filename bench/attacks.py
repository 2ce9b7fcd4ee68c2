"""The security issue's attacks, replayed against a real ``onyx up`` (started here, in a run
folder of its own): each row of the issue's table as the attacker sent it, what the service
answers now, how long it took, and what ``/health`` took meanwhile (the limit: 100 ms).

    python -m bench.attacks            # about 3 minutes: starts `onyx up --detach`, attacks, stops it

Prints a table and writes ``bench/results/attacks.json`` and a PNG of the answer times. The
slow-client, hanging-webhook, slowloris and SSE rows have tests of their own on a real server
(``tests/broker/test_time_travel_service.py``, ``test_webhooks.py``, ``test_http_limits.py``)
and ``bench.http_limits`` measures ``/health`` during the floods.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.output import save

RESULTS = Path(__file__).resolve().parent / "results"
ADMIN = "bench-attacks-operator"


def quadratic_dtd(size: int) -> str:
    """The issue's schema: an ATTLIST that never closes (the old parser's quadratic case)."""
    return "<!ELEMENT a (#PCDATA)>\n<!ATTLIST " + "a" * size


class HealthWatch:
    """Polls ``/health`` every 20 ms from a thread; the worst latency and any failure."""

    def __init__(self, api: str) -> None:
        self.api, self.latencies, self.failures = api, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.api, timeout=5) as client:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    ok = client.get("/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies.append((time.perf_counter() - t0) * 1000)
                self.failures += not ok
                self._stop.wait(0.02)

    def _polls(self, n: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.latencies) < n and time.monotonic() < deadline:
            time.sleep(0.005)

    def __enter__(self) -> "HealthWatch":
        self._thread.start()
        self._polls(1)
        self.latencies.clear()  # from here: the polls that overlap the attack
        return self

    def __exit__(self, *exc) -> None:
        self._polls(1)  # at least one poll while (or right as) the attack was answered
        self._stop.set()
        self._thread.join(10)


def rows(api: str) -> list[dict]:
    """Each attack of the issue's table: (row, request, then-answer) -> what it gets now."""
    out = []
    op = {"X-Onyx-Admin-Token": ADMIN}
    with httpx.Client(base_url=api, timeout=120) as c:
        sub = c.post("/subscribers").json()
        mine = {"X-Onyx-Subscriber-Token": sub["token"]}
        reg = c.post("/profiles", json={"text": "/nitf"}, headers=mine).json()
        listed = c.get(f"/archive/messages?at={int(time.time() * 1000) + 60_000}", headers=op).json()
        message = listed["messages"][0]["message_id"] if listed.get("messages") else "m0"
        never = 2**53 - 1

        def attack(row: str, before: str, method: str, path: str, headers=None, body=None, note=""):
            with HealthWatch(api) as watch:
                t0 = time.perf_counter()
                answer = c.request(method, path, headers=headers or {}, json=body)
                took = (time.perf_counter() - t0) * 1000
            out.append({"row": row, "before": before, "status": answer.status_code,
                         "detail": (answer.json().get("detail", "") if answer.headers.get("content-type", "")
                                    .startswith("application/json") and isinstance(answer.json(), dict)
                                    else answer.text[:80])[:160],
                         "ms": round(took, 1), "health_max_ms": round(max(watch.latencies, default=0), 1),
                         "health_failures": watch.failures, "note": note})

        attack("replay /* 0..2^53, no token", "every archived message", "POST", "/replay",
               body={"text": "/*", "from": 0, "to": never})
        attack("replay /* 0..2^53, a subscriber", "every archived message", "POST", "/replay", mine,
               {"text": "/*", "from": 0, "to": never})
        for path in ("/archive/messages?at=0", f"/archive/messages/{message}", f"/archive/messages/{message}/recipients",
                     "/archive/profiles?at=0", f"/profiles/{reg['profile_id']}/history",
                     f"/profiles/{reg['profile_id']}", "/cache"):
            attack(f"GET {path.split('?')[0]}, no token", "answered", "GET", path)
        attack("POST /queries, no token", "answered", "POST", "/queries",
               body={"source": "news", "query": "/nitf/head"})
        for path in ("/console/profiles", "/console/dead-letters", "/metrics"):
            attack(f"GET {path}, no token (onyx up)", "open (no operator token configured)", "GET", path)
        attack("POST /sources, 6 KB quadratic DTD, no token", "4 s of CPU, /health stalls", "POST", "/sources",
               body={"name": f"dtd-{time.time_ns()}", "schema": quadratic_dtd(6_000)})
        attack("POST /sources, 90 KB quadratic DTD, no token", "minutes of CPU", "POST", "/sources",
               body={"name": f"dtd-{time.time_ns()}", "schema": quadratic_dtd(90_000)})
        attack("POST /sources name c1\\u0001x, no token", "201, next onyx up fails for good", "POST", "/sources",
               body={"name": "c1\u0001x", "rate": 1, "size": 1})
        attack("POST /profiles:batch 10,000 items, no token", "up to 6 min of CPU", "POST", "/profiles:batch",
               body={"profiles": [{"text": "/nitf/" + "a" * 10} for _ in range(10_000)]})
        attack("POST /profiles:batch 10,000 x 1,000 chars, a subscriber", "up to 6 min of CPU", "POST",
               "/profiles:batch", mine, {"profiles": [{"text": "/nitf/" + "a" * 1_000} for _ in range(10_000)]})
        attack("POST /profiles:batch 10,000 x 199 chars, a subscriber", "up to 6 min of CPU", "POST",
               "/profiles:batch", mine, {"profiles": [{"text": "/nitf/" + "a" * 193} for _ in range(10_000)]},
               note="2,000,000 characters: the most one request may carry, registered")
        for topic in ("__consumer_offsets", "__transaction_state", "onyx.deliver.s0000000000000000", "alerts.sf"):
            attack(f"delivery topic {topic}", "201, the name stays claimed", "POST", "/profiles", mine,
                   {"text": "/nitf", "delivery": {"topic": topic}})
        for url in ("http://[::127.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[::ffff:127.0.0.1]/"):
            attack(f"webhook {url}", "201", "POST", "/profiles", mine, {"text": "/nitf", "delivery": {"webhook": url}})
        attack("Host: rebind.example", "200", "GET", "/brokers", {"Host": "rebind.example", **mine})
        attack("non-ASCII X-Onyx-Admin-Token", "500", "GET", "/metrics", {"X-Onyx-Admin-Token": "caf\xe9".encode("latin-1")})
    return out


def run(json_path: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="onyx-attacks-") as run_dir:
        env = {**os.environ, "ONYX_RUN_DIR": run_dir, "ONYX_ADMIN_TOKEN": ADMIN}
        onyx = [sys.executable, "-m", "broker.cli"]
        subprocess.run([*onyx, "up", "--detach", "--timeout", "400"], env=env, check=True, capture_output=True)
        try:
            info = json.loads((Path(run_dir) / "cluster.json").read_text())
            with httpx.Client(timeout=30) as c:  # something archived, so message reads have a target
                subprocess.run([*onyx, "publish", "--generate", "5"], env=env, check=True, capture_output=True)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not c.get(
                        f"{info['api_url']}/archive/messages?at={int(time.time() * 1000) + 60_000}",
                        headers={"X-Onyx-Admin-Token": ADMIN}).json().get("messages"):
                    time.sleep(1)
            res = {"rows": rows(info["api_url"]), "health_limit_ms": 100}
        finally:
            subprocess.run([*onyx, "down"], env=env, capture_output=True)
    print(f"{'attack':<58} {'before':<36} {'now':>4} {'ms':>8} {'/health max ms':>15}")
    for r in res["rows"]:
        print(f"{r['row'][:58]:<58} {r['before'][:36]:<36} {r['status']:>4} {r['ms']:>8.1f} {r['health_max_ms']:>15.1f}")
    save(res, json_path, None, plot)
    return res


def plot(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows_ = res["rows"]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows_) + 1.5))
    names = [f"{r['row'][:48]} -> {r['status']}" for r in rows_]
    ax.barh(names, [r["ms"] for r in rows_], label="answer (ms)")
    ax.barh(names, [r["health_max_ms"] for r in rows_], alpha=0.5, label="/health worst meanwhile (ms)")
    ax.axvline(res["health_limit_ms"], color="red", linestyle="--", label="/health limit (100 ms)")
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (log)")
    ax.set_title("Attacks against onyx up: answer and /health (ms)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", type=Path, default=RESULTS / "attacks.json", help="default bench/results/attacks.json")
    run(p.parse_args(argv).json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
