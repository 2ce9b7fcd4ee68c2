"""What per-subscriber delivery topics cost at 100k profiles (issue 24).

    python -m bench.subscribers            # 100k profiles, 1,000 timed registrations, 1,000 real topics (minutes)
    python -m bench.subscribers --quick    # 5k profiles, 200 registrations, 100 topics

A profile now belongs to a subscriber and delivers to the subscriber's own topic
``onyx.deliver.<subscriber id>``, created when the subscriber registers. Two ways to
register 100k profiles bound the cost:

* ``one subscriber``: every profile sent with the subscriber's token; one topic in all
  (what the demo and `onyx subscribe --subscriber-token` do; the baseline: besides the
  token lookup, what a registration cost before subscribers existed);
* ``one per profile``: every profile without a token, so each creates a subscriber and a
  topic (a client that never keeps its subscriber token): 100k topics.

Part 1, the registration service in-process (SQLite file, a fake Kafka producer and topic
admin, so Kafka's share is measured apart): a store is filled to N profiles in each shape
(bulk inserts, the rows the service writes), the service is started on it (start-up
restores placement and checks every stored delivery topic), and R more profiles are
registered through its HTTP API (FastAPI's in-process client) in the same shape, in turns
with the other shape. The per-registration time includes the placement's count of
profiles per broker (one ``GROUP BY`` over all profiles, as before this change), timed
apart as well.

Part 2, a real local Kafka broker: K topics created the way the service creates a
subscriber's topic (:class:`broker.registry.topic_admin.KafkaTopicAdmin`: create, then wait until
the broker's metadata has it): time per topic, disk and broker memory per topic, and the
time to list the topics; then extrapolated to N topics (linearly: a lower bound, Kafka's
per-partition costs grow with the count). Writes ``bench/results/subscribers.json`` and a PNG.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

from bench.output import save
from broker import topics
from broker.registry.store import Store, delivery_topics, hash_token, profiles, subscribers
from routing.overlay import builtin
from yfilter.generators import ProfileGenerator, Schema

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = ("one subscriber", "one per profile")


class _Sink:
    """Stands in for Kafka's producer (control packets) and admin client (topics)."""

    def __init__(self) -> None:
        self.sent = 0
        self.created: list[str] = []

    def send(self, topic, packet) -> None:
        self.sent += 1

    def create(self, topic: str) -> None:
        self.created.append(topic)


def fill(store: Store, texts: list[str], shape: str, hosts: list[str]) -> str | None:
    """Bulk-insert ``texts`` as registered profiles of ``shape``; returns the token of the
    one subscriber (``None`` for one per profile)."""
    now = datetime.now(timezone.utc)
    token = secrets.token_urlsafe(24) if shape == SHAPES[0] else None
    subs, claims, rows = [], [], []
    for i, text in enumerate(texts):
        sid = "s-bench" if token else f"s{i:016x}"
        if token is None or i == 0:
            subs.append({"id": sid, "token_hash": hash_token(token or f"t{i}"), "created": now})
            claims.append({"key": topics.collision_key(topics.delivery_topic(sid)),
                           "topic": topics.delivery_topic(sid), "subscriber_id": sid, "created": now})
        rows.append({"id": f"p{i:015x}", "text": text, "host_broker": hosts[i % len(hosts)],
                     "delivery_topic": topics.delivery_topic(sid), "token_hash": hash_token(f"p{i}"),
                     "version": 1, "created": now, "updated": now, "subscriber_id": sid})
    with store.engine.begin() as conn:
        for table, batch in ((subscribers, subs), (delivery_topics, claims), (profiles, rows)):
            for start in range(0, len(batch), 10_000):
                conn.execute(table.insert(), batch[start:start + 10_000])
    return token


def service_part(n: int, registrations: int, seed: int, workdir: Path) -> dict:
    """Part 1 (see the module docstring), for both shapes; their registrations are timed
    in turns, so that a change in the machine's load hits both alike."""
    from fastapi.testclient import TestClient

    from broker.registry.app import create_app

    overlay = builtin("figure4")
    texts = ProfileGenerator(Schema.nitf(), n_preds=(0, 1), p_star=0.1, p_desc=0.3, seed=seed).batch(n + registrations)
    runs = {}
    for shape in SHAPES:
        db = workdir / f"{shape.replace(' ', '-')}.db"
        store = Store(f"sqlite:///{db}")
        t0 = time.perf_counter()
        token = fill(store, texts[:n], shape, overlay.brokers)
        fill_s = time.perf_counter() - t0
        sink = _Sink()
        t0 = time.perf_counter()
        client = TestClient(create_app(store, overlay, sink, topic_admin=sink, allowed_hosts=["testserver"]))
        startup_s = time.perf_counter() - t0
        headers = {"X-Onyx-Subscriber-Token": token} if token else {}
        runs[shape] = {"db": db, "store": store, "sink": sink, "client": client, "headers": headers,
                       "fill_s": fill_s, "startup_s": startup_s, "times": [], "counts": []}
    for text in texts[n:]:
        for r in runs.values():
            t0 = time.perf_counter()
            r["store"].profile_counts()
            r["counts"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            reply = r["client"].post("/profiles", json={"text": text}, headers=r["headers"])
            r["times"].append(time.perf_counter() - t0)
            assert reply.status_code == 201, reply.text
    out = {}
    for shape, r in runs.items():
        stored, times = r["store"].counts(), r["times"]
        out[shape] = {
            "profiles": stored["profiles"], "subscribers": stored["subscribers"],
            "delivery_topics": stored["delivery_topics"],
            "topics_created_by_timed_registrations": len(r["sink"].created),
            "registration_ms_mean": statistics.fmean(times) * 1e3,
            "registration_ms_p50": statistics.median(times) * 1e3,
            "registration_ms_p99": sorted(times)[int(len(times) * 0.99) - 1] * 1e3,
            "placement_count_ms": statistics.median(r["counts"]) * 1e3,
            "startup_s": r["startup_s"], "bulk_fill_s": r["fill_s"], "database_mb": r["db"].stat().st_size / 1e6,
        }
        r["store"].engine.dispose()
    return out


def _disk(path: Path) -> tuple[int, int]:
    """(bytes on disk, apparent bytes) of every file under ``path``."""
    used = apparent = 0
    for root, _, files in os.walk(path):
        for f in files:
            st = os.stat(os.path.join(root, f))
            used += st.st_blocks * 512
            apparent += st.st_size
    return used, apparent


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def kafka_part(k: int, bootstrap: str | None) -> dict:
    """Part 2 (see the module docstring): ``k`` topics on a fresh local Kafka broker, or
    on ``bootstrap`` (then without disk and memory figures)."""
    from kafka import KafkaAdminClient

    from broker.local.devcluster import KafkaDevCluster
    from broker.registry.topic_admin import KafkaTopicAdmin

    cluster = None if bootstrap else KafkaDevCluster(name="bench-subscribers").start()
    bootstrap = bootstrap or cluster.bootstrap_servers
    try:
        data = cluster.dir / "data" if cluster else None
        disk0 = _disk(data) if data else (0, 0)
        rss0 = _rss_mb(cluster.proc.pid) if cluster else None
        admin = KafkaTopicAdmin(bootstrap)
        times = []
        run = secrets.token_hex(4)
        for i in range(k):
            t0 = time.perf_counter()
            admin.create(topics.delivery_topic(f"s{run}{i:08x}"))
            times.append(time.perf_counter() - t0)
        admin.close()
        time.sleep(2)  # let the broker settle (log directories, metadata) before measuring it
        lister = KafkaAdminClient(bootstrap_servers=bootstrap)
        t0 = time.perf_counter()
        listed = len(lister.list_topics())
        list_ms = (time.perf_counter() - t0) * 1e3
        lister.close()
        disk1 = _disk(data) if data else (0, 0)
        rss1 = _rss_mb(cluster.proc.pid) if cluster else None
    finally:
        if cluster:
            cluster.stop()
            shutil.rmtree(cluster.dir, ignore_errors=True)
    return {
        "topics": k, "create_ms_mean": statistics.fmean(times) * 1e3 if times else None,
        "create_ms_p50": statistics.median(times) * 1e3 if times else None,
        "create_ms_p99": sorted(times)[max(0, int(len(times) * 0.99) - 1)] * 1e3 if times else None,
        "list_topics_ms": list_ms, "topics_listed": listed,
        "disk_kb_per_topic": (disk1[0] - disk0[0]) / k / 1024 if cluster and k else None,
        "apparent_kb_per_topic": (disk1[1] - disk0[1]) / k / 1024 if cluster and k else None,
        "broker_rss_mb_before": rss0, "broker_rss_mb_after": rss1,
    }


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="onyx-bench-subscribers-") as tmp:
        service = service_part(args.profiles, args.registrations, args.seed, Path(tmp))
    kafka = kafka_part(args.topics, args.kafka) if args.topics else None
    res = {"config": {"profiles": args.profiles, "registrations": args.registrations, "topics": args.topics,
                      "seed": args.seed},
           "service": service, "kafka": kafka}
    if kafka and kafka["create_ms_mean"]:
        n = args.profiles
        res["extrapolated"] = {
            "topics": n, "create_minutes": n * kafka["create_ms_mean"] / 6e4,
            "disk_mb": n * kafka["disk_kb_per_topic"] / 1024 if kafka["disk_kb_per_topic"] is not None else None,
            "broker_rss_gb": (n * (kafka["broker_rss_mb_after"] - kafka["broker_rss_mb_before"]) / args.topics / 1024
                              if kafka["broker_rss_mb_after"] is not None else None),
        }
    return res


def table(res: dict) -> str:
    c = res["config"]
    lines = [f"registration service in-process, {c['profiles']:,} profiles stored, {c['registrations']:,} more "
             "registered through the API (Kafka faked)",
             f"{'shape':16} {'subscribers':>11} {'topics':>8} {'reg. ms p50':>11} {'mean':>6} {'p99':>6} "
             f"{'of which count':>14} {'start-up s':>10} {'db MB':>6}"]
    for shape, r in res["service"].items():
        lines.append(f"{shape:16} {r['subscribers']:>11,} {r['delivery_topics']:>8,} {r['registration_ms_p50']:>11.2f} "
                     f"{r['registration_ms_mean']:>6.2f} {r['registration_ms_p99']:>6.2f} "
                     f"{r['placement_count_ms']:>14.2f} {r['startup_s']:>10.2f} {r['database_mb']:>6.1f}")
    k = res.get("kafka")
    if k:
        lines.append(f"real Kafka, {k['topics']:,} delivery topics created as the service does: "
                     f"{k['create_ms_p50']:.1f} ms p50, {k['create_ms_mean']:.1f} ms mean, {k['create_ms_p99']:.1f} ms "
                     f"p99 each; listing {k['topics_listed']:,} topics {k['list_topics_ms']:.0f} ms")
        if k["disk_kb_per_topic"] is not None:
            lines.append(f"  per topic: {k['disk_kb_per_topic']:.0f} KB on disk ({k['apparent_kb_per_topic']:.0f} KB "
                         f"apparent); broker RSS {k['broker_rss_mb_before']:.0f} -> {k['broker_rss_mb_after']:.0f} MB")
    e = res.get("extrapolated")
    if e:
        disk = (f", {e['disk_mb']:,.0f} MB on disk, broker memory +{e['broker_rss_gb']:,.1f} GB"
                if e["disk_mb"] is not None else "")
        lines.append(f"  one per profile at {e['topics']:,} profiles: {e['topics']:,} topics, about "
                     f"{e['create_minutes']:.0f} min of topic creation in all{disk} (linear: a lower bound); "
                     "one subscriber: 1 topic")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(res["service"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    p50 = [res["service"][s]["registration_ms_p50"] for s in shapes]
    count = [res["service"][s]["placement_count_ms"] for s in shapes]
    a.bar(shapes, p50, label="registration (p50)")
    a.bar(shapes, count, label="of which: placement's profile count", alpha=0.7)
    k = res.get("kafka")
    if k and k["create_ms_p50"]:
        a.bar([SHAPES[1]], [k["create_ms_p50"]], bottom=[p50[shapes.index(SHAPES[1])]], color="tab:red",
              label="+ creating its Kafka topic (p50, real broker)")
    a.set_ylabel("ms per registration")
    a.set_title(f"at {res['config']['profiles']:,} stored profiles")
    a.legend(fontsize=8)
    topics_n = [res["service"][s]["delivery_topics"] for s in shapes]
    b.bar(shapes, topics_n, color="tab:gray")
    b.set_yscale("log")
    b.set_ylabel("delivery topics")
    b.set_title("topics for the same profiles")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.subscribers", description=__doc__.split("\n\n")[0])
    p.add_argument("--profiles", type=int, help="profiles stored before timing (default 100000, quick 5000)")
    p.add_argument("--registrations", type=int, help="registrations timed per shape (default 1000, quick 200)")
    p.add_argument("--topics", type=int, help="real Kafka topics to create (default 1000, quick 100; 0: skip)")
    p.add_argument("--kafka", default=None, help="bootstrap servers of a Kafka to use instead of a fresh local one")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/subscribers.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.profiles = args.profiles if args.profiles is not None else (5000 if args.quick else 100_000)
    args.registrations = args.registrations or (200 if args.quick else 1000)
    args.topics = args.topics if args.topics is not None else (100 if args.quick else 1000)
    warnings.filterwarnings("ignore", module="fastapi.testclient")
    res = run(args)
    print(table(res))
    save(res, args.json or RESULTS / "subscribers.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
