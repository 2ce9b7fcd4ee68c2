"""The registration service under attack, for real (security issue: bounded work per request):
uvicorn with the service's limits on a free loopback port, a SQLite file, real Kafka, raw
sockets. Slowloris sockets, a flood of delivery-stream attempts, oversized bodies, a foreign
``Host`` and a non-ASCII operator token each get a clear answer or a closed connection, and
``/health``, polled from a thread throughout each attack, answers 200 every time (its
latencies are recorded, not asserted: ``bench/http_limits.py`` measures them). The attacks are
the benchmark's; every loop is bounded, every socket closed."""

from __future__ import annotations

import doctest
import json
import socket
import threading
import time

import pytest

from bench.http_limits import (MiB, Flood, HealthPoller, batch_request, big_body, exchange, parse_head,
                               register_streamers, request_bytes, slowloris, source_request, stream_attempts)
from broker import config
from broker.local.devcluster import free_port
from broker.registry.app import MAX_BATCH_BYTES, MAX_BODY_BYTES, create_app
from broker.registry.http import ServerLimits, make_server
from broker.registry.serve import BackgroundServer, ServiceSettings
from broker.registry.store import Store
from routing.overlay import builtin
from tests.broker.test_service import RecordingSender

HEADER_TIMEOUT = 1.0  # s: the service's header timeout here (10 s by default)
ADMIN = "operator-token"
THREADS = ("onyx-registration", "onyx-stream", "onyx-health")  # the service's own threads


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREADS)]


def _read_until(sock: socket.socket, marker: bytes, timeout: float = 20.0) -> bytes:
    """What ``sock`` receives until ``marker`` (or ``timeout`` seconds, or the close)."""
    got, deadline = b"", time.monotonic() + timeout
    while marker not in got and time.monotonic() < deadline:
        more = sock.recv(65536)
        if not more:
            break
        got += more
    return got


@pytest.fixture(scope="module")
def service(kafka, tmp_path_factory):
    """The service with a header timeout of 1 s and an operator token; when it stops, none of
    its threads may be left."""
    db = tmp_path_factory.mktemp("http-limits") / "onyx.db"
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{db}", "127.0.0.1",
                                              free_port(), admin_token=ADMIN,
                                              http=ServerLimits(header_timeout=HEADER_TIMEOUT))).start()
    yield server
    server.stop()
    deadline = time.monotonic() + 10
    while _threads() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _threads()


@pytest.fixture
def health(service, request):
    """/health polled from a thread while the test attacks: every poll answers 200."""
    with HealthPoller(service.settings.port) as poller:
        time.sleep(0.2)
        yield poller
    summary = poller.summary()
    request.node.user_properties.append(("health", summary))
    print(f"/health during {request.node.name}: {summary}")
    assert summary["polls"] > 0 and summary["not_200"] == 0, poller.polls


@pytest.mark.kafka
def test_slowloris_sockets_are_answered_408_and_closed_once_the_header_timeout_passes(service, health):
    got = slowloris(service.settings.port, 200, deadline_s=HEADER_TIMEOUT + 20, trickle_s=0.3)
    # a byte every 0.3 s kept none of them open: the timeout runs from the request's first byte
    assert got["closed_by_server"] == 200 and got["answers"] == {"408": 200}, got


@pytest.mark.kafka
def test_a_connection_that_sends_nothing_is_closed_without_an_answer(service, health):
    socks = [socket.create_connection(("127.0.0.1", service.settings.port), timeout=HEADER_TIMEOUT + 20)
             for _ in range(20)]
    try:
        assert [s.recv(100) for s in socks] == [b""] * 20
    finally:
        for s in socks:
            s.close()


@pytest.mark.kafka
def test_after_a_request_a_partial_next_one_gets_the_header_timeout_too(service, health):
    with socket.create_connection(("127.0.0.1", service.settings.port), timeout=HEADER_TIMEOUT + 20) as sock:
        sock.sendall(request_bytes("GET", "/health"))
        first = b""
        while (head := parse_head(first)) is None or len(head[2]) < int(head[1]["content-length"]):
            first += sock.recv(65536)
        assert head[0] == 200
        sock.sendall(b"GET /brokers HTTP/1.1\r\nHost: local")  # the keep-alive timeout no longer runs
        answer = b""
        while got := sock.recv(65536):
            answer += got
    assert answer.startswith(b"HTTP/1.1 408") and b"ONYX_HTTP_HEADER_TIMEOUT" in answer


@pytest.fixture(scope="module")
def streamers(service):
    """31 subscribers with a profile each: (subscriber token, profile)."""
    return register_streamers(service.settings.port, 31)


@pytest.mark.kafka
def test_1000_stream_attempts_get_429_past_the_caps_and_the_granted_ones_stream(service, streamers, health):
    port, per, total = service.settings.port, config.SSE_PER_SUBSCRIBER, config.SSE_MAX
    one, rest = stream_attempts(streamers, 20, 1000)
    first = Flood(port, one)  # one subscriber: its cap
    try:
        assert first.statuses() == {200: per, 429: 20 - per}
        others = Flood(port, rest)  # everyone else: the service's cap
        try:
            assert others.statuses() == {200: total - per, 429: 980 - (total - per)}
            refused = [a for a in first.answers + others.answers if a.status == 429]
            assert all(a.headers["retry-after"] == str(config.SSE_RETRY_AFTER_S) and
                       a.headers["connection"] == "close" for a in refused)
            details = {a.json()["detail"].split(" has ")[0] for a in refused}
            assert details == {f"subscriber {streamers[0][1]['subscriber_id']}", "the service"}
            granted = [a for a in first.answers + others.answers if a.status == 200]
            assert all(b"retry: 1000" in a.body for a in granted)  # the stream's first event came
        finally:
            others.close()
    finally:
        first.close()
    # the clients went away: their slots are free again (noticed as their connections close)
    deadline = time.monotonic() + 30
    while (again := Flood(port, one[:per])).statuses() != {200: per} and time.monotonic() < deadline:
        again.close()
        time.sleep(0.5)
    again.close()
    assert again.statuses() == {200: per}


@pytest.mark.kafka
def test_a_granted_stream_delivers_what_its_topic_gets(service, streamers, kafka, health):
    from confluent_kafka import Producer

    token, profile = streamers[1]
    with socket.create_connection(("127.0.0.1", service.settings.port), timeout=30) as sock:
        # from the topic's start: the record may be written before the stream has found the topic's end
        sock.sendall(request_bytes("GET", f"/profiles/{profile['profile_id']}/deliveries?from_start=true",
                                   {"X-Onyx-Token": profile["token"]}))
        got = _read_until(sock, b"retry: 1000")
        assert got.startswith(b"HTTP/1.1 200")
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        producer.produce(profile["delivery_topic"], b"<nitf/>", key=profile["profile_id"].encode(),
                         headers=[("onyx-message-id", b"m1")])
        producer.flush(10)
        got = _read_until(sock, b'"message_id": "m1"')
    assert b"event: delivery" in got


@pytest.mark.kafka
def test_console_streams_are_capped_too(service, health):
    attempts = [request_bytes("GET", "/console/events", {"X-Onyx-Admin-Token": ADMIN})] * (config.CONSOLE_STREAMS + 2)
    flood = Flood(service.settings.port, attempts)
    try:
        assert flood.statuses() == {200: config.CONSOLE_STREAMS, 429: 2}
    finally:
        flood.close()


@pytest.mark.kafka
@pytest.mark.parametrize("chunked", [False, True], ids=["with a length", "chunked"])
def test_a_64_mib_batch_is_413_and_its_connection_closed(service, health, chunked):
    head, body = batch_request(64 * MiB + 1, chunked=chunked)
    got = big_body(service.settings.port, head, body, chunked=chunked, wait_close=20)
    # the client stopped sending once answered: the service closes after its drain timeout
    assert got["status"] == 413 and f"{MAX_BATCH_BYTES:,} bytes" in got["detail"] and got["closed"], got
    if not chunked:  # refused from its Content-Length: answered before the service read it
        assert got["sent_bytes"] < len(body) / 2, got


@pytest.mark.kafka
def test_a_10_mb_schema_is_413_unread(service, health):
    head, body = source_request(10 * 10**6)
    got = big_body(service.settings.port, head, body, wait_close=20)
    assert got["status"] == 413 and f"{MAX_BODY_BYTES:,} bytes" in got["detail"] and got["closed"], got
    assert got["sent_bytes"] < len(body) / 2, got


@pytest.mark.kafka
def test_a_replay_window_of_2_to_the_53_ms_is_422_at_once(service, health):
    body = json.dumps({"text": "/nitf", "from": 0, "to": 2**53 - 1}).encode()
    head = request_bytes("POST", "/replay", {"Content-Type": "application/json", "Content-Length": str(len(body)),
                                             "X-Onyx-Admin-Token": ADMIN})
    answer = exchange(service.settings.port, head + body)
    assert answer.status == 422 and f"{config.REPLAY_MAX_WINDOW_MS:,} ms" in answer.json()["detail"]


@pytest.mark.kafka
def test_a_client_that_sends_all_of_a_refused_body_before_reading_gets_the_413(service, health):
    head, body = source_request(10 * 10**6)
    answer = exchange(service.settings.port, head + body)  # sendall, then read (as most clients do)
    assert answer.status == 413 and f"{MAX_BODY_BYTES:,} bytes" in answer.json()["detail"]


@pytest.mark.kafka
def test_a_request_for_another_host_is_400_and_health_answers_any(service):
    port = service.settings.port
    refused = exchange(port, request_bytes("GET", "/brokers", host="rebind.example"))
    assert refused.status == 400 and "rebind.example" in refused.json()["detail"]
    assert exchange(port, request_bytes("GET", "/brokers", host="")).status == 400
    for host in ("localhost", f"127.0.0.1:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert exchange(port, request_bytes("GET", "/brokers", {"X-Onyx-Admin-Token": ADMIN}, host=host)).status == 200, host
    assert exchange(port, request_bytes("GET", "/health", host="10.1.2.3:8080")).status == 200


@pytest.mark.kafka
@pytest.mark.parametrize("path", ["/rebalance", "/console/overlay", "/metrics"])
def test_a_non_ascii_operator_token_is_refused_not_an_error(service, path):
    method = "POST" if path == "/rebalance" else "GET"
    raw = request_bytes(method, path).replace(b"\r\n\r\n", b"\r\nX-Onyx-Admin-Token: \xff\xfe\xe9\r\n\r\n", 1)
    answer = exchange(service.settings.port, raw)
    assert answer.status == 401 and "operator token" in answer.json()["detail"]


def test_connections_past_the_limit_are_answered_503_and_closed(tmp_path):
    port = free_port()
    app = create_app(Store(f"sqlite:///{tmp_path / 'onyx.db'}"), builtin(), RecordingSender())
    server = make_server(app, "127.0.0.1", port, ServerLimits(max_connections=20, header_timeout=30))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
    try:
        for _ in range(3):
            answer = exchange(port, request_bytes("GET", "/health"))
            assert answer.status == 503 and answer.headers["connection"] == "close"
            assert answer.headers["retry-after"] == "1"
            assert "20 connections open" in answer.json()["detail"]
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10
    while exchange(port, request_bytes("GET", "/health")).status != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert exchange(port, request_bytes("GET", "/health")).status == 200
    server.should_exit = True
    thread.join(10)


def test_the_attacks_docstring_examples_run():
    import bench.http_limits

    result = doctest.testmod(bench.http_limits)
    assert result.attempted > 0 and result.failed == 0
