"""``/health`` while the registration service is attacked (security issue: bounded work per request).

    python -m bench.http_limits            # 20 s idle, then each attack (about 2 minutes)
    python -m bench.http_limits --quick    # shorter phases

The service runs as ``onyx serve`` does, in a process of its own (uvicorn with the service's
limits, :mod:`broker.registry.http`; a SQLite file; a real local Kafka broker started for the
run), with its default settings. A poller in another process of its own asks ``GET /health``
every 20 ms, each time on a new connection (as a Kubernetes probe does), and records each
answer's status and latency (connect to last byte). The phases, one after the other:

* **idle**: nothing else runs (the floor: what ``/health`` costs here);
* **slowloris 200**: 200 connections each send a request line and part of a header, then a
  byte every 0.5 s; the service answers 408 and closes each once ONYX_HTTP_HEADER_TIMEOUT
  (10 s) has passed since its first byte;
* **SSE 1,000 attempts**: 1,000 ``GET /profiles/{id}/deliveries`` at once (20 by one
  subscriber, then 980 over 30 others): ONYX_SSE_MAX (64) stream, at most
  ONYX_SSE_PER_SUBSCRIBER (8) of one subscriber, every other one is answered 429 and closed;
  the streams are held a while, then closed; three times;
* **floor**: the same burst of 1,000 connections at once, three times, on the service's
  server (:func:`broker.registry.http.make_server`) with an app that does nothing: what the
  event loop alone costs a ``/health`` that arrives behind them (the limit of this design on
  this machine);
* **64 MiB batch**: ``POST /profiles:batch`` of 64 MiB + 1 byte (10,000 profiles), again and
  again: refused with 413 from its ``Content-Length``, unread (the client stops sending when
  the answer comes, and closes);
* **64 MiB batch, chunked**: the same without a ``Content-Length``: the service reads it
  until it passes 64 MiB, then answers 413;
* **10 MB schema**: ``POST /sources`` with a 10 MB ``schema``, again and again: 413 unread.

Per phase: /health's median, p99 and worst latency, the polls that were not 200 (none
allowed), and what the attack got (answers, seconds until the last). The limit is the issue's
target, /health under 100 ms throughout (met: the worst poll was); ratios are to the idle
median. The load average is recorded: on a shared machine the worst polls depend on it. Prints a table,
writes ``bench/results/http_limits.json`` and a PNG. The attacks are also what
``tests/broker/test_http_limits.py`` runs (with bounded loops and a short header timeout).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.output import save

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MS = 100.0  # the issue's: /health answers in under 100 ms throughout every attack
POLL_EVERY_S = 0.02
MiB = 2**20


# -- one HTTP exchange on a raw socket ------------------------------------------------------------


@dataclass
class Answer:
    """What a server answered on one connection: ``status`` 0 when it closed without an answer."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    closed: bool = False  # the server closed the connection
    seconds: float = 0.0  # from the request's first byte to the answer's head (or the close)

    def json(self) -> Any:
        return json.loads(self.body)


def parse_head(data: bytes) -> tuple[int, dict[str, str], bytes] | None:
    """Status, headers and what follows them, once ``data`` holds an answer's whole head.

    >>> parse_head(b"HTTP/1.1 429 Too Many Requests\\r\\nRetry-After: 5\\r\\n\\r\\n{}")
    (429, {'retry-after': '5'}, b'{}')
    >>> parse_head(b"HTTP/1.1 200 OK\\r\\n") is None
    True
    """
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, rest


def request_bytes(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"",
                  host: str = "localhost") -> bytes:
    """An HTTP/1.1 request (a ``Content-Length`` when there is a body)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange(port: int, raw: bytes, timeout: float = 30.0) -> Answer:
    """Send ``raw`` on a new connection to 127.0.0.1:``port`` and read the whole answer (its
    ``Content-Length``, or up to the close)."""
    t0 = time.perf_counter()
    answer = Answer()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            got = sock.recv(65536)
            if not got:
                answer.closed = True
                break
            data += got
            head = parse_head(data)
            if head and "content-length" in head[1] and len(head[2]) >= int(head[1]["content-length"]):
                break
    answer.seconds = time.perf_counter() - t0
    if (head := parse_head(data)) is not None:
        answer.status, answer.headers, answer.body = head
    return answer


# -- /health, polled throughout ------------------------------------------------------------------


def poll_health(port: int, stop: Any, out: Any, every: float = POLL_EVERY_S, timeout: float = 30.0) -> None:
    """``GET /health`` every ``every`` seconds on a new connection until ``stop`` is set; puts
    the list of (status, seconds) on ``out`` (status 0: no answer within ``timeout``)."""
    polls = []
    raw = request_bytes("GET", "/health", {"Connection": "close"})
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            status = exchange(port, raw, timeout).status
        except OSError:
            status = 0
        polls.append((status, time.perf_counter() - t0))
        stop.wait(max(0.0, every - (time.perf_counter() - t0)))
    out.put(polls)


class HealthPoller:
    """``with HealthPoller(port) as poller: ...``, then ``poller.polls``: (status, seconds) of
    every ``GET /health`` made meanwhile; in a thread, or a process of its own
    (``process=True``: its latencies are not the attacker's to share a GIL with)."""

    def __init__(self, port: int, process: bool = False) -> None:
        self.port, self.process = port, process
        self.polls: list[tuple[int, float]] = []

    def __enter__(self) -> "HealthPoller":
        if self.process:
            ctx = multiprocessing.get_context("spawn")
            self._stop, self._out = ctx.Event(), ctx.Queue()
            self._worker: Any = ctx.Process(target=poll_health, args=(self.port, self._stop, self._out), daemon=True)
        else:
            import queue

            self._stop, self._out = threading.Event(), queue.Queue()
            self._worker = threading.Thread(target=poll_health, args=(self.port, self._stop, self._out), daemon=True)
        self._worker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.polls = self._out.get(timeout=60)
        self._worker.join(60)

    def summary(self) -> dict[str, Any]:
        """Polls, how many were not 200, latency median, p99 and worst (ms)."""
        ms = sorted(s * 1e3 for _, s in self.polls)
        return {"polls": len(ms), "not_200": sum(1 for status, _ in self.polls if status != 200),
                "ms_median": statistics.median(ms) if ms else None,
                "ms_p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else None,
                "ms_max": ms[-1] if ms else None}


# -- the attacks --------------------------------------------------------------------------------


def slowloris(port: int, n: int, deadline_s: float, trickle_s: float = 0.5) -> dict[str, Any]:
    """Open ``n`` connections that each send a request line and part of a header, then one
    more byte every ``trickle_s`` seconds, until the server closes them or ``deadline_s`` has
    passed (then the rest are closed here). How many the server closed, how many of those it
    answered (and with what), and the seconds until the last was closed."""
    t0 = time.perf_counter()
    socks = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        sock.setblocking(False)
        socks.append(sock)
    answers: dict[socket.socket, bytes] = {s: b"" for s in socks}
    closed_at: dict[socket.socket, float] = {}
    sel = selectors.DefaultSelector()
    for sock in socks:
        sel.register(sock, selectors.EVENT_READ)
    next_byte = time.perf_counter() + trickle_s
    try:
        while len(closed_at) < n and time.perf_counter() - t0 < deadline_s:
            for key, _ in sel.select(timeout=max(0.0, next_byte - time.perf_counter())):
                sock = key.fileobj
                try:
                    got = sock.recv(65536)
                except OSError:
                    got = b""
                if got:
                    answers[sock] += got
                else:
                    closed_at[sock] = time.perf_counter() - t0
                    sel.unregister(sock)
            if time.perf_counter() >= next_byte:
                next_byte += trickle_s
                for sock in socks:
                    if sock not in closed_at:
                        try:
                            sock.send(b"a")
                        except OSError:
                            pass  # closed: the next select says so
    finally:
        sel.close()
        for sock in socks:
            sock.close()
    statuses = Counter(str(head[0]) if (head := parse_head(answers[s])) else "closed, no answer"
                       for s in closed_at)
    return {"sockets": n, "closed_by_server": len(closed_at), "answers": dict(statuses),
            "seconds_to_last_close": max(closed_at.values(), default=None)}


class Flood:
    """``n`` requests at once, one connection each (``requests``: their bytes); ``answers`` once
    every one has an answer's head (or was closed); the connections whose answer was 200 stay
    open (a stream each) until :meth:`close`."""

    def __init__(self, port: int, requests: list[bytes], deadline_s: float = 60.0) -> None:
        t0 = time.perf_counter()
        self.held: list[socket.socket] = []
        self.answers: list[Answer] = []
        sel = selectors.DefaultSelector()
        pending: dict[socket.socket, tuple[Answer, bytearray]] = {}
        try:
            for raw in requests:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(raw)
                sock.setblocking(False)
                answer = Answer()
                self.answers.append(answer)
                pending[sock] = (answer, bytearray())
                sel.register(sock, selectors.EVENT_READ)
            while pending and time.perf_counter() - t0 < deadline_s:
                for key, _ in sel.select(timeout=1.0):
                    sock = key.fileobj
                    answer, data = pending[sock]
                    try:
                        got = sock.recv(65536)
                    except OSError:
                        got = b""
                    data += got
                    head = parse_head(bytes(data))
                    if head is not None:
                        answer.status, answer.headers, answer.body = head
                    if not got:
                        answer.closed = True
                    # done: closed; a stream's first event; or a whole answer with a length
                    streaming = head is not None and head[0] == 200 and b"\n\n" in head[2]
                    whole = head is not None and len(head[2]) >= int(head[1].get("content-length", 1 << 62))
                    if answer.closed or streaming or whole:
                        answer.seconds = time.perf_counter() - t0
                        sel.unregister(sock)
                        del pending[sock]
                        if streaming and not answer.closed:
                            self.held.append(sock)
                        else:
                            sock.close()
        finally:
            sel.close()
            for sock in pending:
                sock.close()

    def statuses(self) -> Counter:
        return Counter(a.status for a in self.answers)

    def close(self) -> None:
        """Close the streams (their clients go away)."""
        for sock in self.held:
            sock.close()
        self.held = []


def deliveries_request(profile: dict[str, str], subscriber_token: str) -> bytes:
    """``GET /profiles/{id}/deliveries`` of a registered profile, with its tokens."""
    return request_bytes("GET", f"/profiles/{profile['profile_id']}/deliveries",
                         {"X-Onyx-Token": profile["token"], "X-Onyx-Subscriber-Token": subscriber_token})


def big_body(port: int, raw_head: bytes, body: bytes, chunked: bool = False, wait_close: float = 0.0,
             timeout: float = 60.0) -> dict[str, Any]:
    """Send a request's head and then ``body`` (chunked transfer coding if ``chunked``) while
    reading the answer; stop sending once the server answered or closed. The answer, how much
    of the body was sent, the seconds until the answer, and whether the server closed the
    connection (within ``wait_close`` seconds after the answer)."""
    wire = b"".join(f"{len(body[i:i + 65536]):x}\r\n".encode() + body[i:i + 65536] + b"\r\n"
                    for i in range(0, len(body), 65536)) + b"0\r\n\r\n" if chunked else body
    view = memoryview(wire)
    t0 = time.perf_counter()
    sent, data, closed = 0, b"", False
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw_head)
        sock.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        try:
            while not closed and time.perf_counter() - t0 < timeout:
                head = parse_head(data)
                if head and len(head[2]) >= int(head[1].get("content-length", 1 << 62)):
                    break
                for _, events in sel.select(timeout=1.0):
                    if events & selectors.EVENT_READ:
                        try:
                            got = sock.recv(65536)
                        except OSError:
                            got = b""
                        closed = not got
                        data += got
                    if events & selectors.EVENT_WRITE and not closed:
                        if sent >= len(wire) or data:
                            sel.modify(sock, selectors.EVENT_READ)  # all sent, or answered: just read
                            continue
                        try:
                            sent += sock.send(view[sent:sent + 65536])
                        except OSError:  # the server closed: what it answered may still be there to read
                            sel.modify(sock, selectors.EVENT_READ)
            answered = time.perf_counter() - t0
            if not closed and wait_close > 0:  # answered: does the server close the connection?
                sock.setblocking(True)
                sock.settimeout(wait_close)
                try:
                    closed = sock.recv(65536) == b""
                except TimeoutError:
                    closed = False  # still open
                except OSError:  # reset
                    closed = True
        finally:
            sel.close()
    head = parse_head(data)
    return {"status": head[0] if head else 0, "detail": json.loads(head[2]).get("detail") if head and head[2] else None,
            "body_bytes": len(body), "sent_bytes": min(sent, len(body)), "closed": closed, "seconds": answered}


def batch_request(size: int, chunked: bool = False) -> tuple[bytes, bytes]:
    """A ``POST /profiles:batch`` of 10,000 profiles and at least ``size`` bytes: head, body."""
    per = size // 10_000 + 1
    body = json.dumps({"profiles": [{"text": "/nitf/" + "a" * (per - 20)} for _ in range(10_000)]}).encode()
    length = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(len(body))}
    return request_bytes("POST", "/profiles:batch", {"Content-Type": "application/json", **length}), body


def source_request(schema_bytes: int) -> tuple[bytes, bytes]:
    """A ``POST /sources`` whose ``schema`` has ``schema_bytes`` characters: head, body."""
    body = json.dumps({"name": "big-schema", "schema": "<!ELEMENT a (#PCDATA)>" + " " * schema_bytes}).encode()
    return request_bytes("POST", "/sources", {"Content-Type": "application/json",
                                              "Content-Length": str(len(body))}), body


def register_streamers(port: int, subscribers: int) -> list[tuple[str, dict[str, str]]]:
    """``subscribers`` new subscribers with one profile each: (subscriber token, profile)."""
    out = []
    for i in range(subscribers):
        sub = exchange(port, request_bytes("POST", "/subscribers", {"Content-Length": "0"})).json()
        body = json.dumps({"text": f"/nitf/stream{i}"}).encode()
        profile = exchange(port, request_bytes("POST", "/profiles", {"Content-Type": "application/json",
                                                                     "X-Onyx-Subscriber-Token": sub["token"]},
                                               body)).json()
        out.append((sub["token"], profile))
    return out


def stream_attempts(streamers: list[tuple[str, dict[str, str]]], first: int, total: int) -> tuple[list[bytes], list[bytes]]:
    """The SSE flood: ``first`` attempts by the first subscriber, then ``total - first`` over the others."""
    token, profile = streamers[0]
    one = [deliveries_request(profile, token)] * first
    rest = [deliveries_request(p, t) for t, p in streamers[1:]]
    return one, [rest[i % len(rest)] for i in range(total - first)]


# -- the benchmark ---------------------------------------------------------------------------------


async def nothing_app(scope, receive, send) -> None:
    """An ASGI app that answers every request 200 with ``{}`` at once: the floor."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})


def serve_floor(port: int) -> None:
    """:func:`nothing_app` on the service's server (:func:`broker.registry.http.make_server`)."""
    from broker.registry.http import make_server

    make_server(nothing_app, "127.0.0.1", port).run()


def start_service(port: int, log: Path, command: list[str]) -> subprocess.Popen:
    """Start ``command`` (a server on ``port``) and wait until ``/health`` answers 200."""
    proc = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the registration service exited: {log.read_text()[-2000:]}")
        try:
            if exchange(port, request_bytes("GET", "/health"), 2).status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("the registration service did not answer /health in 60 s")


def repeat(seconds: float, attack) -> list[dict[str, Any]]:
    """``attack()`` again and again for ``seconds``."""
    out = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        out.append(attack())
    return out


def summarize_bodies(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"requests": len(runs), "answers": dict(Counter(str(r["status"]) for r in runs)),
            "sent_mib_median": statistics.median(r["sent_bytes"] for r in runs) / MiB,
            "body_mib": runs[0]["body_bytes"] / MiB, "seconds_median": statistics.median(r["seconds"] for r in runs)}


def run(args: argparse.Namespace) -> dict:
    from broker import config
    from broker.local.devcluster import KafkaDevCluster, free_port

    cluster = KafkaDevCluster(name="bench-http-limits").start()
    service = None
    phases: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="onyx-bench-http-") as tmp:
            port = free_port()
            service = start_service(port, Path(tmp) / "service.log", [
                sys.executable, "-m", "broker.cli", "serve", "--bootstrap-servers", cluster.bootstrap_servers,
                "--database", f"sqlite:///{Path(tmp) / 'onyx.db'}", "--host", "127.0.0.1", "--port", str(port)])
            streamers = register_streamers(port, 31)
            batch, chunked_batch = batch_request(64 * MiB + 1), batch_request(64 * MiB + 1, chunked=True)
            schema = source_request(10 * 10**6)
            for _ in range(50):  # warm-up
                exchange(port, request_bytes("GET", "/health"))

            def phase(name: str, attack, target: int = port) -> None:
                with HealthPoller(target, process=True) as poller:
                    time.sleep(1.0)  # the poller's first polls: before the attack
                    result = attack()
                phases[name] = {"health": poller.summary(), "attack": result}
                h = phases[name]["health"]
                print(f"{name}: /health median {h['ms_median']:.1f} ms, p99 {h['ms_p99']:.1f} ms, "
                      f"{h['not_200']} not 200; attack: {json.dumps(result)[:300]}", flush=True)

            phase("idle", lambda: time.sleep(args.phase) or {})
            phase("slowloris 200", lambda: slowloris(port, 200, config.HTTP_HEADER_TIMEOUT_S + 20))

            def sse() -> dict[str, Any]:
                one, rest = stream_attempts(streamers, 20, 1000)
                t0 = time.perf_counter()
                first, others = Flood(port, one), Flood(port, rest)
                answered = time.perf_counter() - t0
                time.sleep(args.phase / 3)  # the streams stay open
                first.close()
                others.close()
                time.sleep(1.0)  # their slots free as the service sees them go
                statuses = first.statuses() + others.statuses()
                return {"attempts": len(one) + len(rest), "answers": {str(k): v for k, v in statuses.items()},
                        "first_subscriber_streams": first.statuses()[200], "seconds_to_answer_all": answered}

            phase("SSE 1,000 attempts", lambda: [sse() for _ in range(3)][-1])
            floor_port = free_port()
            floor = start_service(floor_port, Path(tmp) / "floor.log", [
                sys.executable, "-c", f"from bench.http_limits import serve_floor; serve_floor({floor_port})"])
            try:
                nothing = [request_bytes("GET", "/nothing")] * 1000

                def floor_flood() -> dict[str, Any]:
                    t0 = time.perf_counter()
                    flood = Flood(floor_port, nothing)
                    answered = time.perf_counter() - t0
                    time.sleep(args.phase / 3)
                    return {"attempts": 1000, "answers": {str(k): v for k, v in flood.statuses().items()},
                            "seconds_to_answer_all": answered}

                phase("floor: 1,000 at once, no app", lambda: [floor_flood() for _ in range(3)][-1], floor_port)
            finally:
                floor.terminate()
                floor.wait(30)
            phase("64 MiB batch", lambda: summarize_bodies(repeat(args.phase, lambda: big_body(port, *batch))))
            phase("64 MiB batch, chunked",
                  lambda: summarize_bodies(repeat(args.phase, lambda: big_body(port, *chunked_batch, chunked=True))))
            phase("10 MB schema", lambda: summarize_bodies(repeat(args.phase, lambda: big_body(port, *schema))))
    finally:
        if service is not None:
            service.terminate()
            service.wait(30)
        cluster.stop()
    idle = phases["idle"]["health"]["ms_median"]
    for p in phases.values():
        p["health"]["ratio_to_idle"] = p["health"]["ms_median"] / idle
    return {"config": {"phase_s": args.phase, "poll_every_ms": POLL_EVERY_S * 1e3,
                       "header_timeout_s": config.HTTP_HEADER_TIMEOUT_S, "max_connections": config.HTTP_MAX_CONNECTIONS,
                       "sse_max": config.SSE_MAX, "sse_per_subscriber": config.SSE_PER_SUBSCRIBER,
                       "database": "sqlite (file)", "kafka": "local, 1 node", "machine": f"{os.cpu_count()} cores",
                       "load_average_1min": os.getloadavg()[0], "date": datetime.now(timezone.utc).isoformat()},
            "limit_ms": TARGET_MS, "phases": phases}


def table(res: dict) -> str:
    c = res["config"]
    lines = [f"GET /health during attacks on the registration service (its own process, defaults: header timeout "
             f"{c['header_timeout_s']:g} s, {c['max_connections']:,} connections, {c['sse_max']} streams, "
             f"{c['sse_per_subscriber']} per subscriber), polled every {c['poll_every_ms']:.0f} ms on new "
             f"connections; {c['machine']}, load {c['load_average_1min']:.1f}",
             f"{'phase':30} {'polls':>6} {'not 200':>8} {'median ms':>10} {'p99 ms':>8} {'max ms':>8} "
             f"{'x idle':>7} {'limit ms':>9} {'':>6}  attack got"]
    for name, p in res["phases"].items():
        h, a = p["health"], p["attack"]
        met = "met" if h["ms_max"] < res["limit_ms"] and h["not_200"] == 0 else "MISSED"  # throughout
        got = ", ".join(f"{k}: {v}" for k, v in (a.get("answers") or {}).items())
        if "seconds_to_last_close" in a:
            got += f"; {a['closed_by_server']}/{a['sockets']} closed by the service, the last after " \
                   f"{a['seconds_to_last_close']:.1f} s"
        if "seconds_to_answer_all" in a:
            got += f"; all answered in {a['seconds_to_answer_all']:.1f} s"
        if "sent_mib_median" in a:
            got += f"; answered after {a['sent_mib_median']:.1f} of {a['body_mib']:.1f} MiB sent"
        lines.append(f"{name:30} {h['polls']:>6} {h['not_200']:>8} {h['ms_median']:>10.2f} {h['ms_p99']:>8.2f} "
                     f"{h['ms_max']:>8.2f} {h['ratio_to_idle']:>7.2f} {res['limit_ms']:>9.0f} {met:>6}  {got}")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["phases"])
    h = [res["phases"][n]["health"] for n in names]
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.bar([i - 0.27 for i in x], [p["ms_median"] for p in h], 0.27, label="median")
    ax.bar(list(x), [p["ms_p99"] for p in h], 0.27, label="p99")
    ax.bar([i + 0.27 for i in x], [p["ms_max"] for p in h], 0.27, label="worst", color="0.6")
    ax.axhline(res["limit_ms"], color="tab:red", ls="--", lw=1, label=f"limit ({res['limit_ms']:.0f} ms)")
    ax.set_xticks(list(x), [textwrap.fill(n, 16) for n in names], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("GET /health latency, ms")
    ax.set_title("/health while the registration service is attacked")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.http_limits", description=__doc__.split("\n\n")[0])
    p.add_argument("--phase", type=float, help="seconds of the idle phase and of each repeated attack (default 15, "
                   "quick 5)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/http_limits.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.phase = args.phase if args.phase is not None else (5.0 if args.quick else 15.0)
    res = run(args)
    print(table(res))
    save(res, args.json or RESULTS / "http_limits.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
