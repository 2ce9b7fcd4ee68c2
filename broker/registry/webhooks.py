"""Webhooks: a profile's deliveries POSTed to a URL its subscriber gave at registration
(``"delivery": {"webhook": "https://..."}``).

* **Signed.** Each POST carries ``X-Onyx-Signature: sha256=<hex>``, the HMAC-SHA256 of
  ``<X-Onyx-Timestamp>.<body>`` under the profile's webhook secret (returned once, as
  ``webhook_secret``, by ``POST /profiles``); the receiver recomputes it (:func:`sign`) and
  refuses a timestamp too old, so a captured POST cannot be replayed later.
* **Retried, then dead-lettered.** A POST that fails (no answer within ``ONYX_WEBHOOK_TIMEOUT``,
  or a status other than 2xx) is sent again after ``ONYX_WEBHOOK_BACKOFF`` seconds, doubling each
  time, ``ONYX_WEBHOOK_ATTEMPTS`` times in all; then the delivery record goes to
  ``onyx.dead-letter`` with the reason in ``onyx-reason`` (and ``onyx-origin``: its delivery
  topic). The service writes nowhere else: the dead-letter topic is fixed, the delivery topic is
  only read.
* **Rate-limited** per subscriber (``ONYX_WEBHOOK_RATE``, ``ONYX_WEBHOOK_BURST``): past it the
  deliveries wait, none is dropped.
* **No internal hosts.** A URL must be http(s) and every address its host resolves to must be
  public: loopback, private, link-local, multicast and reserved ranges are refused at
  registration (422) and again before each POST (a name may resolve elsewhere later), unless
  the operator allows them (``ONYX_WEBHOOK_ALLOW_PRIVATE``). Redirects are not followed.

Delivery is at least once: the dispatcher's Kafka consumer group (``onyx-webhooks-<database id>``) commits a
record's offset once it was POSTed or dead-lettered, so a restarted service sends on from
there; ``X-Onyx-Message-Id`` lets a receiver drop a repeat.

>>> sign("s3cret", "1764115200", b"<nitf/>")
'sha256=97516c6934a99541b03ce51a57bdee68b3305c9f367b0cd83c79046c85a87a03'
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from broker import config, packets, topics
from broker.registry.limits import RateLimited, RateLimiter
from broker.registry.store import Store, WebhookRecord

SIGNATURE_HEADER = "X-Onyx-Signature"
TIMESTAMP_HEADER = "X-Onyx-Timestamp"
GROUP = "onyx-webhooks"  # and the store's identity: services on one Kafka do not share the group
log = logging.getLogger("onyx.webhooks")


class WebhookRefusedError(ValueError):
    """A webhook URL the service will not POST to; the message says why and what to do."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Onyx-Signature`` of a POST: HMAC-SHA256 of ``<timestamp>.<body>`` under ``secret``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def check_url(url: str, allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE) -> None:
    """Return if the service may POST to ``url``, else :class:`WebhookRefusedError`.

    >>> check_url("ftp://example.org/x")
    Traceback (most recent call last):
    ...
    broker.registry.webhooks.WebhookRefusedError: a webhook URL is http:// or https://, not 'ftp://example.org/x'
    >>> check_url("http://127.0.0.1:9/hook")
    Traceback (most recent call last):
    ...
    broker.registry.webhooks.WebhookRefusedError: webhook host 127.0.0.1 resolves to 127.0.0.1, a loopback, private, link-local or reserved address: give a public URL (an operator may allow such addresses with ONYX_WEBHOOK_ALLOW_PRIVATE)
    >>> check_url("http://127.0.0.1:9/hook", allow_private=True)
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefusedError(f"a webhook URL is http:// or https://, not {url!r}")
    if parts.username or parts.password:
        raise WebhookRefusedError("a webhook URL carries no user or password: the signature authenticates the POST")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as exc:
        raise WebhookRefusedError(f"webhook host {parts.hostname} does not resolve ({exc}): give a URL whose "
                                  "host the service can reach") from None
    if allow_private:
        return
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if not address.is_global or address.is_multicast:
            raise WebhookRefusedError(
                f"webhook host {parts.hostname} resolves to {address}, a loopback, private, link-local or reserved "
                "address: give a public URL (an operator may allow such addresses with ONYX_WEBHOOK_ALLOW_PRIVATE)")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # a redirect could lead to an internal host
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def post(hook: WebhookRecord, body: bytes, headers: dict[str, str], timeout: float) -> None:
    """One signed POST of ``body`` to ``hook``; raises on anything but a 2xx answer."""
    stamp = str(int(time.time()))
    request = urllib.request.Request(hook.url, body, method="POST", headers={
        "Content-Type": "application/xml", "User-Agent": "onyx-webhooks", TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(hook.secret, stamp, body), **headers})
    with _opener.open(request, timeout=timeout) as answer:
        answer.read()


class Dispatcher:
    """Reads the delivery topics of the profiles with a webhook and POSTs their deliveries (a
    daemon thread; :meth:`start`, :meth:`stop`). The webhooks are read from the store every
    ``refresh`` seconds, so one registered a moment ago is served from its first delivery."""

    def __init__(self, store: Store, bootstrap: str, *, allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE,
                 attempts: int = config.WEBHOOK_ATTEMPTS, backoff: float = config.WEBHOOK_BACKOFF_S,
                 timeout: float = config.WEBHOOK_TIMEOUT_S, limiter: RateLimiter | None = None,
                 refresh: float = 1.0) -> None:
        self.store, self.bootstrap = store, bootstrap
        self.allow_private, self.attempts, self.backoff, self.timeout = allow_private, attempts, backoff, timeout
        self.limiter = limiter or RateLimiter(config.WEBHOOK_RATE, config.WEBHOOK_BURST)
        self.refresh = refresh
        self.hooks: dict[str, WebhookRecord] = {}
        self.counts = {"posted": 0, "retried": 0, "dead_lettered": 0}  # since the service started (/metrics)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="onyx-webhooks", daemon=True)

    def start(self) -> "Dispatcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def profiles(self) -> set[str]:
        """The ids of the profiles with a webhook (as last read from the store)."""
        return set(self.hooks)

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, Producer

        from broker.kafka_auth import librdkafka_options

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{GROUP}-{self.store.identity()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "topic.metadata.refresh.interval.ms": 2000,
                             **librdkafka_options()})
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", **librdkafka_options()})
        subscribed: set[str] = set()
        checked = 0.0
        read_at = 0.0  # wall-clock time of the last read of the webhooks
        try:
            while not self._stop.is_set():
                if time.monotonic() - checked >= self.refresh:
                    checked = time.monotonic()
                    read_at = self._read_hooks()
                    wanted = {h.delivery_topic for h in self.hooks.values()}
                    if wanted != subscribed:
                        if wanted:
                            consumer.subscribe(sorted(wanted))
                        else:
                            consumer.unsubscribe()
                        subscribed = wanted
                if not subscribed:
                    self._stop.wait(0.2)
                    continue
                try:
                    batch = [m for m in consumer.consume(100, timeout=0.2) if m.error() is None]
                    if any((m.key() or b"").decode(errors="replace") not in self.hooks
                           and m.timestamp()[1] / 1000 >= read_at for m in batch):
                        # written after the last read: maybe for a webhook registered since (one read a batch)
                        read_at = self._read_hooks()
                    for m in batch:
                        hook = self.hooks.get((m.key() or b"").decode(errors="replace"))
                        if hook is not None and hook.delivery_topic == m.topic():
                            self._deliver(hook, m, producer)
                    if batch:
                        consumer.commit(asynchronous=False)
                except KafkaException as exc:  # Kafka away, say: what was not committed is read again
                    log.warning("webhook dispatcher: %s; trying again", exc)
                    self._stop.wait(1.0)
        finally:
            producer.flush(10)
            consumer.close()

    def _read_hooks(self) -> float:
        """Read the webhooks from the store (keeping the ones known if it fails); when."""
        at = time.time()
        try:
            self.hooks = {h.profile_id: h for h in self.store.webhooks()}
        except Exception as exc:  # the database away: the webhooks known stay served
            log.warning("cannot read the webhooks: %s", exc)
        return at

    def _deliver(self, hook: WebhookRecord, m, producer) -> None:
        """POST one delivery, with retries; dead-letter it if every attempt failed."""
        headers = dict(m.headers() or ())
        message_id = headers.get("onyx-message-id", b"").decode(errors="replace")
        extra = {"X-Onyx-Profile-Id": hook.profile_id, "X-Onyx-Message-Id": message_id,
                 "X-Onyx-Delivery": f"{m.topic()}/{m.partition()}/{m.offset()}"}
        while True:
            try:
                self.limiter.charge(hook.subscriber_id, 1)
                break
            except RateLimited as exc:
                if self._stop.wait(exc.retry_after):
                    return
        last = ""
        for attempt in range(self.attempts):
            if attempt:
                if self._stop.wait(self.backoff * 2 ** (attempt - 1)):
                    return
            self.counts["retried"] += bool(attempt)
            try:
                check_url(hook.url, self.allow_private)
                post(hook, m.value() or b"", extra, self.timeout)
                self.counts["posted"] += 1
                return
            except WebhookRefusedError as exc:
                last = str(exc)
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} {exc.reason}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(getattr(exc, "reason", exc))
        reason = (f"webhook {hook.url} of profile {hook.profile_id} failed {self.attempts} times "
                  f"(last: {last})")
        log.warning("%s: dead-lettered", reason)
        _, key, value, out = packets.dead_letter(reason, m.topic(), m.key(), m.value(), list(headers.items()))
        producer.produce(topics.DEAD_LETTER, value, key, headers=out)
        producer.flush(10)
        self.counts["dead_lettered"] += 1
