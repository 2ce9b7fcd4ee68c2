"""``onyx publish`` and ``onyx subscribe``: a publisher and a subscriber of an overlay.

A publisher is any Kafka producer writing text XML to ``onyx.src.<source>``; this one
adds an ``onyx-message-id`` header (a fresh id per message) so that subscribers can
de-duplicate. A subscriber registers a profile over HTTP and reads its deliveries:
Kafka records on the profile's delivery topic keyed by its profile id. Without a
subscriber token the registration creates a subscriber, whose own delivery topic is new.

>>> [name for name, _ in messages_from([], generate=2, seed=1)]
['gen-1-0', 'gen-1-1']
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, NamedTuple

from broker import config, packets, topics

Say = Callable[[str], None]


class ApiError(RuntimeError):
    """The registration service refused a request or could not be reached."""


RATE_LIMIT_RETRIES = 5
"""How many times :func:`api` sends a request again that the service refused with 429
(a subscriber over its registration rate), each after the ``Retry-After`` it was given."""

ADMIN_TOKEN_HEADER = "X-Onyx-Admin-Token"


def operator_token(url: str) -> str | None:
    """The operator token to prove to the service at ``url``, if this machine has one:
    ONYX_ADMIN_TOKEN when set (for any service); else, for the API of the overlay ``onyx up``
    runs here (:data:`~broker.config.CLUSTER_FILE`), the token it keeps in
    :data:`~broker.config.ADMIN_TOKEN_FILE`.

    >>> operator_token("http://192.0.2.1:8080/cache") == config.ADMIN_TOKEN
    True
    """
    if config.ADMIN_TOKEN:
        return config.ADMIN_TOKEN
    try:
        local = json.loads(config.CLUSTER_FILE.read_text())["api_url"]
        token = config.ADMIN_TOKEN_FILE.read_text().strip()
    except (FileNotFoundError, PermissionError, ValueError, KeyError):
        return None
    return token if token and (url == local or url.startswith(local + "/")) else None


def api(method: str, url: str, body: dict | None = None, token: str | None = None,
        subscriber_token: str | None = None, timeout: float = 30.0,
        headers: dict[str, str] | None = None) -> dict | list | None:
    """One JSON request to the registration service, with a profile's ``token`` and/or a
    ``subscriber_token`` if given; :class:`ApiError` with the service's own message for a
    4xx/5xx answer. A 429 is waited out (its ``Retry-After``) and tried again, up to
    :data:`RATE_LIMIT_RETRIES` times. A request with neither token that the service answers
    401 (an operator's operation) goes again with this machine's :func:`operator_token`, if
    there is one: the ``onyx`` commands act as the operator of their own overlay, and as
    nobody else (an anonymous registration stays anonymous: the service admits no operator there)."""
    given = headers or {}  # other credentials (a publisher's, the operator's), as headers
    headers = {"Content-Type": "application/json", **({"X-Onyx-Token": token} if token else {}),
               **({"X-Onyx-Subscriber-Token": subscriber_token} if subscriber_token else {}), **given}
    data = json.dumps(body).encode() if body is not None else None
    attempt = 0
    while True:
        req = urllib.request.Request(url, data, headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
            break
        except urllib.error.HTTPError as exc:
            operator = operator_token(url) if exc.code == 401 and not (token or subscriber_token or given) else None
            if operator is not None and ADMIN_TOKEN_HEADER not in headers:
                headers[ADMIN_TOKEN_HEADER] = operator
                continue
            if exc.code != 429 or attempt == RATE_LIMIT_RETRIES:
                with answered(method, url, timeout):
                    raise
            attempt += 1
            time.sleep(min(float(exc.headers.get("Retry-After") or 1), 60.0))
        except (urllib.error.URLError, TimeoutError):
            with answered(method, url, timeout):
                raise
    return json.loads(raw) if raw else None


REFERENCE_WAIT_S = 30.0
"""How long :func:`fetch_reference` keeps asking for a message the archive does not hold yet
(it archives a message a few seconds after it was published; ``ONYX_ARCHIVE_TRIGGER``)."""


def fetch_reference(api_url: str, value: bytes, token: str | None = None, subscriber_token: str | None = None,
                    wait: float = REFERENCE_WAIT_S) -> bytes:
    """The message a delivery by reference names (its JSON ``value``: ``GET <api_url><href>``
    with the profile's ``token`` or its subscriber's), asking again after each ``Retry-After``
    while the archive does not hold it yet, for up to ``wait`` seconds; :class:`ApiError` after."""
    try:
        href = json.loads(value)["href"]
    except (ValueError, KeyError, TypeError):
        raise ApiError(f"not a delivery by reference (no JSON with an href): {value[:80]!r}") from None
    url = api_url.rstrip("/") + href
    headers = {**({"X-Onyx-Token": token} if token else {}),
               **({"X-Onyx-Subscriber-Token": subscriber_token} if subscriber_token else {})}
    deadline = time.monotonic() + wait
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, None, headers), timeout=30) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            retry = exc.headers.get("Retry-After")
            if exc.code != 404 or retry is None or time.monotonic() + float(retry) > deadline:
                with answered("GET", url, 30):
                    raise
            time.sleep(float(retry))
        except (urllib.error.URLError, TimeoutError):
            with answered("GET", url, 30):
                raise


@contextmanager
def answered(method: str, url: str, timeout: float) -> Iterator[None]:
    """Around a request to the registration service: its failures as :class:`ApiError`
    with the service's own message (the ``detail`` of its error body)."""
    try:
        yield
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("detail")
        except ValueError:
            detail = exc.reason
        raise ApiError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
    except urllib.error.URLError as exc:
        raise ApiError(f"cannot reach the registration service at {url}: {exc.reason}") from None
    except TimeoutError:
        raise ApiError(f"{method} {url}: no answer in {timeout:.0f} s") from None


def messages_from(paths: list[Path], generate: int = 0, seed: int = 1) -> Iterator[tuple[str, bytes]]:
    """``(name, xml)`` for every file given (folders: their ``*.xml``, sorted), then
    ``generate`` NITF documents from the seeded generator of :mod:`yfilter.generators`."""
    for path in paths:
        if path.is_dir():
            files = sorted(path.glob("*.xml"))
        elif path.exists():
            files = [path]
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
        for f in files:
            yield f.name, f.read_bytes()
    if generate:
        from yfilter.generators import DocGenerator, Schema

        gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=seed)
        for i in range(generate):
            yield f"gen-{seed}-{i}", gen.generate()


def publish(bootstrap: str, topic: str, messages: list[tuple[str, bytes]], rate: float = 0.0,
            progress: bool = True) -> list[str]:
    """Send ``messages`` to ``topic`` (at most ``rate`` per second if given), each keyed by
    its name and with a fresh ``onyx-message-id``; returns the message ids, in order.
    librdkafka's producer (confluent-kafka), so that a publisher keeps up with the overlay."""
    from confluent_kafka import Producer
    from tqdm import tqdm

    from broker.kafka_auth import librdkafka_options

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.max.bytes": 16 * 1024 * 1024, **librdkafka_options()})
    failed: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append(str(err))

    ids = []
    start = time.monotonic()
    for i, (name, payload) in enumerate(tqdm(messages, desc=f"publishing to {topic}", unit="msg",
                                             disable=not progress)):
        if rate > 0:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
        mid = uuid.uuid4().hex
        while True:
            try:
                producer.produce(topic, payload, name.encode(), headers=[("onyx-message-id", mid.encode())],
                                 on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let some go first
                producer.poll(0.05)
        producer.poll(0)
        ids.append(mid)
    if producer.flush(60) or failed:
        raise ApiError(f"could not publish to {topic}: {failed[0] if failed else 'Kafka did not acknowledge in 60 s'}")
    return ids


class Record(NamedTuple):
    """One record read by :class:`TopicTail`."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


class TopicTail:
    """Reads topics from the offsets they had when it was created, so that nothing
    written after that is missed (deliveries, whichever topic they land on); with
    ``from_start``, from their first record (a topic created for this reader)."""

    def __init__(self, bootstrap: str, names: list[str], from_start: bool = False) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        from broker.kafka_auth import librdkafka_options

        topics.ensure_topics(bootstrap, names)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"onyx-tail-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False, **librdkafka_options()})
        meta = self.consumer.list_topics(timeout=30).topics
        parts = [TopicPartition(t, p) for t in names for p in sorted(meta[t].partitions if t in meta else {0})]
        for tp in parts:
            tp.offset = OFFSET_BEGINNING if from_start else \
                self.consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1]
        self.consumer.assign(parts)

    def __iter__(self):
        """Records that arrived since the last call (stops after half a second of quiet)."""
        while True:
            batch = [m for m in self.consumer.consume(500, timeout=0.5) if m.error() is None]
            if not batch:
                return
            for m in batch:
                yield Record(m.topic(), m.key(), m.value(), list(m.headers() or ()))

    def close(self) -> None:
        self.consumer.close()


class SseEvent(NamedTuple):
    """One Server-Sent Event (``id`` as the stream last set it)."""

    id: str | None
    event: str
    data: str


def sse_events(lines: Iterable[bytes]) -> Iterator[SseEvent | None]:
    r"""The events of a text/event-stream, read line by line; ``None`` for a comment (a
    keep-alive), so a reader may look at the clock.

    >>> list(sse_events([b": hi\n", b"id: 4\n", b"event: delivery\n", b"data: {}\n", b"\n"]))
    [None, SseEvent(id='4', event='delivery', data='{}')]
    """
    event_id, name, data = None, "message", []
    for raw in lines:
        line = raw.decode(errors="replace").rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event_id, name, "\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            yield None
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = value
            elif field == "event":
                name = value
            elif field == "data":
                data.append(value)


def stream_deliveries(api_url: str, profile_id: str, token: str, *, last_event_id: str | None = None,
                      from_start: bool = False, timeout: float = 60.0) -> Iterator[dict | None]:
    """A profile's deliveries from ``GET /profiles/{id}/deliveries`` (Server-Sent Events), each
    the event's JSON data plus ``event_id``; ``None`` at each keep-alive. A lost connection is
    made again with ``Last-Event-ID`` (the last event received), so nothing is lost or repeated;
    a refusal (a bad token, say) is an :class:`ApiError`. ``from_start``: the first connection
    reads the delivery topic from its first record, not from now."""
    while True:
        headers = {"Accept": "text/event-stream", "X-Onyx-Token": token,
                   **({"Last-Event-ID": last_event_id} if last_event_id else {})}
        url = f"{api_url}/profiles/{profile_id}/deliveries" + ("?from_start=true" if from_start else "")
        try:
            resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
        except urllib.error.HTTPError:
            with answered("GET", url, timeout):
                raise
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1.0)  # the service is away for now: try again
            continue
        try:
            with resp:
                for ev in sse_events(resp):
                    if ev is None:
                        yield None
                    elif ev.event == "delivery":
                        last_event_id, from_start = ev.id, False
                        yield {**json.loads(ev.data), "event_id": ev.id}
        except (ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(1.0)  # the stream ended or broke: connect again after the last event


def subscribe(api_url: str, bootstrap: str | None, text: str, say: Say, *, near: str | None = None,
              delivery_topic: str | None = None, subscriber_token: str | None = None, count: int = 0,
              timeout: float = 0.0, keep: bool = False, sse: bool = False, by_reference: bool = False) -> int:
    """Register ``text`` (for the subscriber of ``subscriber_token``, else a new one),
    print its deliveries as they arrive; stop after ``count`` deliveries or ``timeout``
    seconds (0: until Ctrl-C); delete the profile at the end unless ``keep``. Returns
    the number of deliveries. With ``sse`` the deliveries come from the service's event
    stream (:func:`stream_deliveries`) instead of Kafka: no Kafka client is needed (``bootstrap``
    may be None). With ``by_reference`` the deliveries carry references, and each message is
    fetched from the service (:func:`fetch_reference`)."""
    if bootstrap is None and not sse:
        raise ApiError("reading deliveries from Kafka needs its address (--bootstrap-servers), or use --sse")
    delivery = {**({"topic": delivery_topic} if delivery_topic else {}),
                **({"by": "reference"} if by_reference else {})}
    body = {"text": text, **({"near": near} if near else {}), **({"delivery": delivery} if delivery else {})}
    reg = api("POST", f"{api_url}/profiles", body, subscriber_token=subscriber_token)
    pid = reg["profile_id"]
    # A new subscriber's own topic is new: read it all. Otherwise from now on: a new
    # profile matches nothing before its routing query has reached the root brokers.
    fresh = "subscriber_token" in reg and reg["delivery_topic"] == topics.delivery_topic(reg["subscriber_id"])
    if sse:
        reader = None
        records = (None if d is None else (d["message_id"] or "?", d["value"].encode())
                   for d in stream_deliveries(api_url, pid, reg["token"], from_start=fresh))
    else:
        reader = TopicTail(bootstrap, [reg["delivery_topic"]], from_start=fresh)
        records = _kafka_deliveries(reader, reg["delivery_topic"], pid)
    say(f"registered profile {pid} on broker {reg['host_broker']}; deliveries on "
        f"{'the event stream of ' if sse else ''}{reg['delivery_topic']}"
        + ("" if keep else " (deleted again when this stops)"))
    received = 0
    deadline = time.monotonic() + timeout if timeout else None
    try:
        for got in records:
            if got is not None:
                mid, value = got
                if by_reference:
                    value = fetch_reference(api_url, value, token=reg["token"])
                received += 1
                preview = value[:160].decode(errors="replace").replace("\n", " ")
                say(f"[{time.strftime('%H:%M:%S')}] message {mid} ({len(value)} bytes): {preview}")
            if (count and received >= count) or (deadline is not None and time.monotonic() >= deadline):
                break
    except KeyboardInterrupt:
        pass
    finally:
        records.close()
        if reader is not None:
            reader.close()
        if keep:
            say(f"kept profile {pid}; its token (needed to update or delete it): {reg['token']}")
            if "subscriber_token" in reg:
                say(f"subscriber {reg['subscriber_id']}; its token (--subscriber-token, to add profiles to "
                    f"{reg['delivery_topic']}): {reg['subscriber_token']}")
        else:
            api("DELETE", f"{api_url}/profiles/{pid}", token=reg["token"])
            say(f"deleted profile {pid}")
    say(f"{received} deliveries")
    return received


def _kafka_deliveries(reader: TopicTail, topic: str, pid: str) -> Iterator[tuple[str, bytes] | None]:
    """``(message id, value)`` of the profile's records on ``topic`` (:func:`broker.packets.delivers_to`: a
    record may be for several profiles of the topic); ``None`` after each quiet half second."""
    while True:
        for r in reader:
            if r.topic == topic and packets.delivers_to(pid, r.key, r.headers):
                yield dict(r.headers).get("onyx-message-id", b"?").decode(errors="replace"), r.value
        yield None


BATCH = 10_000  # profiles per POST /profiles:batch, the service's most


def profile_lines(lines: Iterable[str]) -> list[tuple[int, str]]:
    """``(line number, profile)`` for every line that holds a profile: one per line,
    surrounding blanks dropped, blank lines and ``#`` comments skipped.

    >>> profile_lines(["# news in SF", "/nitf[head/pubdata/@edition.area='SF']", "", "  //hl1  "])
    [(2, "/nitf[head/pubdata/@edition.area='SF']"), (4, '//hl1')]
    """
    out = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if text and not text.startswith("#"):
            out.append((number, text))
    return out


class LineResult(NamedTuple):
    """What became of one line of a profile file: its profile, or why it was refused."""

    line: int
    text: str
    status: int
    profile: dict | None = None
    error: dict | None = None


class FileRegistration(NamedTuple):
    """The outcome of :func:`register_file`."""

    results: list[LineResult]
    subscriber_id: str | None
    subscriber_token: str | None  # of the subscriber created for the file (None: the caller's, or none)
    seconds: float

    @property
    def failed(self) -> list[LineResult]:
        return [r for r in self.results if r.status != 201]


def register_file(api_url: str, lines: list[tuple[int, str]], *, near: str | None = None,
                  delivery_topic: str | None = None, subscriber_token: str | None = None, batch: int = BATCH,
                  progress: bool = False, label: str = "profiles") -> FileRegistration:
    """Register ``(line number, profile)`` pairs with ``POST /profiles:batch``, ``batch``
    at a time, all for one subscriber: ``subscriber_token``'s, or a new one registered first
    (``POST /subscribers``: a request without a token may carry only a few profiles). A batch
    the service refuses as a whole (Kafka down, say) stops the run with :class:`ApiError`,
    saying which lines were registered before it."""
    from tqdm import tqdm

    if not 1 <= batch <= BATCH:
        raise ValueError(f"a batch holds 1 to {BATCH:,} profiles, not {batch}")
    extra = {**({"near": near} if near else {}), **({"delivery": {"topic": delivery_topic}} if delivery_topic else {})}
    results: list[LineResult] = []
    subscriber_id, created = None, None
    start = time.monotonic()
    if subscriber_token is None and lines:
        try:
            new = api("POST", f"{api_url}/subscribers")
        except ApiError as exc:
            raise ApiError(f"{exc} (lines {lines[0][0]}-{lines[-1][0]} not registered: no subscriber to register "
                           "them for)") from None
        subscriber_id, created = new["subscriber_id"], new["token"]
    with tqdm(total=len(lines), desc=f"registering {label}", unit="profile", disable=not progress) as bar:
        for at in range(0, len(lines), batch):
            chunk = lines[at:at + batch]
            try:
                answer = api("POST", f"{api_url}/profiles:batch",
                             {"profiles": [{"text": t, **extra} for _, t in chunk]},
                             subscriber_token=subscriber_token or created, timeout=600)
            except ApiError as exc:
                done = sum(r.status == 201 for r in results)
                raise ApiError(f"{exc} (lines {chunk[0][0]}-{chunk[-1][0]} not registered; {done} profiles "
                               f"registered before{' as subscriber ' + subscriber_id if subscriber_id else ''}"
                               f"{', its token ' + created if created else ''})") from None
            subscriber_id = answer.get("subscriber_id") or subscriber_id
            created = created or answer.get("subscriber_token")
            for (number, text), r in zip(chunk, answer["results"]):
                results.append(LineResult(number, text, r["status"], r.get("profile"), r.get("error")))
            bar.update(len(chunk))
    return FileRegistration(results, subscriber_id, created, time.monotonic() - start)


def describe_failure(name: str, r: LineResult) -> list[str]:
    """A refused line as ``file:line: reason``, with the line and a caret under the column
    the service named (if it named one).

    >>> describe_failure("p.txt", LineResult(3, "/nitf/parent::x", 422, error={"detail": "unsupported axis "
    ...                  "'parent::' at column 7", "column": 7}))
    ["p.txt:3: unsupported axis 'parent::' at column 7", '    /nitf/parent::x', '          ^']
    """
    error = r.error or {}
    out = [f"{name}:{r.line}: {error.get('detail', f'HTTP {r.status}')}"]
    column = error.get("column")
    if column is not None:
        out += [f"    {r.text}", "    " + " " * (column - 1) + "^"]
    return out
