"""Result volume (issue 41): what a host broker writes to delivery topics per message, before
and after one record per (delivery topic, message), and by reference against copies.

The workload is the outside check's: corpus-derived filter profiles
(:class:`yfilter.generators.corpus.CorpusProfileGenerator`, the mixed constructs, from the news
corpus ``../shared/corpus/news``) hosted at one broker, and the corpus files as messages. For
10,000 and 100,000 profiles, all of one subscriber (one delivery topic) or spread over 1,000
subscribers (profile *i* delivers to subscriber *i* mod 1,000's topic), with copies or by
reference, each message goes through the broker's real :meth:`broker.dataplane.plan.Plan.deliver`
(in-process: no Kafka, whose bytes are the rows' own). *Before* is what the plan wrote until
now, one record per (matching profile, result), computed here by :func:`per_match_rows` (the
old loop, kept only in this benchmark): the same match results, so the two columns differ
only in how they are written. A record's bytes are its key, value and headers (names and
values; Kafka's own framing, some 70 bytes a record, is left out and would only widen the gap).
By reference, the message itself is stored once, by the archive, which keeps every source
message for time travel anyway (``archive_bytes``: its size, per message, for comparison).

Medians are per message over the messages that matched at least one profile; ratios are
before / after, of the medians and of the totals over all messages.

    python -m bench.delivery_volume            # 10k and 100k profiles (a few minutes)
    python -m bench.delivery_volume --quick    # 2k profiles: a smoke run

Writes ``bench/results/delivery_volume.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.output import save
from bench.yfilter import corpus_documents, corpus_profiles
from broker import config, packets, topics
from broker.control.state import BrokerState
from broker.dataplane.plan import Inbound, Plan, PlanSettings
from broker.packets import Row
from formats.header import PacketHeader
from routing.overlay import builtin

RESULTS = Path(__file__).resolve().parent / "results" / "delivery_volume.json"
LAYOUTS = ("one", "spread")  # every profile of one subscriber; profile i of subscriber i mod --subscribers
WAYS = ("copy", "reference")


def per_match_rows(plan: Plan, inbound: Inbound, results: dict[str, list[bytes]]) -> list[Row]:
    """What :meth:`Plan.deliver` wrote before issue 41: one record per (matching profile,
    result), keyed by the profile id, the message (or a result) in each (no product option
    does this any more: it is here to be measured against)."""
    header = inbound.header
    out = PacketHeader("xml", format="text", source_id=header.source_id,
                       root_broker=header.root_broker, message_id=header.message_id).to_kafka()
    hosted = plan.node.profiles
    return [(hosted[pid].target, pid.encode(), doc, out) for pid in sorted(results) for doc in results[pid]]


def row_bytes(row: Row) -> int:
    """A record's key, value and header bytes."""
    _, key, value, headers = row
    return len(key or b"") + len(value or b"") + sum(len(k) + len(v) for k, v in headers)


def host(n: int, seed: int, docs: list[bytes]) -> Plan:
    """Broker b5 of Figure 4 (a leaf host) hosting ``n`` corpus-derived mixed filters."""
    texts, namespaces, _ = corpus_profiles("c-mixed", n, seed, docs)
    state = BrokerState("b5", builtin("figure4"))
    state.node.namespaces = namespaces  # the prefixes the generator wrote names with (before any profile)
    for i, text in enumerate(texts):
        pid = f"{i:016x}"  # what the service's ids look like (16 hex digits)
        body = {"op": "add", "profile_id": pid, "version": 1, "text": text, "delivery_topic": "onyx.deliver.s0"}
        rows = state.apply("query", pid.encode(), json.dumps(body).encode(), [], topics.broker_topic("b5"), defer=True)
        if rows:
            raise RuntimeError(f"profile {i} was refused: {rows[0]}")
        if i % 5000 == 4999:
            state.routes()  # the routing deltas a real broker would send up: dropped here
    state.routes()
    return Plan(state, PlanSettings())


def arrange(plan: Plan, layout: str, way: str, subscribers: int) -> None:
    """Point every hosted profile at its delivery topic for ``layout`` and set its way."""
    for i, (pid, hosted) in enumerate(sorted(plan.node.profiles.items())):
        hosted.target = topics.delivery_topic("s0" if layout == "one" else f"s{i % subscribers}")
    plan.state.by_reference.clear()
    if way == "reference":
        plan.state.by_reference.update(plan.node.profiles)
    plan._refusals.clear()


def measure(plan: Plan, inbounds: list[Inbound], results: list[dict[str, list[bytes]]]) -> list[dict]:
    """Per message: records and bytes before (per match) and after (:meth:`Plan.deliver`)."""
    out = []
    node = plan.node
    for inbound, found in zip(inbounds, results):
        t = time.process_time()
        before = per_match_rows(plan, inbound, found)
        t_before = time.process_time() - t
        node.deliver = lambda *_, _found=found, **__: _found  # the same matches: no second match
        try:
            t = time.process_time()
            after = plan.deliver(inbound)
            t_after = time.process_time() - t
        finally:
            del node.deliver
        assert all(r[0] != topics.DEAD_LETTER for r in after), "a dead letter"
        out.append({"message_id": inbound.header.message_id, "bytes": len(inbound.payload), "matches": len(found),
                    "records_before": len(before), "bytes_before": sum(map(row_bytes, before)),
                    "records_after": len(after), "bytes_after": sum(map(row_bytes, after)),
                    "topics": len({r[0] for r in after}),
                    "ms_before": t_before * 1e3, "ms_after": t_after * 1e3})
    return out


def summary(rows: list[dict]) -> dict:
    """Medians over the messages that matched, totals over all, and the ratios before/after."""
    hit = [r for r in rows if r["matches"]] or rows
    med = {k: statistics.median(r[k] for r in hit) for k in ("matches", "records_before", "records_after",
                                                               "bytes_before", "bytes_after", "topics",
                                                               "ms_before", "ms_after")}
    tot = {k: sum(r[k] for r in rows) for k in ("records_before", "records_after", "bytes_before", "bytes_after",
                                                "bytes")}
    return {"messages": len(rows), "matched": len([r for r in rows if r["matches"]]),
            "median": med, "total": tot,
            "ratio_records_median": med["records_before"] / max(med["records_after"], 1),
            "ratio_bytes_median": med["bytes_before"] / max(med["bytes_after"], 1),
            "ratio_records_total": tot["records_before"] / max(tot["records_after"], 1),
            "ratio_bytes_total": tot["bytes_before"] / max(tot["bytes_after"], 1),
            "archive_bytes_median": statistics.median(r["bytes"] for r in hit)}


def run(sizes: list[int], subscribers: int, seed: int, corpus: Path) -> dict:
    docs = corpus_documents(corpus)
    if not docs:
        raise SystemExit(f"no corpus at {corpus}: set ONYX_CORPUS to a folder of XML files")
    res: dict = {"corpus": str(corpus), "documents": len(docs), "subscribers": subscribers, "seed": seed,
                 "header_limit_bytes": config.DELIVERY_PROFILES_HEADER_BYTES, "runs": []}
    for n in sizes:
        t = time.perf_counter()
        plan = host(n, seed, docs)
        print(f"  {n:,} profiles hosted at b5 in {time.perf_counter() - t:.0f} s", flush=True)
        inbounds, results = [], []
        for i, doc in enumerate(docs):
            # as b5 gets a message of source news from its tree (root b1): the text, as published
            header = PacketHeader("xml", format="text", source_id="news", root_broker="b1", message_id=f"c{i}")
            inbound, bad = plan.receive(topics.broker_topic("b5"), None, doc, header.to_kafka(), 0, i)
            if inbound is None:
                print(f"  skipped corpus file {i}: {dict(bad[0][3]).get(packets.REASON, b'')[:80]!r}", flush=True)
                continue
            inbounds.append(inbound)
            results.append(plan.node.deliver(inbound.message, inbound.payload))
        for layout in LAYOUTS:
            for way in WAYS:
                arrange(plan, layout, way, subscribers)
                rows = measure(plan, inbounds, results)
                label = "one subscriber" if layout == "one" else f"{subscribers:,} subscribers"
                res["runs"].append({"profiles": n, "layout": label, "way": way, **summary(rows),
                                    "messages_detail": rows})
                s = res["runs"][-1]
                print(f"  {n:>7,} {label:<18} {way:<9} records {s['median']['records_before']:>8,.0f} -> "
                      f"{s['median']['records_after']:>6,.0f}   bytes {s['median']['bytes_before']:>13,.0f} -> "
                      f"{s['median']['bytes_after']:>11,.0f}  ({s['ratio_bytes_median']:,.0f}x)", flush=True)
    return res


def table(res: dict) -> str:
    lines = [f"Delivery volume per message at one host broker ({res['documents']} corpus messages, medians over "
             "those that matched; before = one record per match)",
             f"{'profiles':>9} {'subscribers':<18} {'way':<9} {'matches':>8} {'records before':>15} "
             f"{'after':>7} {'bytes before':>14} {'after':>11} {'bytes x':>8} {'total x':>8} {'rows ms':>8} "
             f"{'after':>6}"]
    for r in res["runs"]:
        m = r["median"]
        lines.append(f"{r['profiles']:>9,} {r['layout']:<18} {r['way']:<9} {m['matches']:>8,.0f} "
                     f"{m['records_before']:>15,.0f} {m['records_after']:>7,.0f} {m['bytes_before']:>14,.0f} "
                     f"{m['bytes_after']:>11,.0f} {r['ratio_bytes_median']:>8,.1f} {r['ratio_bytes_total']:>8,.1f} "
                     f"{m['ms_before']:>8.2f} {m['ms_after']:>6.2f}")
    lines.append("rows ms: CPU to make the rows from the match results (matching itself, the same for both, left out)")
    lines.append("by reference the message is also stored once, by the archive (median "
                 f"{statistics.median(r['archive_bytes_median'] for r in res['runs']):,.0f} bytes), as it is for "
                 "time travel anyway")
    return "\n".join(lines)


def plot(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    short = {"one subscriber": "1 sub"}
    labels = [f"{r['profiles'] / 1000:g}k\n{short.get(r['layout'], r['layout'].replace('subscribers', 'subs'))}"
              f"\n{r['way']}" for r in runs]
    x = range(len(runs))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, what, unit in ((axes[0], "bytes", "bytes per message"), (axes[1], "records", "records per message")):
        before = [r["median"][f"{what}_before"] for r in runs]
        after = [r["median"][f"{what}_after"] for r in runs]
        ax.bar([i - 0.2 for i in x], before, 0.4, label="before: one record per match", color="tab:red")
        ax.bar([i + 0.2 for i in x], after, 0.4, label="after: one per topic and message", color="tab:blue")
        ax.set_yscale("log")
        ax.set_xticks(list(x), labels, fontsize=7)
        ax.set_ylabel(f"{unit} (median, log)")
        ax.set_title(f"delivery topics: {unit}")
        for i, (b, a) in enumerate(zip(before, after)):
            ax.annotate(f"{b / max(a, 1):,.0f}x", (i, max(b, a)), ha="center", va="bottom", fontsize=7)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Result volume at one host broker, {res['documents']} corpus messages "
                 f"(corpus-derived filters, all of one subscriber or spread over {res['subscribers']:,})", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.delivery_volume", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="profiles hosted (each a run)")
    ap.add_argument("--subscribers", type=int, default=1000, help="subscribers of the spread layout")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=config.CORPUS_DIR)
    ap.add_argument("--quick", action="store_true", help="2,000 profiles only (a smoke run)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    sizes = [2000] if args.quick else args.sizes
    res = run(sizes, args.subscribers, args.seed, args.corpus)
    print(table(res))
    save(res, args.out, None, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
