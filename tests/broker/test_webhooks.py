"""Webhooks on real components: the dispatcher reads real Kafka delivery topics and POSTs to real
HTTP(S) receivers on loopback (``http.server`` in a thread; a self-signed certificate made by
``openssl`` for https). Only the host lookup is the test's own where a test needs a name to
resolve to an address of its choosing (pinning, refused forms)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import re
import shutil
import socketserver
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from broker import packets, topics
from broker.compacted import read_to_end
from broker.registry.limits import RateLimiter
from broker.registry.store import ProfileRecord, Store
from broker.registry.webhook_targets import post, resolve_checked
from broker.registry.webhooks import (GROUP, MESSAGE_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, Dispatcher,
                                      WebhookRefusedError, check_url, sign)

SECRET = "k" * 64
TLS_HOST = "hooks.onyx.test"  # the name the test certificate is for; resolved by the tests' resolver only


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        server: Receiver = self.server
        body = self.rfile.read(int(self.headers["Content-Length"]))
        headers = dict(self.headers)
        with server.lock:
            server.posts.append((headers, body))
        if not server.open.is_set():  # hanging: the POST is read, and nothing answered
            with server.lock:
                server.hung += 1
            server.open.wait()
            status = 503  # the sender gave up on it long ago
        else:
            with server.lock:
                server.answered += 1
                status = server.statuses[min(server.answered, len(server.statuses)) - 1]
                if 200 <= status < 300:  # before answering: a sender that saw the 2xx finds it here
                    server.delivered.append((headers, body))
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args):
        pass


class Receiver(ThreadingHTTPServer):
    """A webhook receiver on loopback answering ``statuses`` in turn (the last one from then on);
    with ``open`` cleared it hangs (reads each POST, answers nothing) until it is set again.
    ``posts``: every POST; ``delivered``: those answered 2xx."""

    daemon_threads = True

    def __init__(self, statuses=(204,), tls: ssl.SSLContext | None = None, host: str = "127.0.0.1", port: int = 0):
        super().__init__((host, port), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.statuses = list(statuses)
        self.posts, self.delivered, self.hung, self.answered = [], [], 0, 0
        self.lock, self.open = threading.Lock(), threading.Event()
        self.open.set()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def server_bind(self) -> None:  # HTTPServer's, without its reverse lookup of the address
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    @property
    def port(self) -> int:
        return self.server_address[1]

    def ids(self, which: str = "delivered") -> list[str]:
        with self.lock:
            return [h[MESSAGE_ID_HEADER] for h, _ in getattr(self, which)]

    def handle_error(self, request, client_address):
        pass  # a sender that gave up (timeout) or refused the certificate: expected here

    def close(self) -> None:
        self.open.set()
        self.shutdown()
        self.server_close()


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make(*args, **kwargs) -> Receiver:
        made.append(Receiver(*args, **kwargs))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for TLS_HOST: its folder (cert.pem, key.pem)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", d / "key.pem", "-out", d / "cert.pem", "-days", "2",
                    "-subj", f"/CN={TLS_HOST}", "-addext", f"subjectAltName=DNS:{TLS_HOST}"],
                   check=True, capture_output=True)
    return d


def tls_contexts(certificate) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A receiver's context with the test certificate, and a sender's that trusts it."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certificate / "cert.pem", certificate / "key.pem")
    return server, ssl.create_default_context(cafile=str(certificate / "cert.pem"))


def loopback(host: str, port: int) -> list[str]:
    """The tests' resolver: every name is 127.0.0.1."""
    return ["127.0.0.1"]


def genuine(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """What a receiver does with a POST (the README's check): recompute the signature over the
    timestamp, the message id and the body."""
    signed = f"{headers[TIMESTAMP_HEADER]}.{headers[MESSAGE_ID_HEADER]}\n".encode() + body
    mac = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers[SIGNATURE_HEADER], "sha256=" + mac)


def until(done, what, bound: float = 60.0) -> None:
    """Wait for ``done()``; fail with ``what()`` after ``bound`` seconds (a liveness bound only)."""
    deadline = time.monotonic() + bound
    while not done():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def webhook_store(path, *hooks: tuple[str, str | None, str, str]) -> Store:
    """A database with these webhooks: (profile id, subscriber id, delivery topic, URL)."""
    store = Store(f"sqlite:///{path / 'onyx.db'}")
    add_webhooks(store, *hooks)
    return store


def add_webhooks(store: Store, *hooks: tuple[str, str | None, str, str]) -> None:
    with store.transaction() as tx:
        for profile_id, subscriber_id, topic, url in hooks:
            tx.add_profile(ProfileRecord(profile_id, "/nitf", "b1", topic, 1, subscriber_id), f"token-{profile_id}")
            tx.set_webhook(profile_id, url, SECRET, subscriber_id)


def publish(kafka, topic: str, profile_id: str, ids: list[str]) -> None:
    """Deliveries to ``profile_id`` on ``topic`` as the brokers write them (key, onyx-message-id)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for message_id in ids:
        producer.produce(topic, f"<nitf><hl1>{message_id}</hl1></nitf>".encode(), profile_id.encode(),
                         headers=[("onyx-message-id", message_id.encode())])
    assert producer.flush(30) == 0


def dead_letters(kafka, origin: str) -> list:
    return [m for m in read_to_end(kafka.bootstrap_servers, topics.DEAD_LETTER)
            if dict(m.headers())[packets.ORIGIN] == origin.encode()]


def delivery_topics(kafka, unique: str, *names: str) -> list[str]:
    made = [f"onyx.deliver.{name}-{unique}" for name in names]
    topics.ensure_topics(kafka.bootstrap_servers, made + [topics.DEAD_LETTER])
    return made


def dispatcher(store: Store, kafka, **settings) -> Dispatcher:
    base = {"allow_private": True, "attempts": 3, "backoff": 0.05, "timeout": 5, "refresh": 0.2,
            "limiter": RateLimiter(0, 1)}
    return Dispatcher(store, kafka.bootstrap_servers, **(base | settings)).start()


# -- signing -------------------------------------------------------------------------------------

def test_a_delivery_is_posted_over_https_signed_over_its_message_id(kafka, unique, tmp_path, receivers, certificate):
    server_tls, client_tls = tls_contexts(certificate)
    hook = receivers(tls=server_tls)
    [topic] = delivery_topics(kafka, unique, "signed")
    store = webhook_store(tmp_path, ("p1", "s1", topic, f"https://{TLS_HOST}:{hook.port}/hook?x=1"))
    publish(kafka, topic, "p-plain", ["m0"])  # a profile of the topic without a webhook: not POSTed
    publish(kafka, topic, "p1", ["m1"])
    d = dispatcher(store, kafka, resolve=loopback, tls=client_tls)
    try:
        until(lambda: hook.delivered, lambda: f"POSTs: {hook.posts}")
    finally:
        d.stop()
    [(headers, body)] = hook.posts
    assert body == b"<nitf><hl1>m1</hl1></nitf>" and headers["Content-Type"] == "application/xml"
    assert headers["Host"] == f"{TLS_HOST}:{hook.port}"  # the URL's host, though 127.0.0.1 was connected to
    assert (headers["X-Onyx-Profile-Id"], headers[MESSAGE_ID_HEADER], headers["X-Onyx-Delivery"]) == (
        "p1", "m1", f"{topic}/0/1")
    assert headers[SIGNATURE_HEADER] == sign(SECRET, headers[TIMESTAMP_HEADER], "m1", body)
    assert genuine(SECRET, headers, body)
    assert not genuine(SECRET, headers | {MESSAGE_ID_HEADER: "m2"}, body)  # a replay passed off as a new message
    assert not genuine(SECRET, headers | {TIMESTAMP_HEADER: str(int(headers[TIMESTAMP_HEADER]) + 1)}, body)
    assert d.counts == {"posted": 1, "retried": 0, "dead_lettered": 0}


def test_a_record_for_several_profiles_is_posted_once_per_profile_with_a_webhook(kafka, unique, tmp_path,
                                                                                  receivers):
    """A broker's one record for every profile of a topic that matched (``onyx-profiles``): one
    POST per listed profile with a webhook, the body as for a record of its own; a reference
    names the profile it is POSTed for. The record is committed past once all its POSTs are done."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    hook = receivers()
    [topic] = delivery_topics(kafka, unique, "shared")
    url = f"http://127.0.0.1:{hook.port}/x"
    store = webhook_store(tmp_path, ("p1", "s1", topic, url), ("p3", "s1", topic, url), ("r1", "s1", topic, url))
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b"<nitf><hl1>m1</hl1></nitf>", b"p1",
                     headers=[("onyx-message-id", b"m1"), (packets.PROFILES, b"p1,p2,p3")])  # p2: no webhook
    producer.produce(topic, packets.reference("m2", "news", "r0"), b"r0",
                     headers=[("onyx-message-id", b"m2"), ("onyx-source", b"news"), (packets.PROFILES, b"r0,r1"),
                              (packets.DELIVERY, packets.REFERENCE)])
    assert producer.flush(30) == 0
    d = dispatcher(store, kafka)
    try:
        until(lambda: len(hook.delivered) >= 3, lambda: f"POSTs: {hook.posts}")
        time.sleep(0.5)  # nothing more comes
    finally:
        d.stop()
    posts = sorted((h["X-Onyx-Profile-Id"], h[MESSAGE_ID_HEADER], h["Content-Type"], b) for h, b in hook.posts)
    assert posts == [("p1", "m1", "application/xml", b"<nitf><hl1>m1</hl1></nitf>"),
                     ("p3", "m1", "application/xml", b"<nitf><hl1>m1</hl1></nitf>"),
                     ("r1", "m2", "application/json", packets.reference("m2", "news", "r1"))]
    assert all(genuine(SECRET, h, b) for h, b in hook.posts)
    group = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"{GROUP}-{store.identity()}"})
    try:
        [committed] = group.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        group.close()
    assert committed.offset == 2


# -- retries and dead letters ------------------------------------------------------------------

def test_failures_are_retried_then_dead_lettered_and_a_retry_that_succeeds_is_not(kafka, unique, tmp_path,
                                                                                   receivers):
    failing, flaky = receivers([503, 500, 502]), receivers([500, 204])
    bad, good = delivery_topics(kafka, unique, "failing", "flaky")
    store = webhook_store(tmp_path, ("p1", "s1", bad, f"http://127.0.0.1:{failing.port}/x"),
                          ("p2", "s2", good, f"http://127.0.0.1:{flaky.port}/x"))
    publish(kafka, bad, "p1", ["m1"])
    publish(kafka, good, "p2", ["m2"])
    d = dispatcher(store, kafka)
    try:
        until(lambda: d.counts["dead_lettered"] and flaky.delivered, lambda: f"{d.counts}")
    finally:
        d.stop()
    [letter] = dead_letters(kafka, bad)
    headers = dict(letter.headers())
    reason = headers[packets.REASON].decode()
    assert (letter.key(), letter.value()) == (b"p1", b"<nitf><hl1>m1</hl1></nitf>")
    assert "failed 3 times" in reason and "HTTP 502" in reason and headers["onyx-message-id"] == b"m1"
    assert len(failing.posts) == 3 and len(flaky.posts) == 2 and dead_letters(kafka, good) == []
    assert d.counts == {"posted": 1, "retried": 3, "dead_lettered": 1}


# -- one subscriber cannot hold up another -------------------------------------------------------

def test_a_hanging_receiver_holds_up_only_its_own_subscriber_and_loses_nothing(kafka, unique, tmp_path, receivers):
    hanging, healthy, newcomer = receivers(), receivers(), receivers()
    hanging.open.clear()
    a_topic, b_topic, c_topic = delivery_topics(kafka, unique, "a", "b", "c")
    store = webhook_store(tmp_path, ("pa", "sa", a_topic, f"http://127.0.0.1:{hanging.port}/a"),
                          ("pb", "sb", b_topic, f"http://127.0.0.1:{healthy.port}/b"))
    # Each of A's deliveries hangs at least 6 s (3 attempts of 2 s) while its receiver hangs: 120 s
    # for all, more than B's liveness bound, so B cannot be waiting behind them. Small lanes, so
    # both subscribers' partitions are paused and resumed on the way.
    a_ids, b_ids = [f"a{i}" for i in range(20)], [f"b{i}" for i in range(20)]
    d = dispatcher(store, kafka, workers=2, queue_size=3, attempts=3, timeout=2)
    try:
        publish(kafka, a_topic, "pa", a_ids)
        until(lambda: hanging.hung, lambda: "subscriber A's receiver never got a POST")
        publish(kafka, b_topic, "pb", b_ids)
        until(lambda: len(healthy.delivered) == len(b_ids), lambda: f"B got {healthy.ids()} of {b_ids}", bound=30)
        assert healthy.ids() == b_ids and hanging.delivered == []  # all of B's, in order, while A hangs

        # a webhook registered meanwhile: the consumer's partitions are assigned anew (A's paused one too)
        add_webhooks(store, ("pc", "sc", c_topic, f"http://127.0.0.1:{newcomer.port}/c"))
        publish(kafka, c_topic, "pc", ["c0"])
        until(lambda: newcomer.delivered, lambda: "C's delivery never arrived", bound=30)
        assert hanging.delivered == []

        hanging.open.set()  # A's receiver recovers: each of A's deliveries arrives, or is a dead letter

        def accounted() -> set[str]:
            return set(hanging.ids()) | {dict(m.headers())["onyx-message-id"].decode()
                                         for m in dead_letters(kafka, a_topic)}

        until(lambda: len(set(hanging.ids())) + d.counts["dead_lettered"] >= len(a_ids),
              lambda: f"A: {hanging.ids()} and {d.counts}")
        until(lambda: accounted() >= set(a_ids), lambda: f"A's deliveries accounted for: {sorted(accounted())}")
    finally:
        d.stop()
    reasons = [dict(m.headers())[packets.REASON].decode() for m in dead_letters(kafka, a_topic)]
    # the last attempt timed out, or was the one the receiver answered as it recovered
    assert all(re.search(r"failed 3 times \(last: (timed out|HTTP 503 .*)\)$", r) for r in reasons), reasons


def test_a_rate_limited_subscriber_holds_no_worker_and_its_deliveries_wait(kafka, unique, tmp_path, receivers):
    from confluent_kafka import Consumer, TopicPartition

    limited, other = receivers(), receivers()
    a_topic, b_topic = delivery_topics(kafka, unique, "limited", "other")
    store = webhook_store(tmp_path, ("pa", "sa", a_topic, f"http://127.0.0.1:{limited.port}/a"),
                          ("pb", "sb", b_topic, f"http://127.0.0.1:{other.port}/b"))
    # one worker for everyone, and one POST an hour per subscriber: A's second waits for an hour
    d = dispatcher(store, kafka, workers=1, limiter=RateLimiter(1 / 3600, 1))
    try:
        publish(kafka, a_topic, "pa", ["a0", "a1"])
        until(lambda: limited.delivered, lambda: "A's first delivery never arrived")
        publish(kafka, b_topic, "pb", ["b0"])
        until(lambda: other.delivered, lambda: "B waited for A's rate limit")
        assert limited.ids() == ["a0"]
    finally:
        d.stop()
    group = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"{GROUP}-{store.identity()}"})
    try:
        committed = group.committed([TopicPartition(a_topic, 0), TopicPartition(b_topic, 0)], timeout=30)
    finally:
        group.close()
    assert [tp.offset for tp in committed] == [1, 1]  # a1 is not dropped: the next start sends it


def test_a_restarted_dispatcher_sends_on_from_the_committed_offsets(kafka, unique, tmp_path, receivers):
    hook = receivers([204, 204, 204, 503])  # m3 fails until the receiver is mended
    [topic] = delivery_topics(kafka, unique, "restart")
    # a profile from before subscribers existed (no subscriber id): such profiles share one lane
    store = webhook_store(tmp_path, ("p1", None, topic, f"http://127.0.0.1:{hook.port}/x"))
    publish(kafka, topic, "p1", ["m0", "m1", "m2", "m3"])
    first = dispatcher(store, kafka, attempts=1000)
    try:
        until(lambda: hook.ids("posts").count("m3") >= 2, lambda: f"POSTs: {hook.ids('posts')}")
    finally:
        first.stop()  # with m3 waiting for its next attempt
    assert hook.ids() == ["m0", "m1", "m2"]
    hook.statuses = [204]
    publish(kafka, topic, "p1", ["m4", "m5"])
    second = dispatcher(store, kafka)
    try:
        until(lambda: len(hook.delivered) >= 6, lambda: f"delivered: {hook.ids()}")
    finally:
        second.stop()
    assert hook.ids() == ["m0", "m1", "m2", "m3", "m4", "m5"]  # none POSTed again, m3 not lost


# -- the address POSTed to -----------------------------------------------------------------------

def test_a_name_that_turns_to_loopback_after_the_check_gets_no_connection_there(receivers):
    inside = receivers()
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])  # public for the check, loopback right after
    asked = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    target = resolve_checked(f"http://rebind.onyx.test:{inside.port}/hook", allow_private=False, resolve=rebinding)
    # Pinned: the POST connects to target.addresses and to nothing else (the next test shows it on
    # loopback; nothing here connects to the public address, tests stay off the network).
    assert target.addresses == ("93.184.215.14",) and asked == ["rebind.onyx.test"] and inside.posts == []
    with pytest.raises(WebhookRefusedError) as refused:  # the next POST's lookup: refused, the address unnamed
        resolve_checked(f"http://rebind.onyx.test:{inside.port}/hook", allow_private=False, resolve=rebinding)
    assert "rebind.onyx.test" in str(refused.value) and "127.0.0.1" not in str(refused.value)


def test_each_post_connects_to_the_address_it_checked_also_when_private_ones_are_allowed(receivers):
    checked = receivers(host="127.0.0.2")
    elsewhere = receivers(host="127.0.0.1", port=checked.port)
    answers = iter([["127.0.0.2"], ["127.0.0.1"]])
    target = resolve_checked(f"http://pinned.onyx.test:{checked.port}/hook", allow_private=True,
                             resolve=lambda host, port: next(answers))
    post(target, b"<nitf/>", {}, timeout=30)
    assert len(checked.posts) == 1 and elsewhere.posts == []
    assert checked.posts[0][0]["Host"] == f"pinned.onyx.test:{checked.port}"


def test_https_checks_the_certificate_against_the_urls_host_not_the_address(receivers, certificate):
    server_tls, client_tls = tls_contexts(certificate)
    names = []
    server_tls.sni_callback = lambda sock, name, context: names.append(name)
    hook = receivers(tls=server_tls)
    post(resolve_checked(f"https://{TLS_HOST}:{hook.port}/", True, loopback), b"<nitf/>", {}, 30, client_tls)
    with pytest.raises(ssl.SSLCertVerificationError):  # same address, a name the certificate is not for
        post(resolve_checked(f"https://other.onyx.test:{hook.port}/", True, loopback), b"<nitf/>", {}, 30,
             client_tls)
    assert names == [TLS_HOST, "other.onyx.test"] and len(hook.posts) == 1


# -- refused addresses ---------------------------------------------------------------------------

REFUSED = {
    "::127.0.0.1": "IPv4-compatible", "::ffff:127.0.0.1": "IPv4-mapped", "::ffff:0:a9fe:a9fe": "IPv4-translated",
    "64:ff9b::a9fe:a9fe": "NAT64", "64:ff9b:1::a9fe:a9fe": "NAT64 local-use", "2002:a9fe:a9fe::1": "6to4",
    "2001:0:a9fe:a9fe::1": "Teredo", "0.0.0.0": "unspecified", "::": "unspecified", "fe80::1%eth0": "zone id",
    "ff02::1": "multicast", "224.0.0.1": "multicast", "127.0.0.1": "loopback", "::1": "loopback",
    "10.1.2.3": "private", "fc00::1": "unique local", "169.254.169.254": "cloud metadata", "100.64.0.1": "shared",
}


def _addresses_in(text: str) -> list[str]:
    found = []
    for token in re.findall(r"[0-9A-Fa-f:.%]*[:.][0-9A-Fa-f:.%]*", text):
        with contextlib.suppress(ValueError):
            found.append(str(ipaddress.ip_address(token.strip(".:").split("%")[0])))
    return found


@pytest.mark.parametrize("address", REFUSED, ids=[f"{a} ({why})" for a, why in REFUSED.items()])
def test_a_webhook_host_with_a_refused_address_is_refused_without_naming_it(address):
    with pytest.raises(WebhookRefusedError) as refused:  # a name answering a public address and this one
        check_url("https://hooks.example.org/onyx", allow_private=False,
                  resolve=lambda host, port: ["93.184.215.14", address])
    assert "hooks.example.org" in str(refused.value) and _addresses_in(str(refused.value)) == []
    literal = f"[{address.replace('%', '%25')}]" if ":" in address else address
    with pytest.raises(WebhookRefusedError):  # the address itself as the URL's host
        check_url(f"http://{literal}/onyx", allow_private=False)


def test_public_addresses_are_accepted():
    for address in ("93.184.215.14", "2606:4700::6810:85e5"):
        check_url("https://hooks.example.org/onyx", allow_private=False, resolve=lambda host, port: [address])
