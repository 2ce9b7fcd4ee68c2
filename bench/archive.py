"""The thesis' experiments on the archive's index structures (file ``004``, section 4.2),
on synthetic data of the same shape (Barton and GovTrack are not reachable here), plus
the archive's own figures.

    python -m bench.archive                      # full sizes (~15-25 minutes)
    python -m bench.archive --quick              # small sizes, a minute

* E-B+: N RDF-like triples (~97 B each) into a clustered ``(S, P, O)`` B+-tree on a page
  file, one by one (min fill B/3, shortest-key split, 16 KB pages, 120-page buffer) vs
  bulk-loaded from the sorted triples: time and size (thesis: 80 h vs 88 min, 14 GB vs
  6 GB for 51M triples).
* E-VT: 100,000 intervals (starts 1..100,000; 80% of lengths 1..100, the rest
  101..5000) in the RI-tree (two B+-trees) and in 1-D and 2-D (mapped points) R-trees
  (``rtree``, libspatialindex; 2 KB pages, fill 0.33); 10 sliding window queries per
  window length; page accesses without a buffer and with 12 pages per tree (thesis:
  RI-tree ~3x the 1-D R-tree without a buffer, ~2x with it; the RI-tree gains from the
  buffer, the R-trees hardly).
* E-TT: N distinct triples as intervals (start from a permutation of 1..N, length
  10..1000), 0-50% of them deleted at their end, applied in time order to an MVBT
  (16 KB pages, d = 0.25, e = 0.5, shortest-key split): space against the raw size
  (thesis: ~5x with live data only).
* Archive: NITF messages per second archived into a partition archive on disk (the
  overlay's own throughput from ``bench/results/overlay.json`` beside it), and replay
  of a profile over a one-hour window through the index vs a scan of that window and vs
  a full scan of the archive with the engine.

Writes ``bench/results/archive.json`` and a PNG next to it; prints a table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from archive import MVBT, BPlusTree, PageStore, RITree

RESULTS = Path(__file__).resolve().parent / "results"

PREDICATES = [f"http://purl.org/dc/elements/1.1/{p}" for p in
              ("title", "creator", "subject", "date", "type", "format", "language", "publisher",
               "contributor", "identifier", "relation", "coverage", "rights", "source", "description")]


def triples(n: int, seed: int = 1) -> list[tuple[str, str, str]]:
    """Barton-like triples: library records as subjects, Dublin Core predicates, literal
    objects of varied length (~97 bytes per triple), in no useful order."""
    rnd = random.Random(seed)
    words = ["tide", "stock", "harbor", "report", "senate", "market", "river", "library", "archive",
             "index", "version", "record", "catalog", "survey", "journal", "press"]
    out = set()
    while len(out) < n:
        s = f"http://barton.example/record/r{rnd.randrange(n // 4 + 1):07d}"
        p = rnd.choice(PREDICATES)
        o = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 6)))
        out.add((s, p, o))
    rows = sorted(out)
    rnd.shuffle(rows)
    return rows


def raw_size(rows) -> int:
    return sum(len(s.encode()) + len(p.encode()) + len(o.encode()) for s, p, o in rows)


# -- E-B+ ------------------------------------------------------------------------------

def e_bplus(n: int, workdir: Path) -> dict:
    rows = triples(n)
    out = {"triples": n, "raw_bytes": raw_size(rows), "page_size": 16384, "buffer_pages": 120}
    store = PageStore(workdir / "one.bpt", 16384, 120)
    t = BPlusTree(store, "spo", min_load=0.33, split="shortest")
    t0 = time.perf_counter()
    for s, p, o in rows:
        t.insert((s, p, o), b"")
    store.flush()
    out["one_by_one_s"] = time.perf_counter() - t0
    out["one_by_one_bytes"] = (workdir / "one.bpt").stat().st_size
    out["one_by_one_io"] = {"reads": store.reads, "writes": store.writes}
    store.close()
    store = PageStore(workdir / "bulk.bpt", 16384, 120)
    b = BPlusTree(store, "spo", min_load=0.33, split="shortest")
    t0 = time.perf_counter()
    b.bulk_load(((r, b"") for r in sorted(rows)), fill=1.0)
    store.flush()
    out["bulk_s"] = time.perf_counter() - t0
    out["bulk_bytes"] = (workdir / "bulk.bpt").stat().st_size
    out["bulk_io"] = {"reads": store.reads, "writes": store.writes}
    store.close()
    out["time_ratio"] = out["one_by_one_s"] / out["bulk_s"]
    out["size_ratio"] = out["one_by_one_bytes"] / out["bulk_bytes"]
    return out


# -- E-VT ------------------------------------------------------------------------------

class _CountingStorage:
    """libspatialindex's custom storage with an LRU buffer of N pages counting misses."""

    def __new__(cls, buffer_pages: int):
        from collections import OrderedDict

        from rtree import index

        class Storage(index.CustomStorage):
            def __init__(self):
                super().__init__()
                self.pages, self.next, self.reads, self.cap = {}, 0, 0, buffer_pages
                self.lru = OrderedDict()

            def create(self, err):
                pass

            def destroy(self, err):
                pass

            def flush(self, err):
                pass

            def loadByteArray(self, page, err):
                if page in self.lru:
                    self.lru.move_to_end(page)
                else:
                    self.reads += 1
                    if self.cap:
                        self.lru[page] = True
                        if len(self.lru) > self.cap:
                            self.lru.popitem(last=False)
                data = self.pages.get(page)
                if data is None:
                    err.contents.value = self.InvalidPageError
                return data

            def storeByteArray(self, page, data, err):
                if page == self.NewPage:
                    page, self.next = self.next, self.next + 1
                self.pages[page] = data
                return page

            def deleteByteArray(self, page, err):
                self.pages.pop(page, None)

            hasData = property(lambda self: bool(self.pages))

        return Storage()


def _rtree(storage):
    from rtree import index

    p = index.Property()
    p.dimension = 2
    # 2 KB pages: a 2-D entry is an id, a box of 4 doubles and a length (~44 bytes).
    p.leaf_capacity = p.index_capacity = 46
    p.fill_factor = 0.33
    p.variant = index.RT_Quadratic
    return index.Index(storage, properties=p)


def intervals(n: int, seed: int = 2) -> list[tuple[int, int]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        a = rnd.randint(1, n)
        length = rnd.randint(1, 100) if rnd.random() < 0.8 else rnd.randint(101, 5000)
        out.append((a, a + length))
    return out


WINDOWS = [5, 10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000]


def e_vt(n: int, queries: int) -> dict:
    ivs = intervals(n)
    out = {"intervals": n, "windows": WINDOWS, "queries_per_window": queries, "page_size": 2048, "runs": {}}
    for buf in (0, 12):
        ri = RITree(page_size=2048, buffer_pages=buf)
        st1, st2 = _CountingStorage(buf), _CountingStorage(buf)
        r1, r2 = _rtree(st1), _rtree(st2)
        for i, (a, b) in enumerate(ivs):
            ri.insert(a, b, i)
            r1.insert(i, (a, 0, b - 1, 1))          # 1-D: the interval as a line
            r2.insert(i, (a, b - 1, a, b - 1))      # 2-D: the point (start, end)
        ri.backend.drop_buffers()
        run = {"ritree": [], "rtree_1d": [], "rtree_2d": []}
        for w in WINDOWS:
            acc = {k: [] for k in run}
            for q in range(queries):
                lo = 1 + (q * max(n + 5000 - w, 0)) // max(queries - 1, 1)   # slides over the data
                hi = lo + w
                ri.reset_counters()
                st1.reads = st2.reads = 0
                a = ri.intersecting(lo, hi)
                b = set(r1.intersection((lo, 0, hi - 1, 1)))
                c = set(r2.intersection((0, lo, hi - 1, 10**9)))
                assert a == b == c, f"the three structures disagree on [{lo}, {hi})"
                acc["ritree"].append(ri.stats()["page_reads"])
                acc["rtree_1d"].append(st1.reads)
                acc["rtree_2d"].append(st2.reads)
            for k in run:
                run[k].append(statistics.mean(acc[k]))
        out["runs"]["buffer_0" if buf == 0 else f"buffer_{buf}"] = run
    r0, r12 = out["runs"]["buffer_0"], out["runs"]["buffer_12"]
    out["ratio_ritree_to_rtree1d"] = {
        "no_buffer": ratio(statistics.mean(r0["ritree"]), statistics.mean(r0["rtree_1d"])),
        "buffer_12": ratio(statistics.mean(r12["ritree"]), statistics.mean(r12["rtree_1d"]))}
    out["buffer_saving"] = {k: 1 - statistics.mean(r12[k]) / statistics.mean(r0[k]) for k in r0}
    out["ratio_per_window"] = {run: per_window_ratio(out, run) for run in out["runs"]}
    return out


# -- E-TT ------------------------------------------------------------------------------

def e_tt(n: int, fractions: list[float]) -> dict:
    rows = triples(n, seed=3)
    raw = raw_size(rows)
    out = {"triples": n, "raw_bytes": raw, "page_size": 16384, "d": 0.25, "e": 0.5, "variants": []}
    rnd = random.Random(4)
    starts = list(range(1, n + 1))
    rnd.shuffle(starts)
    lengths = [rnd.randint(10, 1000) for _ in range(n)]
    for frac in fractions:
        deleted = set(rnd.sample(range(n), int(frac * n)))
        events = [(starts[i], 1, i) for i in range(n)] + [(starts[i] + lengths[i], 0, i) for i in deleted]
        events.sort()
        t = MVBT(None, page_size=16384, d=0.25, e=0.5, split="shortest")
        t0 = time.perf_counter()
        for v, (_, kind, i) in enumerate(events):
            key = rows[i]
            if kind:
                t.insert(key, v, b"")
            else:
                t.delete(key, v)
        s = t.stats()
        out["variants"].append({"deleted": frac, "operations": len(events), "pages": s["pages"],
                                "bytes": s["bytes"], "space_ratio": s["bytes"] / raw, "live": s["live"],
                                "height": s["height"], "seconds": time.perf_counter() - t0})
    return out


# -- the archive's own figures ---------------------------------------------------------

def e_archive(messages: int, profiles: int, workdir: Path) -> dict:
    from archive.directory import Archive
    from yfilter import Engine
    from yfilter.generators import DocGenerator, ProfileGenerator, Schema

    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=5)
    docs = [gen.generate() for _ in range(messages)]
    a = Archive(workdir / "archive")
    span_ms = 24 * 3600 * 1000
    t0 = time.perf_counter()
    for i, d in enumerate(docs):
        a.add("news", i % 2, i // 2, i * span_ms // messages, d)
    a.flush()
    archive_s = time.perf_counter() - t0
    out = {"messages": messages, "archive_seconds": archive_s, "messages_per_s": messages / archive_s,
           "bytes_per_message": sum(len(d) for d in docs) / messages}
    overlay = RESULTS / "overlay.json"
    if overlay.exists():
        # The overlay's committed throughput (six brokers on Kafka + Spark, 1k profiles):
        # what the archive writer has to keep up with beside it.
        runs = json.loads(overlay.read_text()).get("overlay", [])
        out["overlay_messages_per_s"] = next((r["throughput_msg_s"] for r in runs
                                              if r.get("mode") == "routing" and r.get("profiles") == 1000), None)
    texts = ProfileGenerator(Schema.nitf(), n_preds=(1, 2), p_star=0.1, p_desc=0.3, seed=6).batch(profiles)
    hour = 3600 * 1000
    rnd = random.Random(7)
    idx_t, scan_t, full_t, hits = [], [], [], []
    for text in texts:
        w1 = rnd.randrange(0, span_ms - hour)
        t0 = time.perf_counter()
        got = {r.record.message_id for r in a.replay(text, w1, w1 + hour)}
        idx_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scanned = {r.record.message_id for r in a.replay(text, w1, w1 + hour, use_index=False)}
        scan_t.append(time.perf_counter() - t0)
        engine = Engine()
        engine.add("p", text)
        t0 = time.perf_counter()
        full = set()      # no archive index at all: match every message, keep the window's
        for part in a.partitions():
            for tick in range(1, part.meta["tick"] + 1):
                rec, data = part.read(tick)
                if engine.match(data) and w1 <= rec.time <= w1 + hour:
                    full.add(rec.message_id)
        full_t.append(time.perf_counter() - t0)
        assert got == scanned == full, f"replay differs from the scan for {text}"
        hits.append(len(got))
    out.update(profiles=profiles, window_ms=hour,
               replay_index_ms_median=1000 * statistics.median(idx_t),
               replay_window_scan_ms_median=1000 * statistics.median(scan_t),
               full_scan_ms_median=1000 * statistics.median(full_t),
               matches_median=statistics.median(hits))
    out["full_scan_over_index"] = out["full_scan_ms_median"] / out["replay_index_ms_median"]
    out["window_scan_over_index"] = out["replay_window_scan_ms_median"] / out["replay_index_ms_median"]
    a.close()
    return out


# -- output ----------------------------------------------------------------------------

def ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is zero (a small tree can sit wholly in the buffer: no page reads)."""
    return a / b if b else None


def per_window_ratio(v: dict, run: str) -> list[float | None]:
    """RI-tree page accesses over the 1-D R-tree's, per window length."""
    r = v["runs"][run]
    return [ratio(a, b) for a, b in zip(r["ritree"], r["rtree_1d"])]


def _fmt(x: float | None, spec: str) -> str:
    width = spec.split(".")[0]
    return format(x, spec) if x is not None else format("-", ">" + width)


def table(res: dict) -> str:
    b, v, t, a = res["e_bplus"], res["e_vt"], res["e_tt"], res["archive"]
    lines = [f"E-B+  {b['triples']:,} triples, 16 KB pages, 120-page buffer",
             f"  one by one  {b['one_by_one_s']:9.1f} s  {b['one_by_one_bytes'] / 2**20:8.1f} MB",
             f"  bulk load   {b['bulk_s']:9.1f} s  {b['bulk_bytes'] / 2**20:8.1f} MB",
             f"  ratio       {b['time_ratio']:9.1f} x  {b['size_ratio']:8.2f} x",
             f"E-VT  {v['intervals']:,} intervals, 2 KB pages, mean page accesses per query",
             "  window " + "".join(f"{w:>7}" for w in v["windows"])]
    for run, vals in v["runs"].items():
        for k, xs in vals.items():
            lines.append(f"  {k:<9}{run[7:]:>3}" + "".join(f"{x:7.1f}" for x in xs))
    for run in v["runs"]:
        ratios = per_window_ratio(v, run)
        known = [x for x in ratios if x is not None]
        lines.append(f"  RI-tree / 1-D R-tree {run[7:]:>2}" + "".join(_fmt(x, "7.2f") for x in ratios)
                     + (f"   median {statistics.median(known):.2f}" if known else ""))
    lines.append("  saved by the buffer: " + ", ".join(f"{k} {x:.0%}" for k, x in v["buffer_saving"].items()))
    lines.append(f"E-TT  {t['triples']:,} triples ({t['raw_bytes'] / 2**20:.1f} MB raw), 16 KB pages, d 0.25, e 0.5")
    for x in t["variants"]:
        lines.append(f"  {x['deleted']:4.0%} deleted  {x['bytes'] / 2**20:8.1f} MB  {x['space_ratio']:5.2f} x raw  "
                     f"height {x['height']}")
    lines.append(f"Archive  {a['messages']:,} NITF messages: {a['messages_per_s']:.0f} messages/s archived "
                 f"(the overlay's committed routing throughput at 1k profiles: {a.get('overlay_messages_per_s') or 0:.1f})")
    lines.append(f"  replay, one-hour window, median of {a['profiles']} profiles: index {a['replay_index_ms_median']:.1f} ms, "
                 f"window scan {a['replay_window_scan_ms_median']:.1f} ms, full scan {a['full_scan_ms_median']:.1f} ms "
                 f"({a['full_scan_over_index']:.0f}x the index)")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(12, 8.5))
    b = res["e_bplus"]
    ax[0][0].bar(["one by one", "bulk load"], [b["one_by_one_s"], b["bulk_s"]], color=["#c44", "#4a4"])
    ax[0][0].set_ylabel("seconds")
    tw = ax[0][0].twinx()
    tw.plot(["one by one", "bulk load"], [b["one_by_one_bytes"] / 2**20, b["bulk_bytes"] / 2**20], "ko-")
    tw.set_ylabel("MB (line)")
    ax[0][0].set_title(f"E-B+: {b['triples']:,} triples, time {b['time_ratio']:.0f}x, size {b['size_ratio']:.1f}x")
    v = res["e_vt"]
    for run, style in (("buffer_0", "-"), ("buffer_12", "--")):
        for k, c in (("ritree", "C0"), ("rtree_1d", "C1"), ("rtree_2d", "C2")):
            ax[0][1].plot(v["windows"], v["runs"][run][k], style, color=c, marker="o", ms=3,
                          label=f"{k} {'no buffer' if run == 'buffer_0' else '12 pages'}")
    for run, style in (("buffer_0", "-"), ("buffer_12", "--")):
        ax[0][1].plot([], [], " ", label=f"RI/1-D {'no buffer' if run == 'buffer_0' else '12 pages'}: "
                      + " ".join(_fmt(x, ".1f") for x in per_window_ratio(v, run)))
    ax[0][1].set_xscale("log")
    ax[0][1].set_yscale("log")
    ax[0][1].set_xlabel("window length")
    ax[0][1].set_ylabel("page accesses per query")
    ax[0][1].set_title(f"E-VT: {v['intervals']:,} intervals, 2 KB pages")
    ax[0][1].legend(fontsize=7)
    t = res["e_tt"]
    ax[1][0].plot([100 * x["deleted"] for x in t["variants"]], [x["space_ratio"] for x in t["variants"]], "o-")
    ax[1][0].set_xlabel("% of triples deleted")
    ax[1][0].set_ylabel("MVBT size / raw size")
    ax[1][0].set_title(f"E-TT: {t['triples']:,} triples, 16 KB pages, d = 0.25, e = 0.5")
    a = res["archive"]
    names = ["index", "window scan", "full scan"]
    vals = [a["replay_index_ms_median"], a["replay_window_scan_ms_median"], a["full_scan_ms_median"]]
    ax[1][1].bar(names, vals, color=["#4a4", "#aa4", "#c44"])
    ax[1][1].set_ylabel("ms (median)")
    ax[1][1].set_title(f"Replay of a one-hour window ({a['messages']:,} messages over 24 h)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.archive", description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--quick", action="store_true", help="small sizes (a minute)")
    a("--triples", type=int, help="E-B+ triples (default 1,000,000; quick 20,000)")
    a("--intervals", type=int, help="E-VT intervals (default 100,000; quick 5,000)")
    a("--queries", type=int, default=10, help="E-VT queries per window length (default 10)")
    a("--tt-triples", type=int, help="E-TT triples (default 500,000; quick 10,000)")
    a("--messages", type=int, help="archive messages (default 20,000; quick 400)")
    a("--profiles", type=int, help="replayed profiles (default 20; quick 5)")
    a("--only", help="comma-separated experiments to run (e_bplus,e_vt,e_tt,archive); the others are kept "
                     "from the existing JSON")
    a("--replot", action="store_true", help="only print the table and redraw the PNG from the JSON")
    a("--json", type=Path, help="where to write the JSON (default bench/results/archive.json)")
    a("--plot", type=Path, help="where to write the PNG (default: next to the JSON)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    q = args.quick
    json_path = args.json or RESULTS / "archive.json"
    only = set(args.only.split(",")) if args.only else None
    if args.replot:
        only = set()
    res = json.loads(json_path.read_text()) if only is not None and json_path.exists() else {}
    res["quick"] = q
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        work = Path(tmp)
        steps = [("e_bplus", lambda: e_bplus(args.triples or (20_000 if q else 1_000_000), work)),
                 ("e_vt", lambda: e_vt(args.intervals or (5_000 if q else 100_000), args.queries)),
                 ("e_tt", lambda: e_tt(args.tt_triples or (10_000 if q else 500_000), [0, 0.1, 0.2, 0.3, 0.4, 0.5])),
                 ("archive", lambda: e_archive(args.messages or (400 if q else 20_000), args.profiles or (5 if q else 20),
                                               work))]
        for name, step in steps:
            if only is not None and name not in only:
                continue
            t0 = time.perf_counter()
            print(f"running {name} ...", flush=True)
            res[name] = step()
            res.setdefault("seconds", {})[name] = round(time.perf_counter() - t0, 1)
            print(f"  {name} took {time.perf_counter() - t0:.0f} s", flush=True)
            # Written after each experiment, so that a long run keeps what it finished.
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(res, indent=1) + "\n")
    print(table(res))
    plot_path = args.plot or json_path.with_suffix(".png")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res, plot_path)
    print(f"wrote {json_path} and {plot_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
