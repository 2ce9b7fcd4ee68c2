"""Benchmark of the overlay running for real: the six brokers of ONYX Figure 4 as Spark
Structured Streaming queries over a real Kafka broker, on this machine.

    python -m bench.overlay            # 1k and 100k profiles (about an hour on 2 cores)
    python -m bench.overlay --quick    # 1k profiles, fewer messages (a few minutes)

In one run, on this machine's loopback (each overlay on a fresh Kafka broker):

* **raw Kafka pass-through** (the ceiling): a producer writes the same messages to a
  topic and a consumer reads them back — messages/s, and latency from send to receipt;
* for each profile count, **content-based routing** and **flooding** (every broker
  forwards every message down every link of its tree, the baseline): a fresh overlay
  of six brokers, profiles loaded, then
  - sustained throughput: a burst of messages published at full speed, timed from the
    first send until every broker has drained its input (messages/s);
  - end-to-end latency: messages published at a steady rate well below that
    throughput; per message, from its send to its delivery to a probe profile that
    every message matches, hosted at b6, the far end of the tree (three link hops),
    on a delivery topic of its own (p50/p99);
  - messages forwarded on links, and deliveries (each a copy of the message, on the
    host's delivery topic), per message.

Profiles are generated NITF filters (one or two value predicates) spread round-robin
over the brokers. For speed the benchmark writes the profiles' query packets straight
to the host brokers' inbound topics — the same packets the registration service sends
— instead of 100,000 HTTP requests; the service is measured by the end-to-end tests.
Messages are generated NITF documents. Spark's real-time mode is tried too, on a
one-hop Kafka -> Python -> Kafka query: Spark 4.1 refuses Python code in it by an
allowlist, which is reported; the attempt is repeated with that check off.

Prints a table, writes ``bench/results/overlay.json`` and a PNG plot.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import shutil
import sys
import threading
import time
from pathlib import Path

from broker import topics
from broker.cluster import LocalOverlay, OverlaySettings
from broker.control_packets import query_packet
from broker.devcluster import KafkaDevCluster
from broker.store import ProfileRecord
from routing.overlay import builtin
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

RESULTS = Path(__file__).resolve().parent / "results"
SOURCE_TOPIC = topics.source_topic("news")  # the source of the figure4 overlay
PROBE = ("bench-probe", "/nitf", "b6")
"""The latency probe: a profile every message matches, hosted at the far end of the
tree (b1 -> b2 -> b4 -> b6), delivering to a topic of its own so the clock does not
have to read every other profile's deliveries."""


def _messages(n: int, seed: int) -> list[bytes]:
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=seed)
    return [gen.generate() for _ in range(n)]


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def raw_kafka(bootstrap: str, burst: list[bytes], steady: list[bytes], rate: float) -> dict:
    """Producer -> topic -> consumer, nothing in between: throughput of ``burst`` sent
    at full speed, latency of ``steady`` sent at ``rate``."""
    from kafka import KafkaConsumer

    topic = f"bench.raw.{time.time_ns()}"
    topics.ensure_topics(bootstrap, [topic])
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="latest",
                             consumer_timeout_ms=200)
    consumer.poll(1000)  # join and take the partition before anything is sent
    out = {}
    for docs, pace, name in ((burst, 0.0, "burst"), (steady, rate, "steady")):
        sent: dict[str, float] = {}
        got: dict[str, float] = {}
        t0 = time.monotonic()
        sender = threading.Thread(target=lambda: sent.update(_send_keyed(bootstrap, topic, docs, pace, name)))
        sender.start()
        deadline = time.monotonic() + 300
        while len(got) < len(docs) and time.monotonic() < deadline:
            for r in consumer:
                got.setdefault(r.key.decode(), time.monotonic())
        sender.join()
        if name == "burst":
            out["throughput_msg_s"] = len(got) / (max(got.values()) - t0)
        else:
            lat = [got[k] - sent[k] for k in got if k in sent]
            out["latency_p50_s"], out["latency_p99_s"] = _pct(lat, 0.5), _pct(lat, 0.99)
    consumer.close()
    return out


def load_profiles(cluster: LocalOverlay, n: int, seed: int) -> float:
    """Write ``n`` profiles' query packets to their hosts; seconds until every routing
    table has converged."""
    from kafka import KafkaProducer

    texts = ProfileGenerator(Schema.nitf(), n_preds=(1, 2), p_star=0.1, p_desc=0.2, seed=seed).batch(n)
    brokers = cluster.overlay.brokers
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=20)
    t0 = time.monotonic()
    pid, text, host = PROBE
    key, value, headers = query_packet("add", ProfileRecord(pid, text, host, _probe_topic(cluster), 1))
    producer.send(topics.broker_topic(host), key=key, value=value, headers=headers)
    for i, text in enumerate(texts):
        host = brokers[i % len(brokers)]
        key, value, headers = query_packet("add", ProfileRecord(f"p{i}", text, host, topics.delivery_topic(host), 1))
        producer.send(topics.broker_topic(host), key=key, value=value, headers=headers)
    producer.flush()
    producer.close()
    cluster.wait_idle(timeout=7200, settle=2.0)
    return time.monotonic() - t0


def _probe_topic(cluster: LocalOverlay) -> str:
    return f"bench.probe.{cluster.settings.name}"


class DeliveryClock:
    """Per message id, when the probe profile's delivery of it was seen (a consumer thread)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from broker.clients import TopicTail

        self.reader = TopicTail(bootstrap, [topic])  # creates the topic if it is missing
        self.first: dict[str, float] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for r in self.reader:
                mid = dict(r.headers).get("onyx-message-id", b"").decode()
                self.first.setdefault(mid, time.monotonic())

    def wait_for(self, ids, timeout: float) -> None:
        """Until every one of ``ids`` has been seen, or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(i in self.first for i in ids) and self.thread.is_alive():
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.reader.close()


def _send_keyed(bootstrap: str, topic: str, docs: list[bytes], rate: float, prefix: str = "m") -> dict[str, float]:
    """Send ``docs`` to ``topic`` (at ``rate``/s, 0 = full speed), each keyed and
    ``onyx-message-id``-ed by ``<prefix>-<i>``; returns send times by id."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             max_request_size=16 * 1024 * 1024)
    sent = {}
    start = time.monotonic()
    for i, d in enumerate(docs):
        if rate:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
        mid = f"{prefix}-{i}"
        sent[mid] = time.monotonic()
        producer.send(topic, key=mid.encode(), value=d, headers=[("onyx-message-id", mid.encode())])
    producer.flush()
    producer.close()
    return sent


def _counted(cluster: LocalOverlay) -> tuple[int, int]:
    """Messages forwarded on links and deliveries so far, over all brokers."""
    status = [j.status() for j in cluster.jobs.values()]
    return sum(s["forwarded"] for s in status), sum(s["delivered"] for s in status)


def overlay_run(spark, profiles: int, flood: bool, burst: list[bytes],
                steady: list[bytes], rate: float, seed: int) -> dict:
    """One fresh overlay on a Kafka broker of its own (topics named by the contract
    would otherwise still hold the previous run's profiles and messages, and a new
    overlay reads them from the start): load profiles, then throughput and latency."""
    mode = "flooding" if flood else "routing"
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(name=f"bench-{mode}-{profiles}", flood=flood),
                           spark=spark)
    cluster.start()
    kafka = cluster.kafka
    try:
        converge_s = load_profiles(cluster, profiles, seed)
        clock = DeliveryClock(kafka.bootstrap_servers, _probe_topic(cluster))
        before = _counted(cluster)
        t0 = time.monotonic()
        _send_keyed(kafka.bootstrap_servers, SOURCE_TOPIC, burst, 0.0, f"{mode}-{profiles}-burst")
        cluster.wait_idle(timeout=7200, settle=2.0)
        throughput = len(burst) / max(1e-9, time.monotonic() - 2.0 - t0)  # the settle time is not work
        forwarded, delivered = (a - b for a, b in zip(_counted(cluster), before))
        sent = _send_keyed(kafka.bootstrap_servers, SOURCE_TOPIC, steady, rate, f"{mode}-{profiles}-steady")
        cluster.wait_idle(timeout=7200, settle=2.0)
        clock.wait_for(sent, timeout=60.0)
        clock.stop()
        lat = [clock.first[m] - t for m, t in sent.items() if m in clock.first]
        return {"mode": mode, "profiles": profiles, "converge_s": converge_s,
                "burst_messages": len(burst), "throughput_msg_s": throughput,
                "forwarded_per_message": forwarded / len(burst),
                "deliveries_per_message": delivered / len(burst), "steady_rate": rate,
                "steady_messages": len(steady), "delivered_messages": len(lat),
                "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99),
                "latency_median_s": statistics.median(lat) if lat else None}
    finally:
        cluster.stop()
        shutil.rmtree(kafka.dir, ignore_errors=True)  # gigabytes of deliveries at 100k profiles


def _rtm_attempt(kafka: KafkaDevCluster, spark, docs: list[bytes], rate: float) -> dict:
    """One real-time-mode query, Kafka -> a Python function per record -> Kafka; if it
    starts, the latency of ``docs`` sent at ``rate`` through it."""
    from kafka import KafkaConsumer
    from pyspark.sql import functions as F

    src = f"bench.rtm.{time.time_ns()}"
    topics.ensure_topics(kafka.bootstrap_servers, [src, src + ".out"])
    tag = F.udf(lambda v: (v or b"")[:64], "binary")
    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", src).load().select("key", tag("value").alias("value")))
    writer = (df.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("topic", src + ".out").option("checkpointLocation", f"/tmp/onyx-rtm-{time.time_ns()}")
              .outputMode("update"))
    trigger = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.RealTimeTrigger.apply("5 seconds")
    query = writer._jwrite.trigger(trigger).start()
    try:
        time.sleep(8)
        error = query.exception()  # a Scala Option: this is the JVM query
        if error.isDefined():
            return {"started": False, "error": str(error.get().getMessage()).splitlines()[0][:400]}
        consumer = KafkaConsumer(src + ".out", bootstrap_servers=kafka.bootstrap_servers,
                                 auto_offset_reset="earliest", consumer_timeout_ms=200)
        sent = _send_keyed(kafka.bootstrap_servers, src, docs, rate)
        got: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(got) < len(docs) and time.monotonic() < deadline:
            for r in consumer:
                got.setdefault(r.key.decode(), time.monotonic())
        consumer.close()
        lat = [got[k] - t for k, t in sent.items() if k in got]
        return {"started": True, "error": None, "delivered": len(lat), "sent": len(docs),
                "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99)}
    finally:
        query.stop()


def real_time_mode(kafka: KafkaDevCluster, spark, docs: list[bytes], rate: float) -> dict:
    """Try Spark's real-time trigger (Spark 4.1, JVM API: PySpark has no ``realTime=``
    yet) on the shape of a broker's data plane. Spark 4.1 refuses Python code in it by
    an allowlist; the attempt is repeated with that check turned off, as Spark's error
    suggests, to see what latency it would give."""
    out = {"default": _rtm_attempt(kafka, spark, docs, rate)}
    if not out["default"]["started"]:
        key = "spark.sql.streaming.realTimeMode.allowlistCheck"
        spark.conf.set(key, "false")
        try:
            out["allowlist_check_off"] = _rtm_attempt(kafka, spark, docs, rate)
        finally:
            spark.conf.unset(key)
    return out


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["overlay"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r['mode']}\n{r['profiles']:,}" for r in runs] + ["raw Kafka"]
    a.bar(labels, [r["throughput_msg_s"] for r in runs] + [result["raw_kafka"]["throughput_msg_s"]],
          color=["tab:blue" if r["mode"] == "routing" else "tab:orange" for r in runs] + ["tab:gray"])
    a.set_yscale("log")
    a.set_ylabel("messages/s (burst)")
    a.set_title("sustained throughput, six-broker overlay")
    x = range(len(runs) + 1)
    p50 = [r["latency_p50_s"] or 0 for r in runs] + [result["raw_kafka"]["latency_p50_s"]]
    p99 = [r["latency_p99_s"] or 0 for r in runs] + [result["raw_kafka"]["latency_p99_s"]]
    b.bar([i - 0.2 for i in x], p50, 0.4, label="p50")
    b.bar([i + 0.2 for i in x], p99, 0.4, label="p99")
    b.set_xticks(list(x), labels)
    b.set_yscale("log")
    b.set_ylabel("seconds, publish to first delivery")
    b.set_title("end-to-end latency (micro-batch)")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.overlay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k profiles, 100-message burst, 60 steady messages")
    ap.add_argument("--profiles", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated profile counts (default 1000,100000)")
    ap.add_argument("--burst", type=int, help="messages in the throughput burst (default 1000)")
    ap.add_argument("--steady", type=int, help="messages in the latency run (default 200)")
    ap.add_argument("--rate", type=float, default=5.0, help="messages/s of the latency run (default 5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "overlay.json")
    ap.add_argument("--plot", type=Path, default=RESULTS / "overlay.png")
    args = ap.parse_args(argv)
    sizes = args.profiles or ([1000] if args.quick else [1000, 100_000])
    n_burst = args.burst or (100 if args.quick else 1000)
    n_steady = args.steady or (60 if args.quick else 200)
    burst, steady = _messages(n_burst, args.seed), _messages(n_steady, args.seed + 1)

    from broker.spark_session import build_session

    print(f"overlay benchmark: profiles {sizes}, burst {n_burst} messages, latency at {args.rate}/s "
          f"over {n_steady} messages", flush=True)
    with KafkaDevCluster(name="bench-overlay") as kafka:
        print("  raw Kafka pass-through ...", end="", flush=True)
        raw = raw_kafka(kafka.bootstrap_servers, burst, steady, args.rate)
        print(f" {raw['throughput_msg_s']:,.0f} msg/s, p50 {raw['latency_p50_s'] * 1e3:.1f} ms", flush=True)
        spark = build_session("onyx-bench-overlay")
        try:
            rtm = real_time_mode(kafka, spark, steady, args.rate)
            for how, r in rtm.items():
                print(f"  real-time mode ({how}): " + (f"p50 {r['latency_p50_s'] * 1e3:.0f} ms, p99 "
                      f"{r['latency_p99_s'] * 1e3:.0f} ms over {r['delivered']}/{r['sent']} records"
                      if r["started"] and r["delivered"] else f"refused: {r['error']}"), flush=True)
            runs = []
            for n in sizes:
                for flood in (False, True):
                    print(f"  {'flooding' if flood else 'routing':8} {n:>7,} profiles ...", end="", flush=True)
                    r = overlay_run(spark, n, flood, burst, steady, args.rate, args.seed)
                    runs.append(r)
                    print(f" {r['throughput_msg_s']:,.1f} msg/s, p50 {r['latency_p50_s'] or float('nan'):.2f} s, "
                          f"p99 {r['latency_p99_s'] or float('nan'):.2f} s, "
                          f"{r['forwarded_per_message']:.2f} link sends/msg, {r['deliveries_per_message']:,.0f} "
                          f"deliveries/msg (loaded in {r['converge_s']:.0f} s)",
                          flush=True)
        finally:
            spark.stop()
    print(f"\n{'run':<20} {'msg/s':>10} {'p50 s':>8} {'p99 s':>8} {'links/msg':>10} {'deliv/msg':>10} {'load s':>8}")
    print(f"{'raw Kafka':<20} {raw['throughput_msg_s']:>10,.0f} {raw['latency_p50_s']:>8.3f} "
          f"{raw['latency_p99_s']:>8.3f} {'':>10} {'':>10} {'':>8}")
    for r in runs:
        print(f"{r['mode'] + ' ' + format(r['profiles'], ','):<20} {r['throughput_msg_s']:>10,.1f} "
              f"{r['latency_p50_s'] or float('nan'):>8.3f} {r['latency_p99_s'] or float('nan'):>8.3f} "
              f"{r['forwarded_per_message']:>10.2f} {r['deliveries_per_message']:>10,.0f} {r['converge_s']:>8.0f}")
    result = {"argv": sys.argv[1:] if argv is None else argv,
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
              "raw_kafka": raw, "real_time_mode": rtm, "overlay": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    plot(result, args.plot)
    print(f"\nwrote {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
