"""Registration throughput into the real registration service (issue 27): one by one and in bulk.

    python -m bench.registration            # 100,000 in bulk, 2,000 one by one before and after (minutes)
    python -m bench.registration --quick    # 20,000 in bulk, 300 one by one

The service runs as `onyx serve` does, in a process of its own (uvicorn, a SQLite file,
a real local Kafka broker started for the run: its control packets are acknowledged by
Kafka), with the default placement. This process is the client: one keep-alive HTTP
connection, every profile for one subscriber (its token sent with each request, as
`onyx subscribe --subscriber-token` and the demo do), generated NITF filters with zero or
one value predicate.

1. **one by one** (``POST /profiles``): R profiles, each request timed, into an empty store;
2. **bulk** (``POST /profiles:batch``): N profiles in batches of 10,000, each batch timed,
   with the service's own account of the batch (its ``Server-Timing`` header: checking
   the items, placement, topic creation, the insert, the Kafka batch, the commit, the
   answer); what is left of the client's time is HTTP and JSON (both ends);
3. **one by one** again, R profiles, now with N profiles stored.

Floors and peers, measured in the same run on the same machine and Kafka (first, so that
they also warm up the freshly started Kafka broker): validating a
profile with :func:`yfilter.validate` against what the service did before (adding it to a
fresh ``yfilter.Engine``); the Kafka part alone (the same packets written with the
service's sender: a batch of 2 x 10,000 with one flush, and 2 synchronous sends per
profile); the database part alone (10,000 rows in one transaction, and one row per
transaction, on a SQLite file); an HTTP round trip doing nothing (``GET /health``).
Throughput one by one is registrations per second of wall time (requests back to back);
bulk, the median over batches. The service's CPU time per registration (user + system,
all its threads) and the machine's load average are recorded too: on a shared machine the
wall times depend on what else runs. Prints a table, writes ``bench/results/registration.json``
and a PNG.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.output import save

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 10_000
TARGET_SINGLE, TARGET_BULK = 200, 2000
STAGES = ("check", "place", "topics", "insert", "kafka", "commit", "answer")


class Client:
    """One keep-alive HTTP connection to the service."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def call(self, method: str, path: str, body: dict | None = None, token: str | None = None,
             profile_token: str | None = None):
        """(status, decoded answer, headers, seconds), JSON encoding and decoding included;
        ``token`` is the subscriber's, ``profile_token`` a profile's (to update or delete it)."""
        t0 = time.perf_counter()
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", **({"X-Onyx-Subscriber-Token": token} if token else {}),
                   **({"X-Onyx-Token": profile_token} if profile_token else {})}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.conn.close()  # the server closed an idle keep-alive connection: open another
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
        raw = resp.read()
        answer = json.loads(raw) if raw else None
        return resp.status, answer, dict(resp.getheaders()), time.perf_counter() - t0

    def close(self) -> None:
        self.conn.close()


def server_timing(header: str | None) -> dict[str, float]:
    """``Server-Timing`` as {stage: seconds}."""
    out = {}
    for part in (header or "").split(","):
        name, _, dur = part.strip().partition(";dur=")
        if name and dur:
            out[name] = float(dur) / 1e3
    return out


def start_service(bootstrap: str, database: str, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "serve", "--bootstrap-servers", bootstrap,
                             "--database", database, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the registration service exited: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("the registration service did not answer /health in 60 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_by_one(client: Client, texts: list[str], token: str, pid: int) -> dict:
    times = []
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for text in texts:
        status, answer, _, dt = client.call("POST", "/profiles", {"text": text}, token)
        assert status == 201, answer
        times.append(dt)
    wall = time.perf_counter() - t0
    return {"profiles": len(texts), "seconds": wall, "per_s": len(texts) / wall,
            "service_cpu_ms": (cpu_seconds(pid) - cpu0) / len(texts) * 1e3,
            "ms_p50": statistics.median(times) * 1e3, "ms_p99": sorted(times)[max(0, int(len(times) * 0.99) - 1)] * 1e3}


def bulk(client: Client, texts: list[str], token: str, batch: int, pid: int) -> dict:
    batches = []
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for at in range(0, len(texts), batch):
        chunk = texts[at:at + batch]
        status, answer, headers, dt = client.call("POST", "/profiles:batch",
                                                  {"profiles": [{"text": t} for t in chunk]}, token)
        assert status == 200 and answer["registered"] == len(chunk), (status, str(answer)[:500])
        stages = server_timing(headers.get("Server-Timing") or headers.get("server-timing"))
        stages["http+json"] = max(0.0, dt - sum(stages.values()))
        batches.append({"profiles": len(chunk), "seconds": dt, "per_s": len(chunk) / dt, "stages_s": stages})
    wall = time.perf_counter() - t0
    full = [b for b in batches if b["profiles"] == batch] or batches
    return {"profiles": len(texts), "batch": batch, "seconds": wall, "per_s_total": len(texts) / wall,
            "service_cpu_ms": (cpu_seconds(pid) - cpu0) / len(texts) * 1e3,
            "per_s_median": statistics.median(b["per_s"] for b in full),
            "stages_ms_median": {k: statistics.median(b["stages_s"].get(k, 0.0) for b in full) * 1e3
                                 for k in (*STAGES, "http+json")},
            "batches": batches}


def floors(texts: list[str], bootstrap: str, client: Client, batch: int, n_single: int, workdir: Path) -> dict:
    """The parts alone (see the module docstring)."""
    from broker.registry.control_packets import KafkaSender, query_packet
    from broker.registry.store import ProfileRecord, Store
    from yfilter import Engine, validate

    out: dict = {}
    sample = texts[:2000]
    t0 = time.perf_counter()
    for t in sample:
        validate(t)
    out["validate_us"] = (time.perf_counter() - t0) / len(sample) * 1e6
    t0 = time.perf_counter()
    for t in sample:
        Engine().add("validation", t)
    out["engine_validation_us"] = (time.perf_counter() - t0) / len(sample) * 1e6

    records = [ProfileRecord(f"f{i:015x}", t, f"b{i % 6 + 1}", "onyx.deliver.bench", 1, "s-bench")
               for i, t in enumerate(texts[:batch])]
    sender = KafkaSender(bootstrap)
    topic = f"bench.registration.{secrets.token_hex(3)}"  # not a broker's topic: nobody reads it
    try:
        sender.send(topic, query_packet("add", records[0]))  # creates the topic, warms the connection
        items = [(topic, query_packet("add", r)) for r in records for _ in range(2)]
        for _ in range(3):  # warm-up (a fresh broker's JVM compiles its produce path), not measured
            sender.send_batch(items)
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            sender.send_batch(items)
            runs.append(time.perf_counter() - t0)
        out["kafka_batch_ms"] = statistics.median(runs) * 1e3
        times = []
        for r in records[:n_single]:
            t0 = time.perf_counter()
            packet = query_packet("add", r)
            sender.send(topic, packet)
            sender.send(topic, packet)
            times.append(time.perf_counter() - t0)
        out["kafka_single_ms_p50"] = statistics.median(times) * 1e3
    finally:
        sender.close()

    store = Store(f"sqlite:///{workdir / 'floor.db'}")
    t0 = time.perf_counter()
    with store.transaction() as tx:
        tx.add_profiles([(r, "t") for r in records])
    out["db_batch_ms"] = (time.perf_counter() - t0) * 1e3
    times = []
    for r in records[:n_single]:
        r = ProfileRecord("g" + r.id[1:], r.text, r.host_broker, r.delivery_topic, 1, r.subscriber_id)
        t0 = time.perf_counter()
        with store.transaction() as tx:
            tx.add_profile(r, "t")
        times.append(time.perf_counter() - t0)
    out["db_single_ms_p50"] = statistics.median(times) * 1e3
    t0 = time.perf_counter()
    store.profile_counts()
    out["profile_counts_ms"] = (time.perf_counter() - t0) * 1e3
    store.engine.dispose()

    times = [client.call("GET", "/health")[3] for _ in range(n_single)]
    out["http_health_ms_p50"] = statistics.median(times) * 1e3
    return out


def run(args) -> dict:
    from broker.local.devcluster import KafkaDevCluster, free_port
    from yfilter.generators import ProfileGenerator, Schema

    texts = ProfileGenerator(Schema.nitf(), n_preds=(0, 1), p_star=0.1, p_desc=0.3,
                             seed=args.seed).batch(args.bulk + 2 * args.single)
    cluster = None if args.kafka else KafkaDevCluster(name="bench-registration").start()
    bootstrap = args.kafka or cluster.bootstrap_servers
    service = client = None
    try:
        with tempfile.TemporaryDirectory(prefix="onyx-bench-registration-") as tmp:
            tmp = Path(tmp)
            db = tmp / "onyx.db"
            port = free_port()
            service = start_service(bootstrap, f"sqlite:///{db}", port, tmp / "service.log")
            client = Client(port)
            status, sub, _, _ = client.call("POST", "/subscribers")
            assert status == 201, sub
            token = sub["token"]
            # The floors first: they also warm up a freshly started Kafka broker (its JVM compiles
            # the produce path in the first seconds), as a long-running one would be.
            limits = floors(texts, bootstrap, client, args.batch, max(50, args.single // 4), tmp)
            for i in range(50):  # warm-up: first requests, connections, Kafka metadata of every topic
                client.call("POST", "/profiles", {"text": f"/nitf/warm-up{i}"}, token)
            load0 = os.getloadavg()[0]
            single_empty = one_by_one(client, texts[:args.single], token, service.pid)
            print(f"one by one, empty store: {single_empty['per_s']:.0f}/s", flush=True)
            bulk_res = bulk(client, texts[args.single:args.single + args.bulk], token, args.batch, service.pid)
            print(f"bulk: {bulk_res['per_s_median']:.0f}/s (median over batches)", flush=True)
            single_full = one_by_one(client, texts[args.single + args.bulk:], token, service.pid)
            print(f"one by one, {args.bulk:,} stored: {single_full['per_s']:.0f}/s", flush=True)
            db_mb = sum(f.stat().st_size for f in tmp.glob("onyx.db*")) / 1e6
            load1 = os.getloadavg()[0]
    finally:
        if client is not None:
            client.close()
        if service is not None:
            service.terminate()
            service.wait(30)
        if cluster is not None:
            cluster.stop()
    return {"config": {"bulk": args.bulk, "single": args.single, "batch": args.batch, "seed": args.seed,
                       "database": "sqlite (file)", "kafka": "local, 1 node, acks=all",
                       "machine": f"{os.cpu_count()} cores", "date": datetime.now(timezone.utc).isoformat(),
                       "load_average_1min": [round(load0, 2), round(load1, 2)]},
            "targets": {"one_by_one_per_s": TARGET_SINGLE, "bulk_per_s": TARGET_BULK},
            "one_by_one_empty": single_empty, "bulk": bulk_res, "one_by_one_full": single_full,
            "floors": limits, "database_mb": db_mb}


def table(res: dict) -> str:
    c, f, b = res["config"], res["floors"], res["bulk"]
    e, full = res["one_by_one_empty"], res["one_by_one_full"]
    ok = lambda v, t: "met" if v >= t else "MISSED"  # noqa: E731
    lines = [f"registration service over HTTP (SQLite file, real Kafka), {c['bulk']:,} in bulk "
             f"(batches of {c['batch']:,}), {c['single']:,} one by one before and after; load average "
             f"{c['load_average_1min'][0]:.1f} -> {c['load_average_1min'][1]:.1f} on {c['machine']}",
             f"{'how':34} {'profiles/s':>10} {'ms p50':>8} {'ms p99':>8} {'target':>8} {'service CPU ms':>14}",
             f"{'one by one, empty store':34} {e['per_s']:>10,.0f} {e['ms_p50']:>8.2f} {e['ms_p99']:>8.2f} "
             f"{ok(e['per_s'], TARGET_SINGLE):>8} {e['service_cpu_ms']:>14.2f}",
             f"{'one by one, ' + format(c['bulk'], ',') + ' stored':34} {full['per_s']:>10,.0f} "
             f"{full['ms_p50']:>8.2f} {full['ms_p99']:>8.2f} {ok(full['per_s'], TARGET_SINGLE):>8} "
             f"{full['service_cpu_ms']:>14.2f}",
             f"{'bulk (median batch)':34} {b['per_s_median']:>10,.0f} {'':>8} {'':>8} "
             f"{ok(b['per_s_median'], TARGET_BULK):>8} {b['service_cpu_ms']:>14.2f}",
             f"{'bulk (all ' + format(b['profiles'], ',') + ', wall)':34} {b['per_s_total']:>10,.0f}",
             f"a batch of {c['batch']:,}, where the time goes (ms, median): "
             + ", ".join(f"{k} {v:.0f}" for k, v in b["stages_ms_median"].items()),
             f"floors: validate {f['validate_us']:.0f} us/profile (a fresh Engine, as before: "
             f"{f['engine_validation_us']:.0f} us); Kafka batch of 2 x {c['batch']:,} packets "
             f"{f['kafka_batch_ms']:.0f} ms, 2 synchronous sends {f['kafka_single_ms_p50']:.2f} ms; SQLite "
             f"{c['batch']:,} rows in one transaction {f['db_batch_ms']:.0f} ms, one row per transaction "
             f"{f['db_single_ms_p50']:.2f} ms; HTTP round trip (GET /health) {f['http_health_ms_p50']:.2f} ms"]
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = ["one by one\n(empty)", f"one by one\n({res['config']['bulk']:,} stored)", "bulk\n(median batch)"]
    rates = [res["one_by_one_empty"]["per_s"], res["one_by_one_full"]["per_s"], res["bulk"]["per_s_median"]]
    a.bar(names, rates, color=["tab:blue", "tab:blue", "tab:green"])
    a.axhline(TARGET_SINGLE, color="tab:blue", ls="--", lw=1, label=f"target one by one ({TARGET_SINGLE}/s)")
    a.axhline(TARGET_BULK, color="tab:green", ls="--", lw=1, label=f"target bulk ({TARGET_BULK:,}/s)")
    a.set_yscale("log")
    a.set_ylabel("profiles / s")
    a.set_title("registration throughput over HTTP")
    a.legend(fontsize=8)
    stages = res["bulk"]["stages_ms_median"]
    bottom = 0.0
    for k, v in stages.items():
        b.bar(["service"], [v], bottom=[bottom], label=k)
        bottom += v
    f = res["floors"]
    n = res["config"]["batch"]
    b.bar(["floors"], [f["validate_us"] * n / 1e3], label="validate alone", color="0.7")
    b.bar(["floors"], [f["kafka_batch_ms"]], bottom=[f["validate_us"] * n / 1e3], label="Kafka batch alone",
          color="0.45")
    b.bar(["floors"], [f["db_batch_ms"]], bottom=[f["validate_us"] * n / 1e3 + f["kafka_batch_ms"]],
          label="SQLite insert alone", color="0.2")
    b.set_ylabel(f"ms per batch of {n:,}")
    b.set_title("where a batch's time goes (median)")
    b.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.registration", description=__doc__.split("\n\n")[0])
    p.add_argument("--bulk", type=int, help="profiles registered in bulk (default 100000, quick 20000)")
    p.add_argument("--single", type=int, help="profiles registered one by one, before and after (default 2000, "
                   "quick 300)")
    p.add_argument("--batch", type=int, default=BATCH, help=f"profiles per batch request (default {BATCH})")
    p.add_argument("--kafka", default=None, help="bootstrap servers of a Kafka to use instead of a fresh local one")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/registration.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.bulk = args.bulk if args.bulk is not None else (20_000 if args.quick else 100_000)
    args.single = args.single if args.single is not None else (300 if args.quick else 2000)
    res = run(args)
    print(table(res))
    save(res, args.json or RESULTS / "registration.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
