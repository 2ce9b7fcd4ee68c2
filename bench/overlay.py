"""Benchmark of the overlay running for real: the six brokers of ONYX Figure 4, one Spark
Structured Streaming query serving them, over a real Kafka broker, on this machine.

    python -m bench.overlay            # everything below (about two hours on 2 cores)
    python -m bench.overlay --quick    # 1k profiles, fewer messages (about 15 minutes)
    python -m bench.overlay --mixes transforms --profiles 10000 --modes routing,routing-whole \
        --out bench/results/overlay_projection.json --plot bench/results/overlay_projection.png
    python -m bench.overlay --quick --mixes batched,transforms --profiles 1000 --modes routing,routing-whole \
        --bandwidths 1e8,1e10 --no-peer --no-floor \
        --out bench/results/overlay_transform.json --plot bench/results/overlay_transform.png   # ONYX 4.2.2
    python -m bench.overlay --mixes generator --profiles 100000 --modes routing \
        --budget atoms=1000,states=3000,predicates=300 \
        --out bench/results/overlay_budget.json --plot bench/results/overlay_budget.png
    python -m bench.overlay --mixes corpus --profiles 1,10000,100000 --modes routing --subscribers 1,1000 \
        --no-floor --out bench/results/overlay_corpus.json      # the corpus mix, both layouts, and the peer
    python -m bench.overlay --local-load                        # -> bench/results/overlay_local_load.json
    python -m bench.overlay --generalization --mixes quotes,generator   # -> overlay_generalization.json

Each part runs alone: ``--mixes``, ``--profiles``, ``--modes``, ``--subscribers`` pick the
configurations, ``--no-floor`` and ``--no-peer`` leave those out, ``--burst`` and
``--steady`` shorten a run.

In one run, each configuration on a fresh Kafka broker of its own (topics named by the
contract would otherwise still hold the previous configuration's profiles and messages):

* **raw Kafka** with the same client as the brokers (confluent-kafka / librdkafka): a
  producer writes the messages, a consumer reads them back (messages/s of a burst,
  latency at the steady rate); and the same client writing, per message, as many
  records as the overlay writes per message at 100k profiles (``raw fan-out``: what the
  overlay's output alone costs Kafka and one Python process);
* the **Spark floor**: the same six brokers and query in ``floor`` mode — every message
  forwarded down every link as it came and handed to the latency probe, nothing decoded
  or matched — the cost of the streaming job itself;
* **flooding** (every message down every link, matched at every broker) and
  **content-based routing**, at 1k, 10k and 100k profiles, each with two profile mixes:
  ``generator`` (today's generated NITF filters with one or two value predicates, on
  generated NITF messages) and ``quotes`` (ONYX's stock-quote example: a profile asks for
  one of 1,000 symbols above a price, so a quote matches about 0.05% of the profiles);
  with ``--mixes corpus``, the news corpus (``/work/shared/corpus``: its 21 documents in no
  XML namespace, over and over) against profiles written from the corpus' own paths and
  values (:class:`~yfilter.generators.CorpusProfileGenerator`'s default mix: a message
  matches about 9% of them on average (median 6-7%), 3% to 27% per document, every message some);
* the **centralized peer** (:mod:`bench.peer`), once per mix, size and layout, on a
  Kafka of its own: what a user would run on one machine instead — one consumer process
  with the same client, one :class:`yfilter.Engine` holding every profile (and the probe),
  one record per matching message and delivery topic with the matching ids in an
  ``onyx-profiles`` header, written with the brokers' producer settings. The same
  messages, warm-up, latency run and burst; the overlay's ratios to it are printed and
  kept (``ratios``: ``throughput_vs_peer``, ``p50_vs_peer``, ``p99_vs_peer``, ``cpu_vs_peer``),
  and its count of matches gives the mix's selectivity (printed).

Subscriber layouts (``--subscribers 1,1000``): every profile one subscriber's, delivered
to one topic, or the profiles spread round-robin over 1,000 subscribers, each with its own
``onyx.deliver.bench-sNNNN`` topic (created before the run).

Per run, after 300 messages of warm-up: sustained messages/s (a burst published at full
speed, timed from the first send until every broker has drained its input; 5,000 messages,
fewer where they would make more than a million records), p50/p99 publish -> delivery at b6 (three
link hops) at a steady 20 msg/s (a probe profile hosted at b6 that matches the marked
steady messages), link sends and deliveries per message, bytes brokers wrote to Kafka per
message, CPU seconds per message (every process of the run: Kafka, Spark's JVM, Python
workers), and where a micro-batch's time goes (Spark's own stages and the brokers' per
stage on the executors).

Profiles are written as query packets straight to their host brokers' inbound topics —
the same packets the registration service sends — spread round-robin, instead of 100,000
HTTP requests (the service is measured by ``bench.subscribers`` and the tests).

With ``--distributed`` (issue 34), every routing configuration also runs as deployed:
on a 3-node KRaft Kafka (replication factor 3, ``min.insync.replicas`` 2, producers
``acks=all``), with every broker a Spark application of its own on a local standalone
cluster (one executor core each, ``spark-submit`` of ``broker/job.py``), and both
(``onyx up --distributed``): what replication and per-broker applications cost beside
the single application on one Kafka node, in the same run. Per-broker applications report
no Spark stage times here (their queries live in other processes)::

    python -m bench.overlay --quick --mixes quotes --modes routing --distributed \
        --out bench/results/overlay_distributed.json --plot bench/results/overlay_distributed.png

``--local-load`` (issue 41): what local profiles at b2 cost the messages b2 only
forwards. On fresh overlays that differ only at b2 — no profiles there; 100k generator
filters there; 10k transformation profiles there — with the probe at b6 (so every marked
message goes b1 -> b2 -> b4 -> b6), after 300 messages of warm-up, 200 marked messages at
20 msg/s, and last no profiles at b2 again (the ratios are to both runs without, pooled):
per message, from its arrival at b2 (the CreateTime of its record on
``onyx.broker.b2``, written by b1) to its forward (the CreateTime of the record with the
same ``onyx-message-id`` on ``onyx.broker.b4``, written by b2), p50/p99 and the ratio to
the run without local profiles; and publish -> delivery at b6. Writes
``bench/results/overlay_local_load.json``.

``--generalization`` (issue 41): exact tables against tables generalized to ``--budget``
(default: ``onyx up``'s, ``ONYX_TABLE_BUDGET``) for each mix and size (default 10k and
100k), each on a fresh overlay in routing mode: the sizes of the tables every broker routes
the news tree with, by broker and level (whatever ``stats()`` reports: the view's atoms,
NFA states and guards, the exact table's as ``exact_*``); link sends per message over 500
burst messages, checked against the links they needed by one engine holding every profile
(false positives: sent, not needed; false negatives: needed, not sent — must be 0), and the
false positives the brokers report; p50/p99 at b6 at 20 msg/s; and convergence after the
bulk registration, from the moment Kafka acknowledged the last profile packet: until no
broker had input left (tables quiet), and until a message matching that last profile
(hosted at b6, registered after all others; copies published every 0.2 s) was delivered.
Writes ``bench/results/overlay_generalization.json``.

Prints a table, writes ``bench/results/overlay.json`` (or ``--out``) and a PNG plot beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from broker import config, packets, topics
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.devcluster import KafkaDevCluster
from broker.registry.control_packets import query_packet
from broker.registry.store import ProfileRecord
from routing.budget import Budget
from routing.overlay import builtin
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

RESULTS = Path(__file__).resolve().parent / "results"
SOURCE_TOPIC = topics.source_topic("news")  # the source of the figure4 overlay
PROBE_HOST = "b6"  # the far end of the tree: b1 -> b2 -> b4 -> b6
PROBE_TOPIC = "bench.probe"
BENCH_TOPIC = "bench.deliveries"
CANARY_TOPIC = "bench.canary"
SYMBOLS = 1000
WARM_UP = 300  # messages through each fresh overlay before anything is measured
RECORDS_PER_BURST = 1_000_000
MIN_BURST = 500


@dataclass(frozen=True)
class Mix:
    """A workload: profiles, messages, and the probe profile matching marked messages."""

    name: str
    profiles: Callable[[int, int], list[str]]
    messages: Callable[[int, int], list[bytes]]
    probe: str
    mark: Callable[[bytes], bytes]
    place: Callable[[int, int], str] | None = None
    """(profiles, index) -> the host of a profile (None: round-robin over the brokers)."""


def _mark_root(doc: bytes) -> bytes:
    """The document with ``probe="1"`` on its root element (what the probe matches)."""
    return _MARK.sub(rb'\1 probe="1"', doc, count=1)


_MARK = re.compile(rb"^(\s*(?:<\?.*?\?>\s*|<!--.*?-->\s*|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>\s*)*<[\w.:-]+)", re.S)
"""Up to the root element's name: past the XML declaration, comments, processing
instructions and a DOCTYPE (with its internal subset) before it."""


def _nitf_profiles(n: int, seed: int) -> list[str]:
    return ProfileGenerator(Schema.nitf(), n_preds=(1, 2), p_star=0.1, p_desc=0.2, seed=seed).batch(n)


def _nitf_messages(n: int, seed: int) -> list[bytes]:
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=seed)
    return [gen.generate() for _ in range(n)]


def _quote_profiles(n: int, seed: int) -> list[str]:
    """ONYX section 2's stock quotes: a symbol and a price (or volume) bound."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        symbol = f"S{rnd.randrange(SYMBOLS):04d}"
        if rnd.random() < 0.7:
            out.append(f"/quote[symbol = '{symbol}'][price >= {rnd.uniform(0, 50):.2f}]")
        else:
            out.append(f"/quote[symbol = '{symbol}' and volume > {rnd.randrange(0, 5000)}]")
    return out


def _quote_messages(n: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [(f'<quote exchange="{rnd.choice(["NYSE", "NASDAQ", "LSE"])}"><symbol>S{rnd.randrange(SYMBOLS):04d}'
             f'</symbol><price>{rnd.uniform(0, 100):.2f}</price><volume>{rnd.randrange(10000)}</volume>'
             f'<time>2026-11-26T10:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}Z</time></quote>').encode()
            for _ in range(n)]


def _transform_profiles(n: int, seed: int) -> list[str]:
    """Transformation profiles that read a news item's metadata: the generator's NITF
    paths into ``/nitf/head``, each returning the text of what it binds. Every link can
    carry a projection without the body (ONYX 4.2.2)."""
    gen = ProfileGenerator(Schema.nitf(), n_preds=(1, 2), p_star=0.1, p_desc=0.2, seed=seed)
    head = re.compile(r"^/nitf(\[[^\]]*\])*/head/")
    paths: list[str] = []
    while len(paths) < n:
        paths += [p for p in gen.batch(5 * (n - len(paths))) if head.match(p)]
    return [f"for $x in $msg{p} return <hit>{{$x/text()}}</hit>" for p in paths[:n]]


def corpus_plain_documents() -> list[bytes]:
    """The news corpus' documents whose elements are in no namespace (NITF, NewsML 1.x, the
    agencies' own formats: 21 of the 52): the ones a profile can name, the profile language
    having no way to bind a prefix at registration (the others would match only ``/*`` and
    ``//*``-style profiles)."""
    from bench.yfilter import corpus_documents

    return [d for d in corpus_documents() if b"xmlns=" not in d and not re.search(rb"<[\w.-]+:[\w.-]+[\s>/]", d)]


def _corpus_profiles(n: int, seed: int) -> list[str]:
    """Profiles written from the corpus' own paths and values
    (:class:`yfilter.generators.CorpusProfileGenerator`, its default mix of constructs:
    paths and values mostly, then contains, or, tails, nested, not, positions; 15% of the
    values taken from another element so that they rarely match): each message matches
    about 9% of them on average (median 6-7%, 3% to 27% per document at 1k and 10k; measured by the peer
    and printed)."""
    from yfilter.generators.corpus import CorpusProfileGenerator

    return CorpusProfileGenerator(corpus_plain_documents(), seed=seed).batch(n)


def _corpus_messages(n: int, seed: int) -> list[bytes]:
    """``n`` messages: the corpus' documents (:func:`corpus_plain_documents`) over and
    over, each round in another seeded order."""
    docs, rnd, out = corpus_plain_documents(), random.Random(seed), []
    while len(out) < n:
        rnd.shuffle(docs)
        out += docs
    return out[:n]


def _batched_profiles(n: int, seed: int) -> list[str]:
    """ONYX 4.2.2's batched workload (:func:`bench.transform.batched`): ``n`` profiles
    ``for $n in $msg/batched-nitf/nitf where <a subject of the corpus> ... return ...``, a
    fifth per host of :data:`bench.transform.PLACES`, in that order (see :func:`_batched_place`)."""
    from bench.transform import batched

    return [text for _, text in batched(config.CORPUS_DIR, 0, max(1, n // len(_BATCHED_HOSTS)), seed)[1]][:n]


def _batched_place(n: int, i: int) -> str:
    return _BATCHED_HOSTS[min(len(_BATCHED_HOSTS) - 1, i // max(1, n // len(_BATCHED_HOSTS)))]


def _batched_messages(n: int, seed: int) -> list[bytes]:
    """``<batched-nitf>`` messages of 4-10 news corpus articles."""
    from bench.transform import batched

    return batched(config.CORPUS_DIR, n, 1, seed)[0]


def _mark_first_article(doc: bytes) -> bytes:
    """The batched message with ``probe="1"`` on its first article (what the probe's
    where clause tests: the probe shares the workload's for path, so it does not turn the
    links' transformation queries into path projections)."""
    return re.sub(rb"<nitf(?=[\s>])", rb'<nitf probe="1"', doc, count=1)


_BATCHED_HOSTS = ("b2", "b3", "b4", "b5", "b6")


MIXES = {
    "generator": Mix("generator", _nitf_profiles, _nitf_messages, "/nitf[@probe]", _mark_root),
    "corpus": Mix("corpus", _corpus_profiles, _corpus_messages, "/*[@probe]", _mark_root),
    "quotes": Mix("quotes", _quote_profiles, _quote_messages, "/quote[@probe]", _mark_root),
    "transforms": Mix("transforms", _transform_profiles, _nitf_messages,
                      "for $n in $msg/nitf[@probe] return <probe/>", _mark_root),
    "batched": Mix("batched", _batched_profiles, _batched_messages,
                   "for $n in $msg/batched-nitf/nitf where $n/@probe return <probe/>", _mark_first_article,
                   _batched_place),
}
"""``transforms``, ``batched`` and ``corpus`` are not in the default run: ``--mixes
transforms,batched --modes routing,routing-whole --bandwidths 1e8,1e10`` measures incremental
transformation on links (ONYX 4.2.2) against the whole message;
``--mixes corpus`` the news corpus' documents against profiles written from their vocabulary."""

DEFAULT_MIXES = ("generator", "quotes")

MODES = {"routing": ("route", True), "routing-whole": ("route", False), "flooding": ("flood", True)}
"""Bench mode -> the plan's mode and whether links may carry projections."""


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def cpu_seconds(roots: list[int] | None = None) -> float:
    """CPU seconds (user + system) of this process and every process below it: the Kafka
    broker, Spark's JVM and its Python workers (Linux ``/proc``). With ``roots``: of this
    process alone and of ``roots`` and every process below them (the peer's run leaves out
    the idle Spark session, whose Python workers may end meanwhile: a process that ends
    takes its seconds with it, and the difference came out negative)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(entry)] = int(fields[1])
        used[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    me = os.getpid()
    tops = {me} if roots is None else set(roots)
    total = 0.0 if me in tops else used.get(me, 0.0)
    for pid, seconds in used.items():
        p = pid
        while p and p not in tops:
            p = parent.get(p, 0)
        if p in tops:
            total += seconds
    return total


# -- clients (the same librdkafka as the brokers) ----------------------------------------


def _producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                     "queue.buffering.max.messages": 1_000_000, "message.max.bytes": 16 * 1024 * 1024})


def send(bootstrap: str, topic: str, docs: list[bytes], rate: float, prefix: str,
         sent: dict[str, float] | None = None) -> dict[str, float]:
    """Send ``docs`` to ``topic`` (``rate``/s; 0: full speed), each keyed and
    ``onyx-message-id``-ed ``<prefix>-<i>``; returns send times by id. ``sent``, when
    given, is filled as the messages go (another thread may read how many have gone:
    a message's time is in it before the message is handed to the producer)."""
    producer = _producer(bootstrap)
    sent = {} if sent is None else sent
    start = time.monotonic()
    for i, d in enumerate(docs):
        if rate:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
        mid = f"{prefix}-{i}"
        sent[mid] = time.monotonic()
        while True:
            try:
                producer.produce(topic, d, mid.encode(), headers=[("onyx-message-id", mid.encode())])
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush()
    return sent


class Clock:
    """When each message id was first seen on ``topic`` (a consumer thread, every
    partition from the start); with ``keep``, also every record as (key, message id,
    seconds on the monotonic clock) in ``log``."""

    def __init__(self, bootstrap: str, topic: str, copies: int = 0, keep: bool = False) -> None:
        from confluent_kafka import Consumer, TopicPartition

        topics.ensure_topics(bootstrap, [topic])
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 5})
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, 0) for p in sorted(partitions) or [0]])
        self.first: dict[str, float] = {}
        self.records = 0
        self.keep = keep
        self.log: list[tuple[str, str, float]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self.consumer.consume(500, timeout=0.05):
                if msg.error() is None:
                    self.records += 1
                    mid = dict(msg.headers() or ()).get("onyx-message-id", msg.key() or b"").decode()
                    now = time.monotonic()
                    self.first.setdefault(mid, now)
                    if self.keep:  # a shared record is every listed profile's delivery
                        self.log += [(pid, mid, now) for pid in packets.profile_ids(msg.key(), msg.headers())]

    def wait_for(self, ids, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(i in self.first for i in ids):
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.consumer.close()


def raw_kafka(bootstrap: str, burst: list[bytes], steady: list[bytes], rate: float) -> dict:
    """Producer -> topic -> consumer with the brokers' client, nothing in between."""
    topic = f"bench.raw.{time.time_ns()}"
    clock = Clock(bootstrap, topic)
    time.sleep(1.0)
    cpu0, t0 = cpu_seconds(), time.monotonic()
    sent = send(bootstrap, topic, burst, 0.0, "burst")
    clock.wait_for(sent, 300)
    elapsed = max(clock.first.values()) - t0
    cpu = cpu_seconds() - cpu0
    sent = send(bootstrap, topic, steady, rate, "steady")
    clock.wait_for(sent, 120)
    clock.stop()
    lat = [clock.first[m] - t for m, t in sent.items() if m in clock.first]
    return {"throughput_msg_s": len(burst) / elapsed, "latency_p50_s": _pct(lat, 0.5),
            "latency_p99_s": _pct(lat, 0.99), "cpu_s_per_message": cpu / len(burst),
            "bytes_per_message": statistics.mean(map(len, burst))}


def raw_fanout(bootstrap: str, burst: list[bytes], copies: int) -> dict:
    """The same client reading each message and writing ``copies`` records of it (what the
    overlay writes per message), compressed as the brokers compress: the ceiling of the
    overlay's output on this Kafka, for the same bytes written."""
    from confluent_kafka import Consumer, TopicPartition

    from broker import config
    from broker.dataplane.sink import producer_conf

    src, dst = f"bench.fan.{time.time_ns()}", f"bench.fanout.{time.time_ns()}"
    topics.ensure_topics(bootstrap, [src, dst])
    send(bootstrap, src, burst, 0.0, "fan")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fan-{time.time_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(src, 0, 0)])
    from confluent_kafka import Producer

    producer = Producer(producer_conf(bootstrap, config.BROKER_LINGER_MS, config.BROKER_COMPRESSION))
    cpu0, t0, n, written = cpu_seconds(), time.monotonic(), 0, 0
    while n < len(burst):
        for msg in consumer.consume(min(500, len(burst) - n), timeout=1.0):
            if msg.error() is not None:
                continue
            n += 1
            for i in range(copies):
                while True:
                    try:
                        producer.produce(dst, msg.value(), f"p{i}".encode(), headers=msg.headers())
                        break
                    except BufferError:
                        producer.poll(0.05)
                written += len(msg.value())
            producer.poll(0)
    producer.flush()
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds() - cpu0
    consumer.close()
    return {"copies": copies, "throughput_msg_s": len(burst) / elapsed,
            "bytes_written_per_message": written / len(burst), "cpu_s_per_message": cpu / len(burst)}


def peer_run(mix: Mix, profiles: int, burst: list[bytes], steady: list[bytes], rate: float, seed: int,
             subscribers: int = 1) -> dict:
    """The centralized peer (:mod:`bench.peer`) on a fresh Kafka of its own, on the same
    profiles (and probe) and messages as the overlay: after the same warm-up, latency at
    ``rate`` (publish -> the probe's record), then the burst at full speed, timed from the
    first send until the peer has matched every message and Kafka has acknowledged its
    records. Also the mix's selectivity on the burst: the share of profiles a message
    matches (mean, median, range) and of messages matching any."""
    from bench.peer import Peer

    texts = mix.profiles(profiles, seed)
    source = "bench.peer.src"
    with KafkaDevCluster(name=f"bench-peer-{mix.name}-{profiles}-s{subscribers}") as kafka:
        bootstrap = kafka.bootstrap_servers
        records = [("probe", mix.probe, PROBE_TOPIC)] + [
            (f"p{i}", t, delivery_topic(i, subscribers)) for i, t in enumerate(texts)]
        wanted = sorted({source} | {r[2] for r in records})
        for i in range(0, len(wanted), 500):
            topics.ensure_topics(bootstrap, wanted[i:i + 500])
        peer = Peer(bootstrap, source, records, kafka.dir)
        try:
            peer.expect("peer-warm-up", WARM_UP)
            send(bootstrap, source, burst[:WARM_UP], 0.0, "peer-warm-up")
            peer.wait_done()
            clock = Clock(bootstrap, PROBE_TOPIC)
            warm = send(bootstrap, source, [mix.mark(d) for d in steady[:5]], 2.0, "peer-warm")
            clock.wait_for(warm, 120)
            sent = send(bootstrap, source, [mix.mark(d) for d in steady], rate, "peer-steady")
            clock.wait_for(sent, 120)
            clock.stop()
            lat = [clock.first[m] - t for m, t in sent.items() if m in clock.first]
            before = peer.stats()
            peer.expect("peer-burst", len(burst))
            roots = [peer.proc.pid, kafka.proc.pid]  # the peer, Kafka, and this process (sending)
            cpu0, t0 = cpu_seconds(roots), time.monotonic()
            send(bootstrap, source, burst, 0.0, "peer-burst")
            done = peer.wait_done()
            cpu = cpu_seconds(roots) - cpu0
            after = done["stats"]
        finally:
            peer.stop()
    shutil.rmtree(kafka.dir, ignore_errors=True)
    n = len(burst)
    delta = {k: after[k] - before.get(k, 0) for k in after}
    shares = _selectivity(texts, burst[:200])
    return {"profiles": profiles, "mix": mix.name, "subscribers": subscribers, "load_s": peer.ready["load_s"],
            "burst_messages": n, "throughput_msg_s": n / max(1e-9, done["done"] - t0),
            "steady_rate": rate, "delivered_messages": len(lat),
            "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99),
            "records_per_message": delta["records"] / n, "matches_per_message": delta["matches"] / n,
            "cpu_s_per_message": cpu / n, **shares}


def _selectivity(texts: list[str], docs: list[bytes]) -> dict:
    """How many of ``texts`` each of ``docs`` matches (one engine, in this process)."""
    from yfilter import Engine

    if not texts:
        return {}
    engine = Engine()
    engine.add_many((str(i), t) for i, t in enumerate(texts))
    shares = [len(engine.match(d)) / len(texts) for d in docs]
    return {"match_share_mean": statistics.mean(shares), "match_share_median": statistics.median(shares),
            "match_share_min": min(shares), "match_share_max": max(shares),
            "messages_matching_any": sum(1 for x in shares if x) / len(shares)}


# -- the overlay -------------------------------------------------------------------------


def delivery_topic(i: int, subscribers: int) -> str:
    """Profile ``i``'s delivery topic: every profile one subscriber's (:data:`BENCH_TOPIC`), or
    spread round-robin over ``subscribers`` subscribers, each with its own
    ``onyx.deliver.<subscriber>`` topic (the registration service's default)."""
    return BENCH_TOPIC if subscribers <= 1 else topics.delivery_topic(f"bench-s{i % subscribers:04d}")


def round_robin(brokers: list[str], i: int) -> str:
    """Profile ``i``'s host: round-robin over the brokers from the last (b6, the far end of
    the news tree: a single profile is three links away from the root, as the probe is).

    >>> [round_robin(["b1", "b2", "b3"], i) for i in range(4)]
    ['b3', 'b2', 'b1', 'b3']
    """
    return brokers[-1 - i % len(brokers)]


def _mark_attr(doc: bytes, name: str, value: str) -> bytes:
    return _MARK.sub(rb"\1 " + name.encode() + b'="' + value.encode() + b'"', doc, count=1)


def load_profiles(cluster: LocalOverlay, texts: list[str], probe: str, subscribers: int = 1,
                  hosts: Callable[[int], str] | None = None, canary: bytes | None = None) -> dict:
    """Write the profiles' query packets (and the probe's, at b6) to their hosts (``hosts``:
    profile index -> broker; default :func:`round_robin`), each delivering to
    :func:`delivery_topic`, and wait until every broker has processed its input.

    Returns ``converge_s`` (from the first packet written until every broker's input ran
    out), ``written_s`` (writing them, until Kafka acknowledged the last) and, from the
    moment the last packet was acknowledged: ``quiet_s``, until no broker had input left
    (held for 1.5 s: every packet and every routing delta it caused applied, so the tables
    stopped changing) and, with ``canary`` (a message), ``canary_s``: until a message
    matching the last profile registered was delivered. That profile (``/*[@canary]``,
    hosted at b6, the far end of the tree, and registered after all others) is matched
    only by copies of ``canary`` marked with its token, published every 0.2 s from then
    on: a copy sent before the tables below the root know it is dropped by the routing,
    so this is the time until a subscriber who registered last hears of what it asked for
    (one message latency included)."""
    brokers = cluster.overlay.brokers
    hosts = hosts or (lambda i: round_robin(brokers, i))
    producer = _producer(cluster.bootstrap_servers)
    token = f"c{time.time_ns()}"
    records = [("probe", probe, PROBE_HOST, PROBE_TOPIC)] + [
        (f"p{i}", text, hosts(i), delivery_topic(i, subscribers)) for i, text in enumerate(texts)]
    if canary is not None:
        records.append(("canary", f"/*[@canary = '{token}']", PROBE_HOST, CANARY_TOPIC))
    wanted = sorted({r[3] for r in records})
    for i in range(0, len(wanted), 500):
        topics.ensure_topics(cluster.bootstrap_servers, wanted[i:i + 500])
    clock = Clock(cluster.bootstrap_servers, CANARY_TOPIC) if canary is not None else None
    t0 = time.monotonic()
    for pid, text, host, topic in records:
        key, value, headers = query_packet("add", ProfileRecord(pid, text, host, topic, 1))
        while True:
            try:
                producer.produce(topics.broker_topic(host), value, key, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush()
    written = time.monotonic()
    out = {"written_s": written - t0}
    if clock is not None:
        doc, stop = _mark_attr(canary, "canary", token), threading.Event()

        def canaries() -> None:
            p, i = _producer(cluster.bootstrap_servers), 0
            while not stop.is_set() and not clock.first:
                mid = f"canary-{token}-{i}".encode()
                p.produce(SOURCE_TOPIC, doc, mid, headers=[("onyx-message-id", mid)])
                p.poll(0)
                i += 1
                stop.wait(0.2)
            p.flush()

        sender = threading.Thread(target=canaries, daemon=True)
        sender.start()
    quiet = drained(cluster, timeout=7200)
    out["quiet_s"] = quiet - written
    if clock is not None:
        deadline = time.monotonic() + 600
        while not clock.first and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        sender.join(5)
        out["canary_s"] = min(clock.first.values()) - written if clock.first else None
        clock.stop()
        drained(cluster, timeout=600)
    out["converge_s"] = quiet - t0
    return out


def drained(cluster: LocalOverlay, timeout: float, settle: float = 1.5) -> float:
    """Wait until no broker has input left (for ``settle`` seconds); returns the time
    (monotonic) the input first ran out."""
    deadline = time.monotonic() + timeout
    first_empty = None
    while time.monotonic() < deadline:
        cluster.job.poll()
        if all(v == 0 for v in cluster.lag().values()):
            first_empty = first_empty or time.monotonic()
            if time.monotonic() - first_empty >= settle:
                return first_empty
        else:
            first_empty = None
        time.sleep(0.1)
    raise TimeoutError(f"overlay still busy after {timeout:.0f}s: lag {cluster.lag()}")


def _totals(cluster: LocalOverlay) -> dict[str, float]:
    status = cluster.job.status()
    out: dict[str, float] = {}
    for b in status:
        for name in ("messages", "forwarded", "delivered", "dead_letters", "bytes_written", "link_bytes", "projected"):
            out[name] = out.get(name, 0) + b[name]
        for stage, s in b["seconds"].items():
            out[f"s_{stage}"] = out.get(f"s_{stage}", 0) + s
    return out


def _false_positives(cluster: LocalOverlay) -> Counter:
    """Messages forwarded down a link that no profile below it wanted, as budgeted tables
    report them, summed over brokers and links (exact tables report none)."""
    out: Counter = Counter()
    for b in cluster.job.status():
        out.update({f"{b['broker']}->{link}": n for link, n in (b.get("false_positives") or {}).items()})
    return out


def _spark_stages(query, since: int) -> dict[str, float]:
    """Median milliseconds per micro-batch of Spark's own stages, for batches after ``since``."""
    progress = [p for p in (query.recentProgress if query is not None else []) if p["batchId"] > since
                and p.get("numInputRows", 0)]
    keys = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
    return {k: statistics.median([p["durationMs"].get(k, 0) for p in progress]) if progress else None for k in keys}


@dataclass(frozen=True)
class Deployment:
    """How the overlay runs: Kafka nodes (replication factor min(3, nodes)) and whether
    every broker is a Spark application of its own on a standalone cluster."""

    kafka_nodes: int = 1
    applications: bool = False

    @property
    def label(self) -> str:
        """How the table and the plot name it.

        >>> Deployment(3, True).label
        'RF3 app/broker'
        """
        return f"RF{min(self.kafka_nodes, config.KAFKA_REPLICATION)} " + ("app/broker" if self.applications
                                                                           else "one app")


LOCAL = Deployment()
DISTRIBUTED = (Deployment(config.DIST_KAFKA_NODES, False), Deployment(1, True),
               Deployment(config.DIST_KAFKA_NODES, True))
"""``--distributed``: besides the single application on one Kafka node, replication alone,
per-broker applications alone, and both (``onyx up --distributed``)."""


def overlay_run(spark, mode: str, mix: Mix, profiles: int, burst: list[bytes], steady: list[bytes],
                rate: float, seed: int, projection: bool = True, budget: Budget | None = None,
                deployment: Deployment = LOCAL, subscribers: int = 1, canary: bool = False,
                truth: bool = False, bandwidth: float = config.LINK_BANDWIDTH) -> dict:
    """One fresh overlay (and Kafka): profiles, then latency at ``rate``, then a burst.
    ``subscribers``: the profiles' delivery topics (:func:`delivery_topic`); ``canary``:
    also the time until the last profile registered is served (:func:`load_profiles`);
    ``truth``: also the links each burst message took against the links it needed
    (:func:`link_truth`, at most 500 messages); ``bandwidth``: the links' bits/s, for the
    cost model of incremental transformation."""
    name = (f"bench-{mode}-{mix.name}-{profiles}-s{subscribers}-k{deployment.kafka_nodes}"
            f"{'-apps' if deployment.applications else ''}{'-budget' if budget is not None else ''}"
            f"{'' if bandwidth == config.LINK_BANDWIDTH else f'-bw{bandwidth:.0e}'.replace('+', '')}")
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(
        name=name, mode=mode, projection=projection, budget=budget, kafka_nodes=deployment.kafka_nodes,
        applications=deployment.applications, bandwidth=bandwidth),
        spark=None if deployment.applications else spark)
    cluster.start()
    kafka = cluster.kafka
    # Per-broker applications report no query here: Spark's own stages are left out.
    query = getattr(cluster.job, "query", None)
    try:
        texts = mix.profiles(profiles, seed) if mode != "floor" else []
        place = (lambda i: mix.place(len(texts), i)) if mix.place is not None else None
        loaded = load_profiles(cluster, texts, mix.probe, subscribers, place, canary=steady[0] if canary else None)
        converge_s = loaded["converge_s"]
        # Warm up: the JVMs compile their hot paths, the workers build their engines.
        warm0 = _totals(cluster)
        send(kafka.bootstrap_servers, SOURCE_TOPIC, burst[:WARM_UP], 0.0, f"{name}-warm-up")
        drained(cluster, timeout=7200)
        warm = {k: v - warm0.get(k, 0) for k, v in _totals(cluster).items()}
        # A burst writes at most RECORDS_PER_BURST records (at 100k profiles a message makes
        # about a thousand deliveries: 5,000 messages would be 5 million records).
        per_message = (warm.get("forwarded", 0) + warm.get("delivered", 0)) / WARM_UP
        burst = burst[:max(MIN_BURST, min(len(burst), int(RECORDS_PER_BURST / max(1.0, per_message))))]
        clock = Clock(kafka.bootstrap_servers, PROBE_TOPIC)
        warm = send(kafka.bootstrap_servers, SOURCE_TOPIC, [mix.mark(d) for d in steady[:5]], 2.0, f"{name}-warm")
        clock.wait_for(warm, 120)
        batch0 = _batch(query)
        sent = send(kafka.bootstrap_servers, SOURCE_TOPIC, [mix.mark(d) for d in steady], rate, f"{name}-steady")
        clock.wait_for(sent, 120)
        lat = [clock.first[m] - t for m, t in sent.items() if m in clock.first]
        stages_steady = _spark_stages(query, batch0)
        drained(cluster, timeout=600)
        before, cpu0 = _totals(cluster), cpu_seconds()
        fp0 = _false_positives(cluster)
        batch0 = _batch(query)
        t0 = time.monotonic()
        send(kafka.bootstrap_servers, SOURCE_TOPIC, burst, 0.0, f"{name}-burst")
        end = drained(cluster, timeout=7200)
        cpu = cpu_seconds() - cpu0
        after = _totals(cluster)
        fp = _false_positives(cluster) - fp0
        stages_burst = _spark_stages(query, batch0)
        batches = max(1, _batch(query) - batch0)
        clock.stop()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        n = len(burst)
        status = cluster.job.status()
        checked = None
        if truth:
            brokers = cluster.overlay.brokers
            sent = links_sent(cluster, f"{name}-burst-")
            checked = link_truth(cluster.overlay, texts, place or (lambda i: round_robin(brokers, i)),
                                 {f"{name}-burst-{i}": d for i, d in enumerate(burst[:500])}, sent)
        return {"mode": mode, "mix": mix.name, "profiles": profiles, "converge_s": converge_s, "bandwidth": bandwidth,
                "subscribers": subscribers, "loading": loaded, "links_checked": checked,
                "reported_false_positives_per_message": sum(fp.values()) / n,
                "deployment": deployment.label, "kafka_nodes": deployment.kafka_nodes,
                "applications": deployment.applications,
                "burst_messages": n, "throughput_msg_s": n / max(1e-9, end - t0),
                "steady_rate": rate, "steady_messages": len(steady), "delivered_messages": len(lat),
                "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99),
                "forwarded_per_message": delta["forwarded"] / n, "deliveries_per_message": delta["delivered"] / n,
                "link_bytes_per_message": delta["link_bytes"] / n, "projected_per_message": delta["projected"] / n,
                "records_per_message": (delta["forwarded"] + delta["delivered"]) / n,
                "bytes_written_per_message": delta["bytes_written"] / n,
                "cpu_s_per_message": cpu / n, "burst_batches": batches,
                "broker_ms_per_batch": {k[2:]: 1000 * v / batches for k, v in delta.items() if k.startswith("s_")},
                "spark_ms_per_batch_burst": stages_burst, "spark_ms_per_batch_steady": stages_steady,
                "budget": None if budget is None else str(budget),
                "tables": {b["broker"]: b["routing"] for b in status},
                "false_positives": {b["broker"]: b["false_positives"] for b in status}}
    finally:
        cluster.stop()
        shutil.rmtree(kafka.dir, ignore_errors=True)  # gigabytes of deliveries at 100k profiles


def read_records(bootstrap: str, topic: str, keep: Callable) -> None:
    """Every record on ``topic`` (all partitions, from the start to where they end now)
    handed to ``keep(message)``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{time.time_ns()}",
                         "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or not meta.partitions:
            return
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        todo = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        idle = 0
        while todo and idle < 100:
            batch = consumer.consume(1000, timeout=0.2)
            idle = 0 if batch else idle + 1
            for msg in batch:
                if msg.error() is not None:
                    continue
                keep(msg)
                if msg.offset() >= ends[msg.partition()] - 1:
                    todo.discard(msg.partition())
    finally:
        consumer.close()


def message_records(bootstrap: str, topic: str, prefix: str) -> dict[str, int]:
    """Message id -> CreateTime (ms) of the first xml record on ``topic`` whose
    ``onyx-message-id`` starts with ``prefix``."""
    out: dict[str, int] = {}

    def keep(msg) -> None:
        headers = dict(msg.headers() or ())
        mid = headers.get("onyx-message-id", b"").decode()
        if headers.get("onyx-flow", b"xml") == b"xml" and mid.startswith(prefix) and mid not in out:
            out[mid] = msg.timestamp()[1]

    read_records(bootstrap, topic, keep)
    return out


def links_sent(cluster: LocalOverlay, prefix: str) -> dict[str, set[str]]:
    """Message id -> the brokers it was forwarded to (from their inbound topics)."""
    sent: dict[str, set[str]] = {}
    for b in cluster.overlay.brokers:
        for mid in message_records(cluster.bootstrap_servers, topics.broker_topic(b), prefix):
            sent.setdefault(mid, set()).add(b)
    return sent


def link_truth(overlay, texts: list[str], hosts: Callable[[int], str], docs: dict[str, bytes],
               sent: dict[str, set[str]]) -> dict:
    """Links per message against the links it needed: a link ``p -> c`` of the source's
    tree is needed when a profile below ``c`` (hosted in ``c``'s subtree) matches the
    message, by one :class:`yfilter.Engine` holding every profile. False positives: sends
    not needed; false negatives: needed and not sent (a lost delivery: must be 0)."""
    from yfilter import Engine

    tree = overlay.tree(overlay.root_of("news"))
    below = {c: tree.subtree(c) for _, c in tree.links()}
    engine = Engine()
    engine.add_many((str(i), t) for i, t in enumerate(texts))
    fp = fn = needed_total = sent_total = 0
    for mid, doc in docs.items():
        where = {hosts(int(i)) for i in engine.match(doc)}
        needed = {c for c, sub in below.items() if where & sub}
        got = sent.get(mid, set())
        fp += len(got - needed)
        fn += len(needed - got)
        needed_total += len(needed)
        sent_total += len(got)
    n = max(1, len(docs))
    return {"messages_checked": len(docs), "links_needed_per_message": needed_total / n,
            "links_sent_per_message": sent_total / n, "false_positives_per_message": fp / n,
            "false_negatives": fn}


DEFAULT_GENERALIZED = config.BROKER_TABLE_BUDGET or "atoms=4000,states=12000,predicates=2000"
"""The table budget of ``--generalization`` unless ``--budget``: ``onyx up``'s."""

EXACT = Budget()
"""A budget that limits nothing: exact summaries, and no sample floods (the baseline)."""

LOCAL_HOST = "b2"
"""The broker whose local load the local-load run varies (b1 -> b2 -> b4 on the tree)."""


def local_load_run(spark, label: str, texts: list[str], steady: list[bytes], rate: float) -> dict:
    """One fresh overlay: ``texts`` all hosted at b2, the probe at b6 (so that every marked
    message is forwarded b2 -> b4), then the steady messages at ``rate``. Per message: from
    its arrival at b2 (the CreateTime of its record on ``onyx.broker.b2``, written by b1)
    to its forward (the CreateTime of the record with the same ``onyx-message-id`` on
    ``onyx.broker.b4``, written by b2); and publish -> delivery at b6."""
    name = f"bench-local-{label}"
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(name=name, mode="route"), spark=spark)
    cluster.start()
    kafka = cluster.kafka
    try:
        loaded = load_profiles(cluster, texts, MIXES["generator"].probe, hosts=lambda i: LOCAL_HOST)
        mark = MIXES["generator"].mark
        send(kafka.bootstrap_servers, SOURCE_TOPIC, [mark(d) for d in steady[:WARM_UP]], 0.0, f"{name}-warm-up")
        drained(cluster, timeout=7200)
        clock = Clock(kafka.bootstrap_servers, PROBE_TOPIC)
        before = _totals(cluster)
        b2_before = _broker_delivered(cluster, LOCAL_HOST)
        sent = send(kafka.bootstrap_servers, SOURCE_TOPIC, [mark(d) for d in steady[WARM_UP:]], rate,
                    f"{name}-steady")
        clock.wait_for(sent, 300)
        clock.stop()
        drained(cluster, timeout=600)
        delta = {k: v - before.get(k, 0) for k, v in _totals(cluster).items()}
        prefix = f"{name}-steady-"
        arrived = message_records(kafka.bootstrap_servers, topics.broker_topic(LOCAL_HOST), prefix)
        forwarded = message_records(kafka.bootstrap_servers, topics.broker_topic("b4"), prefix)
        b2_delivered = _broker_delivered(cluster, LOCAL_HOST) - b2_before
    finally:
        cluster.stop()
        shutil.rmtree(kafka.dir, ignore_errors=True)
    hop = [(forwarded[m] - arrived[m]) / 1000 for m in arrived if m in forwarded]
    lat = [clock.first[m] - t for m, t in sent.items() if m in clock.first]
    n = len(sent)
    return {"label": label, "local_profiles": len(texts), "converge_s": loaded["converge_s"],
            "steady_rate": rate, "steady_messages": n, "forwarded_messages": len(hop),
            "b2_hop_p50_s": _pct(hop, 0.5), "b2_hop_p99_s": _pct(hop, 0.99),
            "b2_hop_mean_s": statistics.mean(hop) if hop else None, "b2_hops_s": hop,
            "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99),
            "b2_deliveries_per_message": b2_delivered / max(1, n),
            "broker_ms_per_message": {k[2:]: 1000 * v / max(1, n) for k, v in delta.items() if k.startswith("s_")}}


def _broker_delivered(cluster: LocalOverlay, broker: str) -> int:
    return next(b["delivered"] for b in cluster.job.status() if b["broker"] == broker)


def local_load(spark, sizes: list[int], transforms: int, n_steady: int, rate: float, seed: int) -> dict:
    """The local-load runs (see :func:`local_load_run`): no profiles at b2, then each of
    ``sizes`` generator filters at b2, then ``transforms`` transformation profiles at b2,
    then no profiles at b2 again. The ratios are to both runs without profiles pooled (the
    first overlay of a Spark session runs on cold JVMs and Python workers: in a first run
    it was the slowest of all)."""
    steady = _nitf_messages(WARM_UP + n_steady, seed + 1)
    plan = [("none", [])] + [(f"filters-{n}", _nitf_profiles(n, seed)) for n in sizes]
    if transforms:
        plan.append((f"transforms-{transforms}", _transform_profiles(transforms, seed)))
    plan.append(("none-again", []))
    runs = []
    for label, texts in plan:
        print(f"  {label:18} at b2 ...", end="", flush=True)
        r = local_load_run(spark, label, texts, steady, rate)
        runs.append(r)
        print(f" b2 arrival -> forward p50 {r['b2_hop_p50_s'] * 1e3:.0f} ms, p99 {r['b2_hop_p99_s'] * 1e3:.0f} ms; "
              f"publish -> b6 p50 {r['latency_p50_s']:.2f} s; {r['b2_deliveries_per_message']:,.1f} deliveries "
              f"at b2 a message", flush=True)
    pooled = [h for r in runs if not r["local_profiles"] for h in r["b2_hops_s"]]
    base = {"b2_hop_p50_s": _pct(pooled, 0.5), "b2_hop_p99_s": _pct(pooled, 0.99), "hops": len(pooled)}
    for r in runs:
        r["b2_hop_p50_ratio"] = r["b2_hop_p50_s"] / base["b2_hop_p50_s"]
        r["b2_hop_p99_ratio"] = r["b2_hop_p99_s"] / base["b2_hop_p99_s"]
    return {"runs": runs, "baseline": base}


def _level_tables(overlay, status_tables: dict) -> dict:
    """Table sizes of the news tree by level (0: the root), per broker: whatever keys the
    brokers report (``atoms``, ``nfa_states``, ``guards``, ``conjunctions``, ``exact_*``, ...)."""
    root = overlay.root_of("news")
    tree = overlay.tree(root)
    out: dict[str, dict] = {}
    for broker, per_root in status_tables.items():
        t = (per_root or {}).get(root)
        if t:
            out[broker] = {"level": len(tree.path_to_root(broker)) - 1, **t}
    return out


def generalization(spark, mixes: list[str], sizes: list[int], budget: Budget, n_burst: int, n_steady: int,
                   rate: float, seed: int) -> dict:
    """Exact tables against tables generalized to ``budget``, per mix and size, each on a
    fresh overlay in routing mode (see :func:`overlay_run`, with the canary and the link
    check): table sizes per broker and level, links and false positives per message, p50/p99
    at b6, and convergence after the bulk registration."""
    runs = []
    for m in mixes:
        mix = MIXES[m]
        burst, steady = mix.messages(n_burst, seed), mix.messages(n_steady, seed + 1)
        for n in sizes:
            for tables in (EXACT, budget):
                label = "exact" if tables == EXACT else f"budget {tables}"
                print(f"  {m:9} {n:>7,} profiles, {label} ...", end="", flush=True)
                r = overlay_run(spark, "route", mix, n, burst, steady, rate, seed, budget=tables,
                                canary=True, truth=True)
                r["mode"], r["tables_kind"] = "routing", "exact" if tables == EXACT else "generalized"
                r["tables_by_broker"] = _level_tables(builtin("figure4"), r["tables"])
                runs.append(r)
                c, ld = r["links_checked"], r["loading"]
                print(f" {r['throughput_msg_s']:,.0f} msg/s, p50 {r['latency_p50_s'] or float('nan'):.2f} s, "
                      f"p99 {r['latency_p99_s'] or float('nan'):.2f} s, links {c['links_sent_per_message']:.2f}/msg "
                      f"(needed {c['links_needed_per_message']:.2f}, false positives "
                      f"{c['false_positives_per_message']:.2f}, false negatives {c['false_negatives']}), "
                      f"quiet {ld['quiet_s']:.1f} s / canary {ld.get('canary_s') or float('nan'):.1f} s "
                      f"after the last packet", flush=True)
    return {"runs": runs, "budget": str(budget)}


def _batch(query) -> int:
    """The last micro-batch id of ``query`` (-1 before the first, or without a query)."""
    progress = query.lastProgress if query is not None else None
    return progress["batchId"] if progress else -1


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["overlay"] + [dict(p, mode="peer") for p in result.get("peer", [])]
    raw = result["raw_kafka"]
    sub = lambda r: f" s{r['subscribers']}" if r.get("subscribers", 1) != 1 else ""  # noqa: E731
    labels = [("Spark\nfloor" if r["mode"] == "floor" else
               f"{r['mode']}\n{r['mix']}\n{r['profiles']:,}{sub(r)}\n" +
               ("one process" if r["mode"] == "peer" else r.get("deployment", LOCAL.label)))
              for r in runs] + ["raw\nKafka"]
    colors = {"routing": "tab:blue", "routing-whole": "tab:cyan", "flooding": "tab:orange", "floor": "tab:green",
              "peer": "tab:red"}
    fig, (a, b) = plt.subplots(2, 1, figsize=(max(10, len(labels) * 0.9), 8))
    a.bar(labels, [r["throughput_msg_s"] for r in runs] + [raw["throughput_msg_s"]],
          color=[colors[r["mode"]] for r in runs] + ["tab:gray"])
    a.set_yscale("log")
    a.set_ylabel("messages/s (burst)")
    a.set_title("sustained throughput: six brokers (Spark) against the centralized peer (one process, one engine)")
    x = list(range(len(labels)))
    p50 = [r["latency_p50_s"] or 0 for r in runs] + [raw["latency_p50_s"]]
    p99 = [r["latency_p99_s"] or 0 for r in runs] + [raw["latency_p99_s"]]
    b.bar([i - 0.2 for i in x], p50, 0.4, label="p50")
    b.bar([i + 0.2 for i in x], p99, 0.4, label="p99")
    b.axhline(1.0, color="k", lw=0.6, ls="--")
    b.set_xticks(x, labels, fontsize=7)
    a.set_xticks(x, labels, fontsize=7)
    b.set_ylabel("seconds, publish -> delivery")
    b.set_title("latency at 20 msg/s: overlay to the probe at b6 (three link hops), peer to its probe's record")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def print_local_load(result: dict) -> None:
    base = result["baseline"]
    print(f"\nwithout local profiles (both runs pooled): p50 {base['b2_hop_p50_s'] * 1e3:.0f} ms, "
          f"p99 {base['b2_hop_p99_s'] * 1e3:.0f} ms")
    print(f"{'at b2':<22} {'hop p50 ms':>10} {'hop p99 ms':>10} {'x none p50':>10} {'x none p99':>10} "
          f"{'b6 p50 s':>8} {'b6 p99 s':>8} {'deliv/msg':>9}")
    for r in result["runs"]:
        print(f"{r['label']:<22} {r['b2_hop_p50_s'] * 1e3:>10.0f} {r['b2_hop_p99_s'] * 1e3:>10.0f} "
              f"{r['b2_hop_p50_ratio']:>9.2f}x {r['b2_hop_p99_ratio']:>9.2f}x "
              f"{r['latency_p50_s']:>8.2f} {r['latency_p99_s']:>8.2f} {r['b2_deliveries_per_message']:>9,.1f}")


def plot_local_load(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = [r["label"] for r in runs]
    x = list(range(len(runs)))
    fig, a = plt.subplots(figsize=(max(6, 2 * len(runs)), 4.5))
    a.bar([i - 0.2 for i in x], [r["b2_hop_p50_s"] * 1e3 for r in runs], 0.4, label="p50")
    a.bar([i + 0.2 for i in x], [r["b2_hop_p99_s"] * 1e3 for r in runs], 0.4, label="p99")
    a.axhline(result["baseline"]["b2_hop_p50_s"] * 1.2e3, color="k", lw=0.6, ls="--",
              label="1.2x p50 without local profiles (both runs)")
    a.set_xticks(x, labels)
    a.set_ylabel("ms, arrival at b2 -> forward to b4 (CreateTimes)")
    a.set_title("b2's forwarding time against its local load (20 msg/s, probe at b6)")
    a.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _size(t: dict, key: str):
    return t.get(key, t.get(f"exact_{key}"))


def print_generalization(result: dict) -> None:
    print(f"\n{'run':<34} {'msg/s':>7} {'p50 s':>6} {'p99 s':>6} {'links':>6} {'needed':>6} {'FP/msg':>6} {'FN':>3} "
          f"{'quiet s':>7} {'canary s':>8}  tables (b1 / b2 / b4: atoms, states, predicates)")
    for r in result["runs"]:
        c, ld, t = r["links_checked"], r["loading"], r["tables_by_broker"]
        sizes = " / ".join(f"{_size(t[b], 'atoms')}, {_size(t[b], 'nfa_states')}, {_size(t[b], 'guards')}"
                           for b in ("b1", "b2", "b4") if b in t)
        f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        print(f"{r['mix'] + ' ' + format(r['profiles'], ',') + ' ' + r['tables_kind']:<34} "
              f"{r['throughput_msg_s']:>7,.0f} {f(r['latency_p50_s'], '.2f'):>6} {f(r['latency_p99_s'], '.2f'):>6} "
              f"{c['links_sent_per_message']:>6.2f} {c['links_needed_per_message']:>6.2f} "
              f"{c['false_positives_per_message']:>6.2f} {c['false_negatives']:>3} {ld['quiet_s']:>7.1f} "
              f"{f(ld.get('canary_s'), '.1f'):>8}  {sizes}")


def plot_generalization(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = [f"{r['mix']}\n{r['profiles']:,}\n{r['tables_kind']}" for r in runs]
    x = list(range(len(runs)))
    fig, axes = plt.subplots(2, 2, figsize=(max(10, 1.6 * len(runs)), 8))
    a, b, c, d = axes.flat
    for broker, off in (("b1", -0.25), ("b2", 0), ("b4", 0.25)):
        a.bar([i + off for i in x], [_size(r["tables_by_broker"].get(broker, {}), "atoms") or 0 for r in runs], 0.25,
              label=f"{broker} (level {1 if broker == 'b2' else 2 if broker == 'b4' else 0})")
    a.set_yscale("symlog")
    a.set_ylabel("atoms in the table routed with")
    a.legend(fontsize=7)
    b.bar([i - 0.2 for i in x], [r["links_checked"]["links_sent_per_message"] for r in runs], 0.4, label="sent")
    b.bar([i + 0.2 for i in x], [r["links_checked"]["links_needed_per_message"] for r in runs], 0.4, label="needed")
    b.set_ylabel("link sends per message")
    b.legend(fontsize=7)
    c.bar([i - 0.2 for i in x], [r["latency_p50_s"] or 0 for r in runs], 0.4, label="p50")
    c.bar([i + 0.2 for i in x], [r["latency_p99_s"] or 0 for r in runs], 0.4, label="p99")
    c.set_ylabel("s, publish -> b6 at 20 msg/s")
    c.legend(fontsize=7)
    d.bar([i - 0.2 for i in x], [r["loading"]["quiet_s"] for r in runs], 0.4, label="tables quiet")
    d.bar([i + 0.2 for i in x], [r["loading"].get("canary_s") or 0 for r in runs], 0.4, label="last profile served")
    d.set_ylabel("s after the last profile packet")
    d.legend(fontsize=7)
    for ax in axes.flat:
        ax.set_xticks(x, labels, fontsize=7)
    fig.suptitle(f"exact vs generalized routing tables ({result['budget']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _row(name: str, r: dict) -> str:
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    return (f"{name:<42} {f(r['throughput_msg_s'], ',.0f'):>8} {f(r.get('latency_p50_s'), '.3f'):>7} "
            f"{f(r.get('latency_p99_s'), '.3f'):>7} {f(r.get('forwarded_per_message'), '.2f'):>6} "
            f"{f(r.get('deliveries_per_message'), ',.1f'):>8} {f(r.get('bytes_written_per_message'), ',.0f'):>10} "
            f"{f(r.get('cpu_s_per_message', 0) * 1000, '.2f'):>8}")


def _transformation_summary(runs: list[dict], bandwidths: list[float]) -> list[dict]:
    """Per mix, size and bandwidth: incremental transformation (``routing`` at that
    bandwidth) against links that carry whole messages (``routing-whole``): link bytes and
    CPU per message, and the end-to-end cost per message, CPU + link bytes x 8 / bandwidth
    (printed)."""
    out = []
    for whole in (r for r in runs if r["mode"] == "routing-whole" and r["deployment"] == LOCAL.label):
        for bw in bandwidths:
            on = next((r for r in runs if r["mode"] == "routing" and r["deployment"] == LOCAL.label
                       and (r["mix"], r["profiles"], r.get("subscribers", 1)) ==
                       (whole["mix"], whole["profiles"], whole.get("subscribers", 1)) and r["bandwidth"] == bw), None)
            if on is None:
                continue
            cost = {k: r["cpu_s_per_message"] + r["link_bytes_per_message"] * 8 / bw
                    for k, r in (("with", on), ("without", whole))}
            out.append({"mix": whole["mix"], "profiles": whole["profiles"], "bandwidth": bw,
                        "link_bytes_with": on["link_bytes_per_message"],
                        "link_bytes_without": whole["link_bytes_per_message"],
                        "link_bytes_ratio": on["link_bytes_per_message"] / max(1e-9, whole["link_bytes_per_message"]),
                        "cpu_s_with": on["cpu_s_per_message"], "cpu_s_without": whole["cpu_s_per_message"],
                        "transformed_per_message": on["projected_per_message"],
                        # the same profiles and messages: a transformation must not change them
                        "deliveries_with": on["deliveries_per_message"],
                        "deliveries_without": whole["deliveries_per_message"],
                        "cost_s_with": cost["with"], "cost_s_without": cost["without"],
                        "cost_ratio": cost["with"] / max(1e-12, cost["without"])})
    if out:
        print(f"\n{'incremental transformation':<34} {'bit/s':>7} {'link bytes/msg':>21} {'x':>6} "
              f"{'CPU ms/msg':>15} {'cost ms/msg':>15} {'x':>6}")
        for t in out:
            print(f"{t['mix'] + ' ' + format(t['profiles'], ','):<34} {t['bandwidth']:>7.0e} "
                  f"{t['link_bytes_without']:>10,.0f} -> {t['link_bytes_with']:>7,.0f} {t['link_bytes_ratio']:>6.3f} "
                  f"{t['cpu_s_without'] * 1e3:>6.2f} -> {t['cpu_s_with'] * 1e3:>5.2f} "
                  f"{t['cost_s_without'] * 1e3:>6.2f} -> {t['cost_s_with'] * 1e3:>5.2f} {t['cost_ratio']:>6.3f}")
            if t["deliveries_with"] != t["deliveries_without"]:
                print(f"  WRONG: {t['deliveries_with']:g} deliveries a message with transformation, "
                      f"{t['deliveries_without']:g} without")
    return out


def main(argv: list[str] | None = None) -> int:
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(prog="python -m bench.overlay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k profiles, 1,000-message bursts, 100 steady messages")
    ap.add_argument("--profiles", type=ints,
                    help="comma-separated profile counts (default 1000,10000,100000; --local-load: 100000, "
                         "--generalization: 10000,100000)")
    ap.add_argument("--mixes", type=lambda s: s.split(","), default=list(DEFAULT_MIXES),
                    help=f"comma-separated mixes of {', '.join(MIXES)} (default {','.join(DEFAULT_MIXES)})")
    ap.add_argument("--modes", type=lambda s: s.split(","), default=["routing", "flooding"],
                    help="comma-separated modes besides the floor: routing, flooding, routing-whole "
                         "(routing, links never projected) (default routing,flooding)")
    ap.add_argument("--subscribers", type=ints, default=[1],
                    help="comma-separated subscriber layouts: 1 (every profile one subscriber's, one delivery "
                         "topic) and/or N (profiles spread round-robin over N subscribers, N delivery topics) "
                         "(default 1)")
    ap.add_argument("--budget", type=Budget.parse,
                    help="routing-table budget of every broker, e.g. atoms=1000,states=3000,predicates=300 "
                         f"(default: exact tables; --generalization: {DEFAULT_GENERALIZED})")
    ap.add_argument("--burst", type=int, help="messages in a throughput burst (default 5000)")
    ap.add_argument("--steady", type=int, help="messages in a latency run (default 200)")
    ap.add_argument("--rate", type=float, default=20.0, help="messages/s of the latency run (default 20)")
    ap.add_argument("--no-peer", action="store_true",
                    help="leave out the centralized peer (bench.peer: one consumer, one yfilter.Engine with "
                         "every profile, one record per matching message and delivery topic), which otherwise "
                         "runs once per mix, size and layout on a fresh Kafka, in the same run")
    ap.add_argument("--no-floor", action="store_true", help="leave out the Spark floor run")
    ap.add_argument("--distributed", action="store_true",
                    help="also run each routing configuration on a 3-node Kafka (RF 3, min.insync.replicas 2), "
                         "with every broker a Spark application of its own on a local standalone cluster, and both "
                         "(`onyx up --distributed`), in the same run")
    ap.add_argument("--local-load", action="store_true",
                    help="instead: b2's arrival -> forward time with no local profiles at b2 against --profiles "
                         "generator filters (default 100000) and --transforms transformation profiles at b2 "
                         "(writes overlay_local_load.json unless --out)")
    ap.add_argument("--transforms", type=int, default=10_000,
                    help="--local-load: transformation profiles at b2 in a run of their own (0: none; default 10000)")
    ap.add_argument("--generalization", action="store_true",
                    help="instead: exact against generalized (--budget) tables for each mix and size: table sizes "
                         "per broker and level, links and false positives per message (checked against one engine), "
                         "p50/p99 at b6, convergence after the bulk registration "
                         "(writes overlay_generalization.json unless --out)")
    ap.add_argument("--bandwidths", type=lambda s: [float(b) for b in s.split(",")], default=None,
                    help="comma-separated link bandwidths in bits/s to run the routing mode at (the cost "
                         "model of incremental transformation, ONYX_LINK_BANDWIDTH), e.g. 1e8,1e10 "
                         f"(default: {config.LINK_BANDWIDTH:.0e}); the summary prices every run's link "
                         "bytes at each")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args(argv)
    n_burst = args.burst or (1000 if args.quick else 5000)
    n_steady = args.steady or (100 if args.quick else 200)
    unknown = [m for m in args.mixes if m not in MIXES] + [m for m in args.modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mix or mode: {', '.join(unknown)}")
    name = "overlay_local_load" if args.local_load else "overlay_generalization" if args.generalization else "overlay"
    out = args.out or RESULTS / f"{name}.json"
    png = args.plot or out.with_suffix(".png")
    head = {"argv": sys.argv[1:] if argv is None else argv,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}

    from broker.spark.session import build_session

    if args.local_load or args.generalization:
        spark = build_session("onyx-bench-overlay")
        try:
            if args.local_load:
                sizes = args.profiles or [100_000]
                print(f"local load at b2: none, {sizes} generator filters, {args.transforms} transformation "
                      f"profiles; {n_steady} messages at {args.rate}/s", flush=True)
                result = {**head, **local_load(spark, sizes, args.transforms, n_steady, args.rate, args.seed)}
            else:
                sizes = args.profiles or ([1000] if args.quick else [10_000, 100_000])
                budget = args.budget or Budget.parse(DEFAULT_GENERALIZED)
                print(f"generalization: {args.mixes} at {sizes} profiles, exact vs {budget}; burst {n_burst}, "
                      f"latency at {args.rate}/s over {n_steady} messages", flush=True)
                result = {**head, **generalization(spark, args.mixes, sizes, budget, n_burst, n_steady, args.rate,
                                                   args.seed)}
        finally:
            spark.stop()
        (print_local_load if args.local_load else print_generalization)(result)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        (plot_local_load if args.local_load else plot_generalization)(result, png)
        print(f"\nwrote {out} and {png}")
        return 0

    sizes = args.profiles or ([1000] if args.quick else [1000, 10_000, 100_000])
    print(f"overlay benchmark: profiles {sizes}, mixes {args.mixes}, modes {args.modes}, subscribers "
          f"{args.subscribers}, burst {n_burst}, latency at {args.rate}/s over {n_steady} messages", flush=True)
    nitf_burst, nitf_steady = _nitf_messages(n_burst, args.seed), _nitf_messages(n_steady, args.seed + 1)
    with KafkaDevCluster(name="bench-raw") as kafka:
        print("  raw Kafka (confluent-kafka) ...", end="", flush=True)
        raw = raw_kafka(kafka.bootstrap_servers, nitf_burst, nitf_steady, args.rate)
        print(f" {raw['throughput_msg_s']:,.0f} msg/s, p50 {raw['latency_p50_s'] * 1e3:.1f} ms", flush=True)
    spark = build_session("onyx-bench-overlay")
    runs, peers = [], []
    try:
        plan = [] if args.no_floor else [("floor", MIXES["generator"], 0, LOCAL, 1)]
        bandwidths = args.bandwidths or [config.LINK_BANDWIDTH]
        plan = [(*p, bandwidths[0]) for p in plan]
        plan += [(mode, MIXES[m], n, d, k, bw) for m in args.mixes for n in sizes for k in args.subscribers
                 for mode in args.modes
                 for d in (LOCAL, *(DISTRIBUTED if args.distributed and mode == "routing" else ()))
                 for bw in (bandwidths if mode == "routing" else bandwidths[:1])]
        plan += [] if args.no_peer else [("peer", MIXES[m], n, None, k, None) for m in args.mixes for n in sizes
                                          for k in args.subscribers]
        order = {(m, n, k): i for i, (m, n, k) in enumerate((m, n, k) for m in args.mixes for n in sizes
                                                            for k in args.subscribers)}
        # The floor first; then each mix, size and layout in turn, its peer last.
        plan.sort(key=lambda p: (p[0] != "floor", order.get((p[1].name, p[2], p[4]), -1), p[0] == "peer"))
        for label, mix, n, deployment, k, bandwidth in plan:
            burst, steady = mix.messages(n_burst, args.seed), mix.messages(n_steady, args.seed + 1)
            if label == "peer":
                print(f"  peer     {mix.name:9} {n:>7,} profiles, {k:,} subscriber(s) ...", end="", flush=True)
                r = peer_run(mix, n, burst, steady, args.rate, args.seed, k)
                peers.append(r)
                print(f" {r['throughput_msg_s']:,.0f} msg/s, p50 {r['latency_p50_s'] or float('nan'):.3f} s, "
                      f"p99 {r['latency_p99_s'] or float('nan'):.3f} s, {r['records_per_message']:.2f} records/msg, "
                      f"{r['cpu_s_per_message'] * 1e3:.2f} ms CPU/msg; a message matches "
                      f"{r.get('match_share_mean', 0):.2%} of the profiles "
                      f"(median {r.get('match_share_median', 0):.2%}, "
                      f"{r.get('match_share_min', 0):.2%}-{r.get('match_share_max', 0):.2%}), "
                      f"{r.get('messages_matching_any', 0):.0%} match any (loaded in {r['load_s']:.1f} s)", flush=True)
                continue
            mode, projection = MODES.get(label, ("floor", True))
            print(f"  {label:8} {mix.name:9} {n:>7,} profiles, {k:,} subscriber(s), {deployment.label}"
                  f"{f', links {bandwidth:.0e} bit/s' if len(bandwidths) > 1 and mode == 'route' else ''} ...",
                  end="", flush=True)
            r = overlay_run(spark, mode, mix, n, burst, steady, args.rate, args.seed, projection, args.budget,
                            deployment, subscribers=k, bandwidth=bandwidth)
            r["mode"] = label
            runs.append(r)
            print(f" {r['throughput_msg_s']:,.0f} msg/s, p50 {r['latency_p50_s'] or float('nan'):.2f} s, "
                  f"p99 {r['latency_p99_s'] or float('nan'):.2f} s, {r['forwarded_per_message']:.2f} links/msg, "
                  f"{r['deliveries_per_message']:,.1f} deliveries/msg, {r['link_bytes_per_message']:,.0f} link bytes/msg "
                  f"({r['projected_per_message']:.2f} projected), {r['cpu_s_per_message'] * 1e3:.2f} ms CPU/msg "
                  f"(loaded in {r['converge_s']:.0f} s)", flush=True)
    finally:
        spark.stop()
    fanout = None
    heavy = [r for r in runs if r["mode"] == "routing" and r["mix"] == "generator" and r["deployment"] == LOCAL.label]
    if heavy:
        top = max(heavy, key=lambda r: r["profiles"])
        copies = max(1, round(top["records_per_message"]))
        with KafkaDevCluster(name="bench-fanout") as kafka:
            print(f"  raw fan-out ({copies} records per message, as routing at {top['profiles']:,}) ...",
                  end="", flush=True)
            fanout = raw_fanout(kafka.bootstrap_servers, nitf_burst[:max(200, n_burst // max(1, copies // 10))],
                                copies)
            fanout["profiles"] = top["profiles"]
            print(f" {fanout['throughput_msg_s']:,.1f} msg/s", flush=True)
    print(f"\n{'run':<42} {'msg/s':>8} {'p50 s':>7} {'p99 s':>7} {'links':>6} {'deliv':>8} {'bytes/msg':>10} "
          f"{'CPU ms':>8}")
    print(_row("raw Kafka", raw))
    if fanout:
        print(_row(f"raw fan-out x{fanout['copies']}", fanout))
    for r in runs:
        name = "Spark floor" if r["mode"] == "floor" else f"{r['mode']} {r['mix']} {r['profiles']:,}"
        sub = f" s{r['subscribers']}" if r.get("subscribers", 1) != 1 else ""
        sub += f" {r['bandwidth']:.0e}b/s" if len(bandwidths) > 1 and r["mode"] == "routing" else ""
        print(_row(f"{name}{sub}, {r['deployment']}", r))
    for p in peers:
        sub = f" s{p['subscribers']}" if p["subscribers"] != 1 else ""
        print(_row(f"peer {p['mix']} {p['profiles']:,}{sub}", p))
    floor = next((r for r in runs if r["mode"] == "floor"), None)
    ratios = {}
    for r in runs:
        if r["mode"] == "floor":
            continue
        key = f"{r['mode']}-{r['mix']}-{r['profiles']}-{r['deployment']}" + (
            f"-s{r['subscribers']}" if r.get("subscribers", 1) != 1 else "") + (
            f"-bw{r['bandwidth']:.0e}" if len(bandwidths) > 1 and r["mode"] == "routing" else "")
        ratios[key] = {"throughput_vs_raw": r["throughput_msg_s"] / raw["throughput_msg_s"]}
        if floor:
            ratios[key]["p50_vs_floor"] = (r["latency_p50_s"] or 0) / floor["latency_p50_s"]
        peer = next((p for p in peers if (p["mix"], p["profiles"], p["subscribers"]) ==
                     (r["mix"], r["profiles"], r.get("subscribers", 1))), None)
        if peer:
            ratios[key]["throughput_vs_peer"] = r["throughput_msg_s"] / peer["throughput_msg_s"]
            ratios[key]["p50_vs_peer"] = (r["latency_p50_s"] or 0) / peer["latency_p50_s"]
            ratios[key]["p99_vs_peer"] = (r["latency_p99_s"] or 0) / peer["latency_p99_s"]
            ratios[key]["cpu_vs_peer"] = r["cpu_s_per_message"] / peer["cpu_s_per_message"]
    if peers:
        print(f"\n{'overlay / peer':<42} {'msg/s':>8} {'p50':>7} {'p99':>7} {'CPU':>7}")
        for key, v in ratios.items():
            if "throughput_vs_peer" in v:
                print(f"{key:<42} {v['throughput_vs_peer']:>7.3f}x {v['p50_vs_peer']:>6.1f}x {v['p99_vs_peer']:>6.1f}x "
                      f"{v['cpu_vs_peer']:>6.1f}x")
    transformation = _transformation_summary(runs, bandwidths)
    result = {**head, "raw_kafka": raw, "raw_fanout": fanout, "overlay": runs, "peer": peers, "ratios": ratios,
              "transformation": transformation}
    if fanout:
        result["ratios"]["routing-generator-top_vs_fanout"] = heavy and max(
            heavy, key=lambda r: r["profiles"])["throughput_msg_s"] / fanout["throughput_msg_s"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    plot(result, png)
    print(f"\nwrote {out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
