"""Webhooks: a profile's deliveries POSTed to a URL its subscriber gave at registration
(``"delivery": {"webhook": "https://..."}``).

* **Signed.** Each POST carries ``X-Onyx-Signature: sha256=<hex>``, the HMAC-SHA256 of
  ``<X-Onyx-Timestamp>.<X-Onyx-Message-Id>\\n<body>`` under the profile's webhook secret
  (returned once, as ``webhook_secret``, by ``POST /profiles``); the receiver recomputes it
  (:func:`sign`), refuses a timestamp too old, so a captured POST cannot be replayed later, and
  de-duplicates by the message id, which the signature covers so that a replayed body cannot
  pass for a new message. A newline ends the message id: the header cannot hold one, so no id
  and body can be cut apart differently under the same signature.
* **Retried, then dead-lettered.** A POST that fails (no answer within ``ONYX_WEBHOOK_TIMEOUT``,
  or a status other than 2xx) is sent again after ``ONYX_WEBHOOK_BACKOFF`` seconds, doubling each
  time, ``ONYX_WEBHOOK_ATTEMPTS`` times in all; then the delivery record goes to
  ``onyx.dead-letter`` with the reason in ``onyx-reason`` (and ``onyx-origin``: its delivery
  topic). The service writes nowhere else: the dead-letter topic is fixed, the delivery topic is
  only read.
* **One subscriber cannot hold up another.** One Kafka consumer reads the delivery topics into
  a bounded queue per subscriber (``ONYX_WEBHOOK_QUEUE``; when one is full the consumer pauses
  that subscriber's partitions, nobody else's), served by ``ONYX_WEBHOOK_WORKERS`` workers with at
  most one POST in flight per subscriber (:mod:`broker.registry.webhook_lanes`): a receiver that
  hangs holds one worker, a delivery waiting for its retry or its subscriber's rate limit
  (``ONYX_WEBHOOK_RATE``, ``ONYX_WEBHOOK_BURST``: past it deliveries wait, none is dropped) holds
  none. A subscriber's deliveries are POSTed in the order of their partition.
* **No internal hosts** (:mod:`broker.registry.webhook_targets`): only http(s) URLs whose host
  resolves to public addresses, checked at registration (422) and at each POST, which connects
  to the address it checked; redirects are not followed (``ONYX_WEBHOOK_ALLOW_PRIVATE`` lifts the
  address rule for a single machine or the tests).

* **One POST per profile.** A delivery record may be for several profiles of its topic (its
  ``onyx-profiles`` header, ``docs/deliveries.md``): each of them with a webhook gets its own POST
  (``X-Onyx-Profile-Id``), and the record counts as done once all of them are. A record by
  reference is POSTed as its JSON (``application/json``), its ``href`` naming the profile.

Delivery is at least once: the dispatcher's Kafka consumer group (``onyx-webhooks-<database id>``)
commits a partition's offset only past records that were POSTed or dead-lettered, so a
restarted service sends on from there; ``X-Onyx-Message-Id`` lets a receiver drop a repeat.

>>> sign("s3cret", "1764115200", "src-0-41", b"<nitf/>")
'sha256=b911be15a965353473055241dba9ef463ecbf3b1bddb066fa94c90b1afe0310c'
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import queue
import ssl
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field

from broker import config, packets, topics
from broker.registry.limits import RateLimited, RateLimiter
from broker.registry.store import Store, WebhookRecord
from broker.registry.webhook_lanes import Lanes
from broker.registry.webhook_targets import (PostFailed, Resolve, WebhookRefusedError, check_url, post,
                                             resolve_checked, system_resolve)

__all__ = ["Dispatcher", "WebhookRefusedError", "check_url", "sign", "message_id_header",
           "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "MESSAGE_ID_HEADER"]

SIGNATURE_HEADER = "X-Onyx-Signature"
TIMESTAMP_HEADER = "X-Onyx-Timestamp"
MESSAGE_ID_HEADER = "X-Onyx-Message-Id"
GROUP = "onyx-webhooks"  # and the store's identity: services on one Kafka do not share the group
log = logging.getLogger("onyx.webhooks")

# Visible ASCII but '%': what a message id may hold in a header as it is.
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def sign(secret: str, timestamp: str, message_id: str, body: bytes) -> str:
    """The ``X-Onyx-Signature`` of a POST: HMAC-SHA256 of ``<timestamp>.<message id>\\n<body>``
    under ``secret``, the message id as sent in ``X-Onyx-Message-Id`` (see the module's example)."""
    signed = f"{timestamp}.{message_id}\n".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def message_id_header(raw: bytes) -> str:
    """A delivery's ``onyx-message-id`` as the ``X-Onyx-Message-Id`` header: as it is, except that
    bytes a header cannot carry (controls, spaces, non-ASCII) and ``%`` are percent-encoded, since
    a publisher may give any id.

    >>> message_id_header(b"src-0-41"), message_id_header(b"a b\\r\\n%")
    ('src-0-41', 'a%20b%0D%0A%25')
    """
    return urllib.parse.quote_from_bytes(raw, safe=_HEADER_SAFE)


@dataclass
class _Delivery:
    """A delivery record in its subscriber's lane, and how far its POSTs got."""

    topic: str
    partition: int
    offset: int
    profile_id: str
    value: bytes
    headers: list[tuple[str, bytes]]
    charged: bool = False  # counted against the subscriber's rate limit
    attempts: int = 0
    last: str = ""  # why the last attempt failed


@dataclass
class _Partition:
    pending: deque[int] = field(default_factory=deque)  # offsets taken, in order, not all finished
    finished: set[int] = field(default_factory=set)
    next: int = 0  # the offset after the last one taken
    committed: int = -1
    parts: dict[int, int] = field(default_factory=dict)  # offset -> POSTs not finished, where more than one


class Offsets:
    """What the dispatcher may commit: per partition, the first offset taken but not finished
    (records are finished out of order across subscribers, so a later one may be finished
    first). After a rebalance the consumer reads on from :meth:`position`; a record read again
    anyway is recognised (:meth:`seen`) and not taken twice.

    >>> o = Offsets()
    >>> for n in (5, 6, 7):
    ...     o.take(("t", 0), n)
    >>> o.finish(("t", 0), 6); o.to_commit()
    [(('t', 0), 5)]
    >>> o.finish(("t", 0), 5); o.to_commit(), o.seen(("t", 0), 7)
    ([(('t', 0), 7)], True)
    >>> o.take(("t", 0), 8, parts=2); o.finish(("t", 0), 7); o.finish(("t", 0), 8); o.to_commit()
    [(('t', 0), 8)]
    >>> o.finish(("t", 0), 8); o.to_commit()
    [(('t', 0), 9)]
    """

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], _Partition] = {}

    def position(self, tp: tuple[str, int], default: int) -> int:
        """Where to read ``tp`` on from: after the last record taken (``default`` if none was)."""
        p = self._partitions.get(tp)
        return p.next if p is not None else default

    def seen(self, tp: tuple[str, int], offset: int) -> bool:
        """Whether ``offset`` was taken already."""
        p = self._partitions.get(tp)
        return p is not None and offset < p.next

    def take(self, tp: tuple[str, int], offset: int, parts: int = 1) -> None:
        """A record read, in the partition's order: not committed past until finished, that is
        until :meth:`finish` was called ``parts`` times for it (a POST per profile it is for)."""
        p = self._partitions.setdefault(tp, _Partition())
        p.pending.append(offset)
        p.next = offset + 1
        if parts > 1:
            p.parts[offset] = parts

    def finish(self, tp: tuple[str, int], offset: int) -> None:
        """A part of a record taken is done with (POSTed, dead-lettered, or not for a webhook)."""
        p = self._partitions[tp]
        left = p.parts.get(offset, 1) - 1
        if left > 0:
            p.parts[offset] = left
            return
        p.parts.pop(offset, None)
        p.finished.add(offset)

    def to_commit(self) -> list[tuple[tuple[str, int], int]]:
        """The partitions whose commit point moved since :meth:`committed`, and where to."""
        moved = []
        for tp, p in self._partitions.items():
            while p.pending and p.pending[0] in p.finished:
                p.finished.discard(p.pending.popleft())
            point = p.pending[0] if p.pending else p.next
            if point > p.committed:
                moved.append((tp, point))
        return moved

    def committed(self, points: list[tuple[tuple[str, int], int]]) -> None:
        """Kafka has these commit points now."""
        for tp, point in points:
            self._partitions[tp].committed = point


class Dispatcher:
    """Reads the delivery topics of the profiles with a webhook and POSTs their deliveries: one
    consumer thread, ``workers`` POSTing threads (:meth:`start`, :meth:`stop`). The webhooks are
    read from the store every ``refresh`` seconds, so one registered a moment ago is served from
    its first delivery. ``resolve`` and ``tls`` are the host lookup and the https trust (tests
    give their own); ``counts`` are the totals since start (``/metrics``)."""

    def __init__(self, store: Store, bootstrap: str, *, allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE,
                 attempts: int = config.WEBHOOK_ATTEMPTS, backoff: float = config.WEBHOOK_BACKOFF_S,
                 timeout: float = config.WEBHOOK_TIMEOUT_S, limiter: RateLimiter | None = None,
                 workers: int = config.WEBHOOK_WORKERS, queue_size: int = config.WEBHOOK_QUEUE,
                 refresh: float = 1.0, resolve: Resolve = system_resolve, tls: ssl.SSLContext | None = None) -> None:
        if workers < 1 or queue_size < 1 or attempts < 1:
            raise ValueError(f"webhooks need at least one worker, a queue of one and one attempt, not {workers}, "
                             f"{queue_size} and {attempts}: see ONYX_WEBHOOK_WORKERS, ONYX_WEBHOOK_QUEUE and "
                             "ONYX_WEBHOOK_ATTEMPTS")
        self.store, self.bootstrap = store, bootstrap
        self.allow_private, self.attempts, self.backoff, self.timeout = allow_private, attempts, backoff, timeout
        self.limiter = limiter or RateLimiter(config.WEBHOOK_RATE, config.WEBHOOK_BURST)
        self.refresh, self.resolve, self.tls = refresh, resolve, tls
        self.hooks: dict[str, WebhookRecord] = {}
        self.counts = {"posted": 0, "retried": 0, "dead_lettered": 0}  # since the service started (/metrics)
        self._counting = threading.Lock()
        self._lanes: Lanes[_Delivery] = Lanes(queue_size)
        self._finished: queue.SimpleQueue[tuple[tuple[str, int], int]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._producer = None  # for dead letters, made by start()
        self._thread = threading.Thread(target=self._run, name="onyx-webhooks", daemon=True)
        self._workers = [threading.Thread(target=self._work, name=f"onyx-webhooks-{i}", daemon=True)
                         for i in range(workers)]

    def start(self) -> "Dispatcher":
        from confluent_kafka import Producer

        from broker.kafka_auth import librdkafka_options

        self._producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", **librdkafka_options()})
        for worker in self._workers:
            worker.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading and POSTing; what was not POSTed or dead-lettered is sent after a restart."""
        self._stop.set()
        self._lanes.close()
        self._thread.join(self.timeout + 30)  # a POST in flight ends within the timeout

    def profiles(self) -> set[str]:
        """The ids of the profiles with a webhook (as last read from the store)."""
        return set(self.hooks)

    # -- the consumer thread: records into lanes, offsets committed --------------------------

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        from broker.kafka_auth import librdkafka_options

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{GROUP}-{self.store.identity()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "topic.metadata.refresh.interval.ms": 2000,
                             **librdkafka_options()})
        offsets = Offsets()
        paused: dict[tuple[str, int], str | None] = {}  # partition -> the full lane it waits for
        subscribed: set[str] = set()

        def assigned(_, partitions) -> None:
            # a rebalance (the webhooks changed): go on where this consumer is, not where the group
            # committed, and keep the partitions of full lanes paused (Kafka may or may not have)
            for p in partitions:
                p.offset = offsets.position((p.topic, p.partition), p.offset)
            consumer.assign(partitions)
            held = [p for p in partitions if (p.topic, p.partition) in paused]
            if held:
                consumer.pause(held)

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
                            consumer.subscribe(sorted(wanted), on_assign=assigned)
                        else:
                            consumer.unsubscribe()
                        subscribed = wanted
                try:
                    if subscribed:
                        batch = [m for m in consumer.consume(100, timeout=0.2) if m.error() is None]
                        if any(m.timestamp()[1] / 1000 >= read_at
                               and not any(p in self.hooks for p in packets.profile_ids(m.key(), m.headers()))
                               for m in batch):
                            # written after the last read: maybe for a webhook registered since (one read a batch)
                            read_at = self._read_hooks()
                        for m in batch:
                            self._take(consumer, m, offsets, paused)
                    else:
                        self._stop.wait(0.2)
                    self._settle(consumer, offsets, paused)
                except KafkaException as exc:  # Kafka away, say: what was not committed is read again
                    log.warning("webhook dispatcher: %s; trying again", exc)
                    self._stop.wait(1.0)
        finally:
            self._lanes.close()
            for worker in self._workers:
                worker.join(self.timeout + 10)
            try:
                self._settle(consumer, offsets, {})
            except KafkaException as exc:
                log.warning("webhook dispatcher: last commit failed (%s): a restart sends those again", exc)
            consumer.close()
            self._producer.flush(10)

    def _take(self, consumer, m, offsets: Offsets, paused: dict[tuple[str, int], str | None]) -> None:
        """Queue record ``m`` in its subscriber's lane; if that lane is full, pause the partition
        and seek back to ``m``: it and what follows it are read again once the partition is resumed
        (any read before that, already fetched, is ignored)."""
        from confluent_kafka import KafkaException, TopicPartition

        tp = (m.topic(), m.partition())
        if tp in paused or offsets.seen(tp, m.offset()):
            return
        headers = list(m.headers() or ())
        hooks = [hook for pid in packets.profile_ids(m.key(), headers)
                 if (hook := self.hooks.get(pid)) is not None and hook.delivery_topic == m.topic()]
        if not hooks:  # for profiles without a webhook
            offsets.take(tp, m.offset())
            offsets.finish(tp, m.offset())
            return
        full = next((hook.subscriber_id for hook in hooks if self._lanes.full(hook.subscriber_id)), None)
        if full is not None:
            try:
                consumer.pause([TopicPartition(*tp)])
                consumer.seek(TopicPartition(*tp, m.offset()))
                paused[tp] = full
                return
            except KafkaException as exc:  # then the lane holds more: a record read is never dropped
                log.warning("webhook dispatcher: cannot pause %s: %s", tp, exc)
        offsets.take(tp, m.offset(), parts=len(hooks))
        for hook in hooks:  # one POST per profile the record is for
            value = packets.for_profile(hook.profile_id, m.value(), headers)
            self._lanes.put(hook.subscriber_id, _Delivery(m.topic(), m.partition(), m.offset(), hook.profile_id,
                                                          value, headers))

    def _settle(self, consumer, offsets: Offsets, paused: dict[tuple[str, int], str | None]) -> None:
        """Note the records the workers finished, resume the partitions of lanes half empty
        again, and commit what moved."""
        from confluent_kafka import KafkaException, TopicPartition

        while True:
            try:
                offsets.finish(*self._finished.get_nowait())
            except queue.Empty:
                break
        for lane in {lane for lane in paused.values() if self._lanes.length(lane) <= self._lanes.capacity // 2}:
            ready = [tp for tp, waiting in paused.items() if waiting == lane]
            for tp in ready:
                del paused[tp]
            try:
                consumer.resume([TopicPartition(*tp) for tp in ready])
            except KafkaException as exc:  # revoked meanwhile: a new assignment is not paused anyway
                log.info("webhook dispatcher: resume: %s", exc)
        points = offsets.to_commit()
        if points:
            answer = consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in points], asynchronous=False)
            offsets.committed([((a.topic, a.partition), a.offset) for a in answer if a.error is None])

    def _read_hooks(self) -> float:
        """Read the webhooks from the store (keeping the ones known if it fails); when."""
        at = time.time()
        try:
            self.hooks = {h.profile_id: h for h in self.store.webhooks()}
        except Exception as exc:  # the database away: the webhooks known stay served
            log.warning("cannot read the webhooks: %s", exc)
        return at

    # -- the workers: one delivery of one lane at a time -------------------------------------

    def _work(self) -> None:
        while (taken := self._lanes.take()) is not None:
            lane, d = taken
            try:
                wait = self._attempt(d)
            except Exception:  # a bug must not strand the lane: the delivery is tried again
                log.exception("webhook dispatcher: delivery %s/%s/%s", d.topic, d.partition, d.offset)
                wait = self.backoff
            if wait is None:
                self._lanes.done(lane)
                self._finished.put(((d.topic, d.partition), d.offset))
            else:
                self._lanes.later(lane, wait)

    def _attempt(self, d: _Delivery) -> float | None:
        """One step of a delivery: ``None`` once it was POSTed or dead-lettered (or its webhook is
        gone), else the seconds to wait before the next step."""
        hook = self.hooks.get(d.profile_id)
        if hook is None or hook.delivery_topic != d.topic:  # deleted since it was read
            return None
        if not d.charged:
            try:
                self.limiter.charge(hook.subscriber_id, 1)
            except RateLimited as exc:
                return exc.retry_after
            d.charged = True
        if d.attempts:
            self._count("retried")
        d.attempts += 1
        try:
            target = resolve_checked(hook.url, self.allow_private, self.resolve)
            post(target, d.value, self._headers(hook, d), self.timeout, self.tls)
        except (WebhookRefusedError, PostFailed) as exc:
            d.last = str(exc)
        except (OSError, ValueError, http.client.HTTPException) as exc:  # ValueError: a URL http.client cannot send
            d.last = str(exc) or type(exc).__name__  # a timeout's text is empty on some paths
        else:
            self._count("posted")
            return None
        if d.attempts < self.attempts:
            return self.backoff * 2 ** (d.attempts - 1)
        return None if self._dead_letter(hook, d) else 0.0

    def _headers(self, hook: WebhookRecord, d: _Delivery) -> dict[str, str]:
        stamp = str(int(time.time()))
        message_id = message_id_header(dict(d.headers).get("onyx-message-id") or b"")
        by_reference = dict(d.headers).get(packets.DELIVERY) == packets.REFERENCE
        return {"Content-Type": "application/json" if by_reference else "application/xml",
                "User-Agent": "onyx-webhooks",
                "X-Onyx-Profile-Id": hook.profile_id, MESSAGE_ID_HEADER: message_id,
                "X-Onyx-Delivery": f"{d.topic}/{d.partition}/{d.offset}", TIMESTAMP_HEADER: stamp,
                SIGNATURE_HEADER: sign(hook.secret, stamp, message_id, d.value)}

    def _dead_letter(self, hook: WebhookRecord, d: _Delivery) -> bool:
        """Write ``d`` to the dead-letter topic; whether Kafka acknowledged it (False only when
        stopped first: then the delivery is not finished, and a restart tries it again)."""
        reason = f"webhook {hook.url} of profile {hook.profile_id} failed {self.attempts} times (last: {d.last})"
        _, key, value, headers = packets.dead_letter(reason, d.topic, d.profile_id.encode(), d.value, d.headers)
        while not self._stop.is_set():
            acked = threading.Event()
            errors: list = []
            self._producer.produce(topics.DEAD_LETTER, value, key, headers=headers,
                                   on_delivery=lambda err, _msg: (errors.append(err), acked.set()))
            while not acked.is_set() and not self._stop.is_set():
                self._producer.poll(0.5)  # another worker's poll may serve this callback: hence the event
            if acked.is_set() and errors[0] is None:
                log.warning("%s: dead-lettered", reason)
                self._count("dead_lettered")
                return True
            if errors:
                log.warning("webhook dispatcher: dead letter not written (%s); trying again", errors[0])
                self._stop.wait(self.backoff)
        return False

    def _count(self, name: str) -> None:
        with self._counting:
            self.counts[name] += 1
