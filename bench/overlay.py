"""Benchmark of the overlay running for real: the six brokers of ONYX Figure 4, one Spark
Structured Streaming query serving them, over a real Kafka broker, on this machine.

    python -m bench.overlay            # everything below (about two hours on 2 cores)
    python -m bench.overlay --quick    # 1k profiles, fewer messages (about 15 minutes)
    python -m bench.overlay --mixes transforms --profiles 10000 --modes routing,routing-whole \
        --out bench/results/overlay_projection.json --plot bench/results/overlay_projection.png
    python -m bench.overlay --mixes generator --profiles 100000 --modes routing \
        --budget atoms=1000,states=3000,predicates=300 \
        --out bench/results/overlay_budget.json --plot bench/results/overlay_budget.png

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
  one of 1,000 symbols above a price, so a quote matches about 0.05% of the profiles).

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

Prints a table, writes ``bench/results/overlay.json`` and a PNG plot.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from broker import config, topics
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


def _mark_root(doc: bytes) -> bytes:
    """The document with ``probe="1"`` on its root element (what the probe matches)."""
    return re.sub(rb"^(\s*(?:<\?[^>]*\?>\s*)?<[\w.:-]+)", rb'\1 probe="1"', doc, count=1)


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


MIXES = {
    "generator": Mix("generator", _nitf_profiles, _nitf_messages, "/nitf[@probe]", _mark_root),
    "quotes": Mix("quotes", _quote_profiles, _quote_messages, "/quote[@probe]", _mark_root),
    "transforms": Mix("transforms", _transform_profiles, _nitf_messages,
                      "for $n in $msg/nitf[@probe] return <probe/>", _mark_root),
}
"""``transforms`` is not in the default run: ``--mixes transforms --modes routing,routing-whole``
measures early projection on links against the whole message."""

DEFAULT_MIXES = ("generator", "quotes")

MODES = {"routing": ("route", True), "routing-whole": ("route", False), "flooding": ("flood", True)}
"""Bench mode -> the plan's mode and whether links may carry projections."""


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and every process below it: the Kafka
    broker, Spark's JVM and its Python workers (Linux ``/proc``)."""
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
    me, total = os.getpid(), 0.0
    for pid, seconds in used.items():
        p = pid
        while p and p != me:
            p = parent.get(p, 0)
        if p == me:
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
                    if self.keep:
                        self.log.append(((msg.key() or b"").decode(), mid, now))

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


# -- the overlay -------------------------------------------------------------------------


def load_profiles(cluster: LocalOverlay, texts: list[str], probe: str) -> float:
    """Write the profiles' query packets (and the probe's, at b6) to their hosts; seconds
    until every routing table has converged."""
    brokers = cluster.overlay.brokers
    producer = _producer(cluster.bootstrap_servers)
    t0 = time.monotonic()
    records = [("probe", probe, PROBE_HOST, PROBE_TOPIC)] + [
        (f"p{i}", text, brokers[i % len(brokers)], BENCH_TOPIC) for i, text in enumerate(texts)]
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
    drained(cluster, timeout=7200)
    return time.monotonic() - t0


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
                deployment: Deployment = LOCAL) -> dict:
    """One fresh overlay (and Kafka): profiles, then latency at ``rate``, then a burst."""
    name = f"bench-{mode}-{mix.name}-{profiles}-k{deployment.kafka_nodes}{'-apps' if deployment.applications else ''}"
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(
        name=name, mode=mode, projection=projection, budget=budget, kafka_nodes=deployment.kafka_nodes,
        applications=deployment.applications), spark=None if deployment.applications else spark)
    cluster.start()
    kafka = cluster.kafka
    # Per-broker applications report no query here: Spark's own stages are left out.
    query = getattr(cluster.job, "query", None)
    try:
        texts = mix.profiles(profiles, seed) if mode != "floor" else []
        converge_s = load_profiles(cluster, texts, mix.probe)
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
        batch0 = _batch(query)
        t0 = time.monotonic()
        send(kafka.bootstrap_servers, SOURCE_TOPIC, burst, 0.0, f"{name}-burst")
        end = drained(cluster, timeout=7200)
        cpu = cpu_seconds() - cpu0
        after = _totals(cluster)
        stages_burst = _spark_stages(query, batch0)
        batches = max(1, _batch(query) - batch0)
        clock.stop()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        n = len(burst)
        status = cluster.job.status()
        return {"mode": mode, "mix": mix.name, "profiles": profiles, "converge_s": converge_s,
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


def _batch(query) -> int:
    """The last micro-batch id of ``query`` (-1 before the first, or without a query)."""
    progress = query.lastProgress if query is not None else None
    return progress["batchId"] if progress else -1


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["overlay"]
    raw = result["raw_kafka"]
    labels = [f"{r['mode']}\n{r['mix']}\n{r['profiles']:,}\n{r.get('deployment', LOCAL.label)}"
              if r["mode"] != "floor" else "Spark\nfloor"
              for r in runs] + ["raw\nKafka"]
    colors = {"routing": "tab:blue", "routing-whole": "tab:cyan", "flooding": "tab:orange", "floor": "tab:green"}
    fig, (a, b) = plt.subplots(2, 1, figsize=(max(10, len(labels) * 0.9), 8))
    a.bar(labels, [r["throughput_msg_s"] for r in runs] + [raw["throughput_msg_s"]],
          color=[colors[r["mode"]] for r in runs] + ["tab:gray"])
    a.set_yscale("log")
    a.set_ylabel("messages/s (burst)")
    a.set_title("sustained throughput, six brokers: one Spark application (local[2]) or one each (standalone), "
                "Kafka RF 1 or 3")
    x = list(range(len(labels)))
    p50 = [r["latency_p50_s"] or 0 for r in runs] + [raw["latency_p50_s"]]
    p99 = [r["latency_p99_s"] or 0 for r in runs] + [raw["latency_p99_s"]]
    b.bar([i - 0.2 for i in x], p50, 0.4, label="p50")
    b.bar([i + 0.2 for i in x], p99, 0.4, label="p99")
    b.axhline(1.0, color="k", lw=0.6, ls="--")
    b.set_xticks(x, labels, fontsize=7)
    a.set_xticks(x, labels, fontsize=7)
    b.set_ylabel("seconds, publish -> delivery at b6")
    b.set_title("latency over three link hops at 20 msg/s")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _row(name: str, r: dict) -> str:
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    return (f"{name:<42} {f(r['throughput_msg_s'], ',.0f'):>8} {f(r.get('latency_p50_s'), '.3f'):>7} "
            f"{f(r.get('latency_p99_s'), '.3f'):>7} {f(r.get('forwarded_per_message'), '.2f'):>6} "
            f"{f(r.get('deliveries_per_message'), ',.1f'):>8} {f(r.get('bytes_written_per_message'), ',.0f'):>10} "
            f"{f(r.get('cpu_s_per_message', 0) * 1000, '.2f'):>8}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.overlay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k profiles, 1,000-message bursts, 100 steady messages")
    ap.add_argument("--profiles", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated profile counts (default 1000,10000,100000)")
    ap.add_argument("--mixes", type=lambda s: s.split(","), default=list(DEFAULT_MIXES),
                    help=f"comma-separated mixes of {', '.join(MIXES)} (default {','.join(DEFAULT_MIXES)})")
    ap.add_argument("--modes", type=lambda s: s.split(","), default=["routing", "flooding"],
                    help="comma-separated modes besides the floor: routing, flooding, routing-whole "
                         "(routing, links never projected) (default routing,flooding)")
    ap.add_argument("--budget", type=Budget.parse,
                    help="routing-table budget of every broker, e.g. atoms=1000,states=3000,predicates=300 "
                         "(default: exact tables)")
    ap.add_argument("--burst", type=int, help="messages in a throughput burst (default 5000)")
    ap.add_argument("--steady", type=int, help="messages in a latency run (default 200)")
    ap.add_argument("--rate", type=float, default=20.0, help="messages/s of the latency run (default 20)")
    ap.add_argument("--distributed", action="store_true",
                    help="also run each routing configuration on a 3-node Kafka (RF 3, min.insync.replicas 2), "
                         "with every broker a Spark application of its own on a local standalone cluster, and both "
                         "(`onyx up --distributed`), in the same run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "overlay.json")
    ap.add_argument("--plot", type=Path, default=RESULTS / "overlay.png")
    args = ap.parse_args(argv)
    sizes = args.profiles or ([1000] if args.quick else [1000, 10_000, 100_000])
    n_burst = args.burst or (1000 if args.quick else 5000)
    n_steady = args.steady or (100 if args.quick else 200)
    unknown = [m for m in args.mixes if m not in MIXES] + [m for m in args.modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mix or mode: {', '.join(unknown)}")

    from broker.spark.session import build_session

    print(f"overlay benchmark: profiles {sizes}, mixes {args.mixes}, modes {args.modes}, burst {n_burst}, "
          f"latency at {args.rate}/s over {n_steady} messages", flush=True)
    nitf_burst, nitf_steady = _nitf_messages(n_burst, args.seed), _nitf_messages(n_steady, args.seed + 1)
    with KafkaDevCluster(name="bench-raw") as kafka:
        print("  raw Kafka (confluent-kafka) ...", end="", flush=True)
        raw = raw_kafka(kafka.bootstrap_servers, nitf_burst, nitf_steady, args.rate)
        print(f" {raw['throughput_msg_s']:,.0f} msg/s, p50 {raw['latency_p50_s'] * 1e3:.1f} ms", flush=True)
    spark = build_session("onyx-bench-overlay")
    runs = []
    try:
        plan = [("floor", MIXES["generator"], 0, LOCAL)]
        plan += [(mode, MIXES[m], n, d) for m in args.mixes for n in sizes for mode in args.modes
                 for d in (LOCAL, *(DISTRIBUTED if args.distributed and mode == "routing" else ()))]
        for label, mix, n, deployment in plan:
            mode, projection = MODES.get(label, ("floor", True))
            print(f"  {label:8} {mix.name:9} {n:>7,} profiles, {deployment.label} ...", end="", flush=True)
            burst, steady = mix.messages(n_burst, args.seed), mix.messages(n_steady, args.seed + 1)
            r = overlay_run(spark, mode, mix, n, burst, steady, args.rate, args.seed, projection, args.budget,
                            deployment)
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
        print(_row(f"{name}, {r['deployment']}", r))
    floor = next(r for r in runs if r["mode"] == "floor")
    result = {"argv": sys.argv[1:] if argv is None else argv,
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
              "raw_kafka": raw, "raw_fanout": fanout, "overlay": runs,
              "ratios": {f"{r['mode']}-{r['mix']}-{r['profiles']}-{r['deployment']}": {
                  "p50_vs_floor": (r["latency_p50_s"] or 0) / floor["latency_p50_s"],
                  "throughput_vs_raw": r["throughput_msg_s"] / raw["throughput_msg_s"]}
                  for r in runs if r["mode"] != "floor"}}
    if fanout:
        result["ratios"]["routing-generator-top_vs_fanout"] = heavy and max(
            heavy, key=lambda r: r["profiles"])["throughput_msg_s"] / fanout["throughput_msg_s"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    plot(result, args.plot)
    print(f"\nwrote {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
