"""The semantic cache's evaluation (thesis ``002``, section 6.3, Figs. 20-26; shapes only,
the thesis reports no numbers) on NITF messages of the news corpus' vocabulary.

    python -m bench.cache              # 3,000 messages, 50 ms source latency (a few minutes)
    python -m bench.cache --quick      # 600 messages, 20 ms, a smaller large mix

The source is a latency-injecting wrapper over a list of generated NITF messages (the
vocabulary of ``yfilter.generators.nitf``, which follows the corpus: titles and
headlines, bylines, datelines, ``docdata/urgency/@ed-urg``, ``doc-id/@regsrc``,
``pubdata`` with area, edition, section and sequence): each call evaluates the XPath
predicate with lxml over every message, then sleeps a fixed latency plus a time per
returned message (a web source's round trip and transfer). Two concepts, as the thesis'
Malerei/Zeichnung: ``/nitf`` (conditions on child paths, mostly ``contains``, the
thesis' ``~=``) and ``/nitf/head/pubdata`` (conditions on its attributes).

* a base mix of 13 queries, run twice on a cache that starts empty (Fig. 20);
* a restricting and an expanding mix (each base query narrowed, or widened), each run
  twice on the cache as the base mix left it (Figs. 21-22);
* a large mix (base queries with random extra conditions), run twice from empty (Fig. 23);

per query: response time with the cache and without it (the source alone, measured just
before), cache size, result size, the part of the result found in the cache, match-type
calls and their outcomes, lookup time, the time until the part found in the cache is out
(``on_cached``), and the remainder's source time against the original query's (Fig. 24).
Last, lookup time against the number of entries, controlled: up to 1,600 disjoint point
regions, looked up with ``SemanticCache.explain`` by new points and by broad queries
(Figs. 25-26). Prints a table, writes
``bench/results/cache.json`` and a PNG (``bench/output.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from lxml import etree

from bench.output import save
from cache import SemanticCache, defaults
from cache.match import MATCH_TYPES
from yfilter.generators.nitf import NITF

RESULTS = Path(__file__).resolve().parent / "results"

NITF_CONCEPT, PUBDATA = "/nitf", "/nitf/head/pubdata"
TITLE, HL1 = "head/title", "body/body.head/hedline/hl1"
PERSON, PLACE = "body/body.head/byline/person", "body/body.head/dateline/location"
URGENCY, REGSRC = "head/docdata/urgency/@ed-urg", "head/docdata/doc-id/@regsrc"

BASE = [
    (NITF_CONCEPT, f"contains({TITLE}, 'storm')"),
    (NITF_CONCEPT, f"contains({TITLE}, 'market')"),
    (NITF_CONCEPT, f"contains({TITLE}, 'bank') and contains({TITLE}, 'rates')"),
    (NITF_CONCEPT, f"(contains({PERSON}, 'Smith') or contains({PERSON}, 'Chen')) and contains({TITLE}, 'report')"),
    (NITF_CONCEPT, f"contains({HL1}, 'election')"),
    (NITF_CONCEPT, f"contains({HL1}, 'vote') and {URGENCY} <= 4"),
    (NITF_CONCEPT, f"contains({PLACE}, 'Paris')"),
    (NITF_CONCEPT, f"{REGSRC} = 'AAP' and contains({TITLE}, 'oil')"),
    (PUBDATA, "@edition.area = 'SF'"),
    (PUBDATA, "@position.section = 'sport' and @position.sequence <= 10"),
    (PUBDATA, "(@edition.area = 'NY' or @edition.area = 'LA') and @position.sequence > 20"),
    (PUBDATA, "@type = 'web' and @edition.name = 'morning'"),
    (PUBDATA, "@position.sequence >= 5 and @position.sequence <= 15"),
]
"""The base mix: 13 queries, like the thesis' mostly with ``contains`` (its ``~=``)."""

RESTRICT = [f"contains({TITLE}, 'storm') and {URGENCY} <= 3", f"contains({TITLE}, 'markets')",
            f"contains({TITLE}, 'bank') and contains({TITLE}, 'rates') and {REGSRC} = 'AFP'",
            f"contains({PERSON}, 'Smith') and contains({TITLE}, 'report')",
            f"contains({HL1}, 'election') and contains({HL1}, 'court')", f"contains({HL1}, 'vote') and {URGENCY} <= 2",
            f"contains({PLACE}, 'Paris') and contains({TITLE}, 'police')",
            f"{REGSRC} = 'AAP' and contains({TITLE}, 'oil') and {URGENCY} = 1",
            "@edition.area = 'SF' and @edition.name = 'final'",
            "@position.section = 'sport' and @position.sequence <= 5",
            "@edition.area = 'NY' and @position.sequence > 30",
            "@type = 'web' and @edition.name = 'morning' and @position.section = 'front'",
            "@position.sequence >= 8 and @position.sequence <= 12"]
"""Each base query narrowed (the same concepts, in the same order)."""

EXPAND = [f"contains({TITLE}, 'storm') or contains({TITLE}, 'rain')", f"contains({TITLE}, 'mark')",
          f"contains({TITLE}, 'bank') or contains({TITLE}, 'rates')",
          f"(contains({PERSON}, 'Smith') or contains({PERSON}, 'Chen') or contains({PERSON}, 'Kim')) "
          f"and contains({TITLE}, 'report')",
          f"contains({HL1}, 'election') or contains({HL1}, 'vote')", f"contains({HL1}, 'vote')",
          f"contains({PLACE}, 'Paris') or contains({PLACE}, 'Lyon')", f"contains({TITLE}, 'oil')",
          "@edition.area = 'SF' or @edition.area = 'SYD'", "@position.section = 'sport' and @position.sequence <= 20",
          "@edition.area = 'NY' or @edition.area = 'LA'", "@type = 'web'",
          "@position.sequence >= 1 and @position.sequence <= 20"]
"""Each base query widened."""

EXTRA = {
    NITF_CONCEPT: [f"{URGENCY} <= {n}" for n in (2, 4, 6)] + [f"{URGENCY} >= {n}" for n in (3, 5)]
    + [f"{REGSRC} = '{s}'" for s in ("AAP", "AFP", "AP")] + [f"{REGSRC} != 'AP'"]
    + [f"contains({TITLE}, '{w}')" for w in ("rally", "court", "price", "deal", "fire")]
    + [f"not(contains({HL1}, '{w}'))" for w in ("loss", "trial")]
    + [f"contains({PERSON}, '{p}')" for p in ("Jones", "Garcia")],
    PUBDATA: [f"@edition.area = '{a}'" for a in ("SF", "NY", "LON")] + ["@edition.area != 'SYD'"]
    + [f"@position.section = '{s}'" for s in ("front", "business", "world")]
    + [f"@position.sequence <= {n}" for n in (8, 16, 30)] + [f"@position.sequence > {n}" for n in (4, 12, 25)]
    + [f"@edition.name = '{e}'" for e in ("morning", "evening")] + ["@type != 'print'"],
}
"""Random extra conditions of the large mix, per concept."""


# -- the data and the source ------------------------------------------------------------

def messages(n: int, seed: int) -> dict[str, bytes]:
    """``n`` NITF messages with the corpus' vocabulary (``yfilter.generators.nitf``)."""
    rng = random.Random(seed)
    el = NITF["elements"]
    words, names, places = el["title"]["text"], el["person"]["attrs"]["value"], el["location"]["text"]
    out = {}
    for i in range(n):
        nitf = etree.Element("nitf")
        head = etree.SubElement(nitf, "head")
        etree.SubElement(head, "title").text = " ".join(rng.sample(words, 3))
        docdata = etree.SubElement(head, "docdata")
        etree.SubElement(docdata, "doc-id", {"id-string": rng.choice(el["doc-id"]["attrs"]["id-string"]),
                                             "regsrc": rng.choice(el["doc-id"]["attrs"]["regsrc"])})
        etree.SubElement(docdata, "urgency", {"ed-urg": rng.choice(el["urgency"]["attrs"]["ed-urg"])})
        etree.SubElement(head, "pubdata", {k: rng.choice(v) for k, v in el["pubdata"]["attrs"].items()})
        bodyhead = etree.SubElement(etree.SubElement(nitf, "body"), "body.head")
        etree.SubElement(etree.SubElement(bodyhead, "hedline"), "hl1").text = " ".join(rng.sample(words, 3))
        etree.SubElement(etree.SubElement(bodyhead, "byline"), "person").text = " ".join(rng.sample(names, 2))
        etree.SubElement(etree.SubElement(bodyhead, "dateline"), "location").text = rng.choice(places)
        etree.SubElement(etree.SubElement(nitf[1], "body.content"), "p").text = " ".join(rng.choices(words, k=60))
        out[f"news-0-{i}"] = etree.tostring(nitf)
    return out


class LatencySource:
    """A source over a list of messages: lxml evaluates ``concept[condition]`` on each,
    then the call sleeps ``latency`` plus ``per_item`` for each message returned."""

    def __init__(self, items: dict[str, bytes], latency: float, per_item: float) -> None:
        self.items, self.latency, self.per_item = items, latency, per_item
        self.roots = {k: etree.fromstring(v) for k, v in items.items()}
        self.calls = 0

    def __call__(self, concept: str, condition: str) -> list[tuple[str, bytes]]:
        self.calls += 1
        xpath = etree.XPath(f"boolean({concept}[{condition}])")
        found = [(k, self.items[k]) for k, root in self.roots.items() if xpath(root)]
        time.sleep(self.latency + self.per_item * len(found))
        return found


# -- the runs -----------------------------------------------------------------------------

def large_mix(n: int, seed: int) -> list[tuple[str, str]]:
    """Base queries with one or two random extra conditions (``and``, sometimes ``or``)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        concept, cond = rng.choice(BASE)
        for extra in rng.sample(EXTRA[concept], rng.choice([1, 1, 2])):
            cond = f"({cond}) {'or' if rng.random() < 0.25 else 'and'} {extra}"
        out.append((concept, cond))
    return out


def run_mix(name: str, queries: list[tuple[str, str]], cache: SemanticCache, source: LatencySource,
            runs: int = 2) -> list[dict]:
    """Each query with the cache and, just before, without it; ``runs`` times back to back."""
    rows = []
    for run in range(1, runs + 1):
        for i, (concept, cond) in enumerate(queries):
            t0 = time.perf_counter()
            direct = source(concept, cond)
            t_direct = time.perf_counter() - t0
            entries = cache.stats()["regions"]
            cached_at: list[float] = []
            t0 = time.perf_counter()
            r = cache.query(concept, cond, on_cached=lambda _: cached_at.append(time.perf_counter()))
            t_cache = time.perf_counter() - t0
            assert sorted(r.items) == sorted(k for k, _ in direct), (name, cond)
            stats = cache.stats()
            rows.append({"mix": name, "run": run, "query": i, "concept": concept, "condition": cond,
                         "ms_cache": t_cache * 1e3, "ms_direct": t_direct * 1e3, "ms_lookup": r.lookup_seconds * 1e3,
                         "ms_cached_part": (cached_at[0] - t0) * 1e3,
                         "ms_remainder_source": r.source_seconds * 1e3 if r.remainder else None,
                         "result": len(r.items), "from_cache": r.from_cache, "from_source": r.from_source,
                         "cache_bytes": stats["bytes"], "entries_before": entries, "entries": stats["regions"],
                         "match_calls": r.match_calls,
                         "match_counts": {m: r.match_counts.get(m, 0) for m in MATCH_TYPES},
                         "remainder_parts": len(r.remainder_parts), "fallbacks": r.fallbacks,
                         "cut_short": r.cut_short})
    return rows


def point(combo: tuple) -> str:
    area, section, seq, kind = combo
    return (f"@edition.area = '{area}' and @position.section = '{section}' and @position.sequence = {seq} "
            f"and @type = '{kind}'")


def lookup_sweep(items: dict[str, bytes], targets: list[int], probes: int, seed: int) -> list[dict]:
    """Lookup time against entries (Figs. 25-26), controlled: the pubdata partition filled
    with pairwise disjoint point regions (area, section, sequence, type), then, at each
    size, lookups (:meth:`SemanticCache.explain`, nothing is run) of ``probes`` new points,
    which no region covers, so every entry is examined, and of the base mix's pubdata
    queries, which overlap many entries."""
    attrs = NITF["elements"]["pubdata"]["attrs"]
    combos = [(a, s, int(n), t) for a in attrs["edition.area"] for s in attrs["position.section"]
              for n in attrs["position.sequence"] for t in attrs["type"]]
    random.Random(seed).shuffle(combos)
    cache = SemanticCache(LatencySource(items, 0.0, 0.0), capacity_bytes=1 << 34, max_age=None, max_idle=None)
    broad = [q for c, q in BASE if c == PUBDATA]
    out, filled = [], 0
    for target in targets:
        for combo in combos[filled:target]:
            cache.query(PUBDATA, point(combo))
        filled = max(filled, target)
        entries = cache.stats()["regions"]
        for kind, queries in (("new point", [point(c) for c in combos[-probes:]]), ("broad", broad)):
            looked = [cache.explain(PUBDATA, q) for q in queries]
            row = {"entries": entries, "probe": kind,
                   "ms_lookup_median": statistics.median(lk.lookup_seconds * 1e3 for lk in looked),
                   "match_calls_median": statistics.median(lk.match_calls for lk in looked),
                   "fallbacks": sum(lk.fallbacks for lk in looked)}
            out.append(row)
            print(f"  {entries:5d} entries, {kind:9}: lookup {row['ms_lookup_median']:7.2f} ms (median), "
                  f"{row['match_calls_median']:.0f} match-type calls", flush=True)
    return out


def summary(rows: list[dict]) -> dict:
    """Per mix and run: medians of both response times and their ratio, result share
    from the cache, source calls saved."""
    out: dict = {}
    for mix in dict.fromkeys(r["mix"] for r in rows):
        for run in (1, 2):
            sel = [r for r in rows if r["mix"] == mix and r["run"] == run]
            if not sel:
                continue
            cached = statistics.median(r["ms_cache"] for r in sel)
            direct = statistics.median(r["ms_direct"] for r in sel)
            total = sum(r["result"] for r in sel)
            rem = [r["ms_remainder_source"] / r["ms_direct"] for r in sel if r["ms_remainder_source"]]
            out[f"{mix}/{run}"] = {
                "queries": len(sel), "ms_cache_median": cached, "ms_direct_median": direct,
                "ms_cached_part_median": statistics.median(r["ms_cached_part"] for r in sel),
                "ratio_median": statistics.median(r["ms_cache"] / r["ms_direct"] for r in sel),
                "ratio_of_medians": cached / direct,
                "from_cache_share": sum(r["from_cache"] for r in sel) / total if total else 1.0,
                "answered_without_source": sum(r["remainder_parts"] == 0 for r in sel),
                "ms_lookup_median": statistics.median(r["ms_lookup"] for r in sel),
                "match_calls": sum(r["match_calls"] for r in sel),
                "match_counts": {m: sum(r["match_counts"][m] for r in sel) for m in MATCH_TYPES},
                "remainder_vs_original_median": statistics.median(rem) if rem else None,
                "ms_lookup_max": max(r["ms_lookup"] for r in sel),
                "regions_given_way": sum(r["fallbacks"] for r in sel), "cut_short": sum(r["cut_short"] for r in sel),
                "entries_after": sel[-1]["entries"], "cache_bytes_after": sel[-1]["cache_bytes"]}
    return out


def run(args) -> dict:
    items = messages(args.messages, args.seed)
    latency, per_item = args.latency_ms / 1e3, args.per_item_ms / 1e3

    def fresh() -> tuple[SemanticCache, LatencySource]:
        source = LatencySource(items, latency, per_item)
        return SemanticCache(source, capacity_bytes=args.capacity_mb << 20), source

    rows: list[dict] = []
    cache, source = fresh()
    print("base mix, twice, from an empty cache ...", flush=True)
    rows += run_mix("base", BASE, cache, source)
    for name, narrowed in (("restricting", RESTRICT), ("expanding", EXPAND)):
        print(f"{name} mix, twice, after the base mix ...", flush=True)
        cache, source = fresh()
        run_mix("warm-up", BASE, cache, source, runs=1)
        rows += run_mix(name, [(c, q) for (c, _), q in zip(BASE, narrowed)], cache, source)
    print(f"large mix ({args.large} queries), twice, from an empty cache ...", flush=True)
    cache, source = fresh()
    rows += run_mix("large", large_mix(args.large, args.seed), cache, source)
    print("lookup time against entries ...", flush=True)
    sweep = lookup_sweep(messages(args.sweep_messages, args.seed), args.entries, args.probes, args.seed)
    return {"config": {"messages": args.messages,
                       "message_bytes_median": statistics.median(len(v) for v in items.values()),
                       "latency_ms": args.latency_ms, "per_item_ms": args.per_item_ms, "large": args.large,
                       "capacity_mb": args.capacity_mb, "sweep_messages": args.sweep_messages, "seed": args.seed,
                       "machine": f"{os.cpu_count()} cores",
                       "load_average_1min": round(os.getloadavg()[0], 2),
                       "date": datetime.now(timezone.utc).isoformat()},
            "summary": summary(rows), "queries": rows, "lookup_sweep": sweep}


def table(res: dict) -> str:
    c = res["config"]
    lines = [f"semantic cache over a source with {c['latency_ms']:g} ms latency + {c['per_item_ms']:g} ms per message, "
             f"{c['messages']:,} NITF messages; load average {c['load_average_1min']} on {c['machine']}",
             f"{'mix/run':15} {'queries':>7} {'ms cache':>9} {'ms source':>9} {'ratio':>6} {'ms cached':>9} "
             f"{'from cache':>10} {'no source':>9} {'ms lookup':>9} {'max':>7} {'calls':>7} {'gave way':>8} "
             f"{'cut':>4} {'remainder/orig':>14} {'entries':>7}"]
    for key, s in res["summary"].items():
        rem = s["remainder_vs_original_median"]
        lines.append(f"{key:15} {s['queries']:>7} {s['ms_cache_median']:>9.1f} {s['ms_direct_median']:>9.1f} "
                     f"{s['ratio_median']:>6.2f} {s['ms_cached_part_median']:>9.1f} "
                     f"{s['from_cache_share']:>10.0%} {s['answered_without_source']:>9} "
                     f"{s['ms_lookup_median']:>9.2f} {s['ms_lookup_max']:>7.0f} {s['match_calls']:>7} "
                     f"{s['regions_given_way']:>8} {s['cut_short']:>4} {'-' if rem is None else f'{rem:.2f}':>14} "
                     f"{s['entries_after']:>7}")
    lines.append("medians per query; ratio: cache / source alone; ms cached: until the part found in the cache is "
                 f"out; max: the slowest lookup; gave way: regions given up to keep a remainder within "
                 f"{defaults.MAX_PARTS} parts; cut: lookups stopped at {defaults.MAX_MATCH_CALLS:,} match-type calls; "
                 "remainder/orig: the remainder's source time against the original query's")
    for kind in ("new point", "broad"):
        lines.append(f"lookup against entries, {kind} (median ms / match-type calls): " + ", ".join(
            f"{x['entries']}: {x['ms_lookup_median']:.2f} / {x['match_calls_median']:.0f}"
            for x in res["lookup_sweep"] if x["probe"] == kind))
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["queries"]
    fig, axes = plt.subplots(3, 3, figsize=(16, 12))
    for ax, mix in zip(axes[0], ("base", "restricting", "expanding")):
        sel = [r for r in rows if r["mix"] == mix]
        ax.plot([r["ms_direct"] for r in sel], "k-", lw=1, label="without cache")
        ax.plot([r["ms_cache"] for r in sel], "b-", lw=1.5, label="with cache")
        ax.axvline(len(sel) / 2 - 0.5, color="0.7", ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{mix} mix, run 1 | run 2 (Figs. 20-22)")
        ax.set_xlabel("query")
        ax.set_ylabel("response time (ms)")
        ax.legend(fontsize=8)
    large = [r for r in rows if r["mix"] == "large"]
    ax = axes[1][0]
    ax.plot([r["ms_direct"] for r in large], "k-", lw=0.8, label="without cache")
    ax.plot([r["ms_cache"] for r in large], "b-", lw=0.8, label="with cache")
    ax.plot([r["ms_cached_part"] for r in large], "g-", lw=0.6, label="cached part out")
    ax.set_yscale("log")
    ax.set_title("large mix, run 1 | run 2 (Fig. 23a)")
    ax.set_xlabel("query")
    ax.set_ylabel("response time (ms)")
    ax.legend(fontsize=8)
    ax = axes[1][1]
    ax.plot([r["result"] for r in large], "b-", lw=0.8, label="result (messages)")
    ax.plot([r["from_cache"] for r in large], "g-", lw=0.8, label="of it found in the cache")
    ax.set_xlabel("query")
    ax.set_ylabel("messages")
    twin = ax.twinx()
    twin.plot([r["cache_bytes"] / 2**20 for r in large], "k-", lw=1, label="cache size")
    twin.set_ylabel("cache size (MB)")
    ax.set_title("large mix: cache size, result, part from the cache (Fig. 23b)")
    ax.legend(fontsize=8, loc="upper left")
    ax = axes[1][2]
    rem = [(r["ms_direct"], r["ms_remainder_source"]) for r in rows if r["ms_remainder_source"]]
    ax.scatter([a for a, _ in rem], [b for _, b in rem], s=8)
    top = max(max(a, b) for a, b in rem) if rem else 1
    ax.plot([0, top], [0, top], "k:", lw=1)
    ax.set_xlabel("original query at the source (ms)")
    ax.set_ylabel("remainder at the source (ms)")
    ax.set_title("remainder vs original query (Fig. 24)")
    ax = axes[2][0]
    bottom = [0] * len(large)
    for m, color in zip(MATCH_TYPES, ("tab:green", "tab:cyan", "tab:orange", "tab:red", "0.8")):
        vals = [r["match_counts"][m] for r in large]
        ax.bar(range(len(large)), vals, bottom=bottom, color=color, width=1.0, label=m)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot([r["entries_before"] for r in large], "k-", lw=1, label="entries in the cache")
    ax.set_xlabel("query (large mix)")
    ax.set_ylabel("match-type calls / entries")
    ax.set_title("match-type calls per query and outcomes (Fig. 25)")
    ax.legend(fontsize=7)
    ax = axes[2][1]
    for kind, style in (("new point", "bo-"), ("broad", "rs-")):
        sel = [x for x in res["lookup_sweep"] if x["probe"] == kind]
        ax.plot([x["entries"] for x in sel], [x["ms_lookup_median"] for x in sel], style,
                label=f"sweep: {kind} (median)")
    ax.scatter([r["entries_before"] for r in rows], [r["ms_lookup"] for r in rows], s=5, c="0.6",
               label="the mixes' queries")
    ax.set_xlabel("entries in the cache")
    ax.set_ylabel("lookup time (ms)")
    ax.set_title("cache-search time vs entries (Figs. 25-26)")
    ax.legend(fontsize=8)
    ax = axes[2][2]
    keys = list(res["summary"])
    ax.bar(range(len(keys)), [res["summary"][k]["ratio_median"] for k in keys], color="tab:blue")
    ax.axhline(1, color="k", lw=1)
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("response time with / without cache (median)")
    ax.set_title("per mix and run")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cache", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, help="messages at the source (default 3000, quick 600)")
    p.add_argument("--latency-ms", type=float, help="source latency per call (default 50, quick 20)")
    p.add_argument("--per-item-ms", type=float, default=0.05, help="source time per message returned (default 0.05)")
    p.add_argument("--large", type=int, help="queries in the large mix (default 100, quick 30)")
    p.add_argument("--entries", type=lambda s: [int(x) for x in s.split(",")],
                   help="point regions in the lookup sweep (default 50,100,200,400,800,1600; quick 25,50,100)")
    p.add_argument("--probes", type=int, default=20, help="new points looked up at each size (default 20)")
    p.add_argument("--sweep-messages", type=int, default=300,
                   help="messages at the lookup sweep's source (default 300)")
    p.add_argument("--capacity-mb", type=int, default=64)
    p.add_argument("--seed", type=int, default=2003)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/cache.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    q = args.quick
    args.messages = args.messages or (600 if q else 3000)
    args.latency_ms = args.latency_ms if args.latency_ms is not None else (20.0 if q else 50.0)
    args.large = args.large if args.large is not None else (30 if q else 100)
    args.entries = args.entries or ([25, 50, 100] if q else [50, 100, 200, 400, 800, 1600])
    res = run(args)
    print(table(res))
    save(res, args.json or RESULTS / "cache.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
