"""The client waits out a 429 (its Retry-After) and tries again, against a real HTTP
server on loopback; past its retries, or for any other error, it says what the service
said."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from broker import clients
from broker.clients import ApiError, api


def _server(answers):
    """A server answering POSTs with ``answers`` in turn: (status, headers, body)."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(time.monotonic())
            status, headers, body = answers[min(len(seen), len(answers)) - 1]
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_a_429_is_waited_out_and_sent_again():
    server, seen = _server([(429, {"Retry-After": "1"}, {"detail": "over its rate"}), (201, {}, {"ok": True})])
    try:
        assert api("POST", f"http://127.0.0.1:{server.server_port}/profiles", {"text": "/a"}) == {"ok": True}
        assert len(seen) == 2 and seen[1] - seen[0] >= 0.9
    finally:
        server.shutdown()


def test_past_its_retries_or_for_another_error_it_says_what_the_service_said(monkeypatch):
    monkeypatch.setattr(clients, "RATE_LIMIT_RETRIES", 1)
    server, seen = _server([(429, {"Retry-After": "1"}, {"detail": "over its rate"})])
    try:
        with pytest.raises(ApiError, match="HTTP 429: over its rate"):
            api("POST", f"http://127.0.0.1:{server.server_port}/profiles", {"text": "/a"})
        assert len(seen) == 2
    finally:
        server.shutdown()
    server, seen = _server([(422, {}, {"detail": "not a profile"})])
    try:
        with pytest.raises(ApiError, match="HTTP 422: not a profile"):
            api("POST", f"http://127.0.0.1:{server.server_port}/profiles", {"text": "/a"})
        assert len(seen) == 1
    finally:
        server.shutdown()
