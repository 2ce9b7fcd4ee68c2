"""The webhook dispatcher's POSTs, retries, dead letters and rate limit, against real HTTP
receivers on loopback (the Kafka side replaced by a record and a producer that collects)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from broker import packets, topics
from broker.registry.limits import RateLimiter
from broker.registry.store import Store, WebhookRecord
from broker.registry.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, Dispatcher, sign


class Record:
    """What the dispatcher reads of a confluent-kafka message."""

    def __init__(self, offset: int, value: bytes = b"<nitf/>") -> None:
        self._offset, self._value = offset, value

    def topic(self): return "onyx.deliver.s1"
    def partition(self): return 0
    def offset(self): return self._offset
    def key(self): return b"p1"
    def value(self): return self._value
    def headers(self): return [("onyx-message-id", f"m{self._offset}".encode())]


class Producer:
    def __init__(self): self.rows = []
    def produce(self, topic, value, key, headers): self.rows.append((topic, key, value, headers))
    def flush(self, timeout): return 0


def server(statuses: list[int]):
    """A receiver answering the statuses in turn (the last one from then on); its POSTs."""
    posts = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            posts.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"])), time.monotonic()))
            self.send_response(statuses[min(len(posts), len(statuses)) - 1])
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, posts


@pytest.fixture
def dispatcher(tmp_path):
    return Dispatcher(Store(f"sqlite:///{tmp_path / 'db'}"), "127.0.0.1:9", allow_private=True, attempts=3,
                      backoff=0.1, timeout=2, limiter=RateLimiter(0, 1))


def hook(httpd) -> WebhookRecord:
    return WebhookRecord("p1", f"http://127.0.0.1:{httpd.server_address[1]}/hook", "k" * 64, "s1", "onyx.deliver.s1")


def test_a_delivery_is_posted_signed(dispatcher):
    httpd, posts = server([204])
    producer = Producer()
    dispatcher._deliver(hook(httpd), Record(7, b"<nitf>x</nitf>"), producer)
    httpd.shutdown()
    [(headers, body, _)] = posts
    assert body == b"<nitf>x</nitf>" and producer.rows == []
    assert headers[SIGNATURE_HEADER] == sign("k" * 64, headers[TIMESTAMP_HEADER], body)
    assert (headers["X-Onyx-Message-Id"], headers["X-Onyx-Delivery"]) == ("m7", "onyx.deliver.s1/0/7")


def test_failures_are_retried_with_growing_waits_then_dead_lettered(dispatcher):
    httpd, posts = server([503, 500, 502])
    producer = Producer()
    dispatcher._deliver(hook(httpd), Record(3), producer)
    httpd.shutdown()
    assert len(posts) == 3
    waits = [b[2] - a[2] for a, b in zip(posts, posts[1:])]
    assert waits[0] >= 0.1 and waits[1] >= 0.2  # 0.1 s, then doubled
    [(topic, key, value, headers)] = producer.rows
    reason = dict(headers)[packets.REASON].decode()
    assert topic == topics.DEAD_LETTER and key == b"p1" and value == b"<nitf/>"
    assert "failed 3 times" in reason and "HTTP 502" in reason and dict(headers)[packets.ORIGIN] == b"onyx.deliver.s1"
    assert dict(headers)["onyx-message-id"] == b"m3"
    assert dispatcher.counts == {"posted": 0, "retried": 2, "dead_lettered": 1}


def test_a_retry_that_succeeds_is_not_dead_lettered(dispatcher):
    httpd, posts = server([500, 200])
    producer = Producer()
    dispatcher._deliver(hook(httpd), Record(1), producer)
    httpd.shutdown()
    assert len(posts) == 2 and producer.rows == []


def test_a_subscribers_posts_wait_for_its_rate_limit(dispatcher):
    httpd, posts = server([200])
    dispatcher.limiter = RateLimiter(5, 1)  # 5 POSTs a second, one at a time
    start = time.monotonic()
    for i in range(6):
        dispatcher._deliver(hook(httpd), Record(i), Producer())
    httpd.shutdown()
    assert len(posts) == 6 and time.monotonic() - start >= 0.9  # the first at once, then one per 0.2 s


def test_a_url_that_turned_private_is_not_posted_to(dispatcher):
    dispatcher.allow_private = False
    producer = Producer()
    dispatcher._deliver(WebhookRecord("p1", "http://127.0.0.1:9/x", "k", "s1", "onyx.deliver.s1"), Record(1), producer)
    [(_, _, _, headers)] = producer.rows
    assert "loopback, private" in dict(headers)[packets.REASON].decode()
