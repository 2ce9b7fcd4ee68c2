"""Benchmark of the yfilter engine against lxml one-by-one and the parse floor.

    python -m bench.yfilter            # full run (1k, 10k, 100k, 500k profiles)
    python -m bench.yfilter --quick    # small sizes, a minute or so

Two workloads over the NITF-like schema that ships with yfilter: *path* profiles
(YFilter's defaults: depth 6, P(*) = 0.2, P(//) = 0.2, distinct) and *pred*
profiles (the same paths with 1-2 attribute/text equality predicates and one
nested path ending in a value comparison). Messages are generated NITF documents
(DocDepth 6, MaxRepeats 3 by default).
For each size, in a fresh child process (so memory per profile is measured on a
clean heap): time to add the profiles (``Engine.add_many``, with the one full
garbage collection it runs; up to 100k profiles also ``add`` one by one on another
engine), memory, and per message: the engine on XML bytes (everything a broker does:
parse, match, report ids), split into matching and reporting, and the engine on
decoded ``formats.Message`` tables. In the same run: lxml evaluating compiled XPath
profiles one by one (measured up to ``--lxml-max`` profiles, extrapolated linearly
beyond and marked so), and the floors: lxml parse alone; the issue's "parse+event
walk", the floor: lxml parse, then lxml's event walk of the tree (``iterwalk``, start
and end events); parse + a bare walk over every element (no events, lower); and
lxml's event parser (``iterparse``, start and end events). Times are CPU time of the
measuring process (the machine is shared; see ``_per_message``). The "x floor"
column divides the engine's time by parse + event walk timed in the same child, its
passes taking turns with the engine's over the same messages (``_paired``): the
machine's slow spells, which can double every time for minutes, then fall on both
sides; the issue's bound is on it. "x walk" and "x event" do the same against the
bare walk and the event parser. The DFA caches are warmed by a pass over other
messages of the same kind first, as in a broker that has been running; every timed
pass then sees messages the engine has never seen (so no cache holds their answers).
Corpus workloads (``--workloads corpus`` or any ``c-<construct>``): profiles of the
issue-28 kinds written from the news corpus' vocabulary
(:class:`yfilter.generators.CorpusProfileGenerator`), one workload per construct
(``c-path``, ``c-value``, ``c-nested``, ``c-contains``, ``c-not``, ``c-position``,
``c-or``, ``c-tail``) and ``c-mixed``, matched against the corpus documents
themselves (``--corpus``, all 52 in every pass; the warm-up matches them too, as a
broker that has seen this vocabulary before). Their times are *medians* over the
passes (not the best), lxml one by one runs on the same profiles in the same child,
and they are written to ``bench/results/yfilter_corpus.json`` and ``.png`` unless
``--out``/``--plot`` say otherwise.
Prints a table, writes ``bench/results/yfilter.json`` and a PNG plot. With
``--profile``, also where the engine's time goes at each size: the functions with the
most own time under cProfile while it matches the timed messages (printed, and kept
in the JSON as ``profile``; profiling slows Python code down, so read shares, not
times).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import multiprocessing
import os
import platform
import pstats
import resource
import statistics
import sys
import time
from pathlib import Path

from lxml import etree

from formats import Message
from yfilter import Engine
from broker.config import CORPUS_DIR
from yfilter.generators import CorpusProfileGenerator, DocGenerator, ProfileGenerator, Schema
from yfilter.generators.corpus import CONSTRUCTS

RESULTS = Path(__file__).resolve().parent / "results"

WORKLOADS = {
    "path": dict(depth=6, p_star=0.2, p_desc=0.2),
    "pred": dict(depth=6, p_star=0.2, p_desc=0.2, n_preds=(1, 2), n_nested=1,
                 nested_values=1.0),
}

CORPUS_WORKLOADS = [f"c-{c}" for c in CONSTRUCTS] + ["c-mixed"]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


DOC_DEPTH, MAX_REPEATS = 6, 3
ADD_EACH_MAX = 100_000  # sizes at which add one by one is timed too (beside add_many)


def _documents(n: int, seed: int) -> list[bytes]:
    g = DocGenerator(Schema.nitf(), doc_depth=DOC_DEPTH, max_repeats=MAX_REPEATS, seed=seed)
    return [g.generate() for _ in range(n)]


def _per_message(fn, batches: list[list]) -> float:
    """CPU seconds per message, best over the batches (one timed pass each). CPU
    time of this process, not wall time: the machine is shared, and another
    process's load must not count against whichever side happens to run then."""
    best = float("inf")
    for docs in batches:
        t = time.process_time()
        for d in docs:
            fn(d)
        best = min(best, (time.process_time() - t) / len(docs))
    return best


def _batches(n_docs: int, passes: int, seed: int) -> list[list[bytes]]:
    docs = _documents(n_docs * passes, seed)
    return [docs[i * n_docs:(i + 1) * n_docs] for i in range(passes)]


def _paired(fn, peers: list, batches: list[list]) -> list[float]:
    """``_per_message`` of ``fn`` and of each of ``peers``, their passes taking turns
    over the same batches, so that a slow spell of the shared machine falls on all."""
    best = [float("inf")] * (1 + len(peers))
    for docs in batches:
        for i, f in enumerate([fn, *peers]):
            best[i] = min(best[i], _per_message(f, [docs]))
    return best


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def _parse_event_walk(d: bytes) -> None:
    """The floor, the issue's parse + event walk: parse, then walk the tree as start
    and end events (lxml's iterwalk)."""
    for _ev, e in etree.iterwalk(etree.fromstring(d, _PARSER), events=("start", "end")):
        e.tag


def _parse_walk(d: bytes) -> None:
    """Parse, then visit every element (no events)."""
    for e in etree.fromstring(d, _PARSER).iter():
        e.tag


def _event_walk(d: bytes) -> None:
    """lxml's event parser, start and end events."""
    for _ev, e in etree.iterparse(io.BytesIO(d), events=("start", "end"),
                                  resolve_entities=False, no_network=True):
        e.tag


def floors(batches: list[list[bytes]]) -> dict[str, float]:
    def parse(d):
        etree.fromstring(d, _PARSER)

    return {"parse_s": _per_message(parse, batches),
            "parse_event_walk_s": _per_message(_parse_event_walk, batches),
            "parse_walk_s": _per_message(_parse_walk, batches),
            "event_walk_s": _per_message(_event_walk, batches)}


def profile(fn, docs: list, top: int = 15) -> list[dict]:
    """The ``top`` functions with the most own time while ``fn`` runs over ``docs``
    (cProfile): calls per message, and own and cumulative shares of the total."""
    pr = cProfile.Profile()
    pr.enable()
    for d in docs:
        fn(d)
    pr.disable()
    st = pstats.Stats(pr)
    root = str(Path(__file__).resolve().parent.parent) + os.sep
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [{"function": f"{file.removeprefix(root)}:{line}({name})",
             "calls_per_message": nc / len(docs), "own_share": tt / st.total_tt,
             "cumulative_share": ct / st.total_tt}
            for (file, line, name), (_, nc, tt, ct, _) in rows]


def profile_table(rows: list[dict]) -> str:
    lines = [f"    {'own':>6} {'cumul.':>6} {'calls/msg':>10}  function"]
    lines += [f"    {r['own_share']:6.1%} {r['cumulative_share']:6.1%} "
              f"{r['calls_per_message']:10.1f}  {r['function']}" for r in rows]
    return "\n".join(lines)


def run_one(workload: str, n: int, n_docs: int, passes: int, lxml_max: int, n_warm: int,
            seed: int, profiled: bool = False) -> dict:
    """One workload at one size; runs in a fresh child process. Above 10k profiles
    fewer messages are timed (at least 50 per pass), to keep the run within minutes;
    the warm-up is the same at every size (a larger engine has more to warm)."""
    n_docs = max(50, min(n_docs, n_docs * 10_000 // n))
    gen = ProfileGenerator(Schema.nitf(), seed=seed, **WORKLOADS[workload])
    t = time.process_time()
    profiles = gen.batch(n)
    gen_s = time.process_time() - t
    # Distinct messages for warm-up and for each measurement: no timed message has
    # been seen by the engine before.
    warm = _documents(n_warm, seed + 1000)
    batches = _batches(n_docs, passes, seed + 1)
    msg_batches = [[Message.from_xml(d) for d in b] for b in _batches(n_docs, passes, seed + 2)]
    split_batches = _batches(n_docs, passes, seed + 3)
    docs = [d for b in batches for d in b]
    gc.collect()
    rss0 = _rss()
    engine = Engine()
    t = time.process_time()
    engine.add_many((str(i), p) for i, p in enumerate(profiles))  # one full collection included
    add_s = time.process_time() - t
    gc.collect()
    mem = _rss() - rss0
    for d in warm:  # warm-up on other messages (DFA states, indexes, buckets)
        engine.match(d)
    out = {
        "workload": workload, "profiles": n, "messages": n_docs, "warmup_messages": len(warm),
        "generate_s": gen_s, "add_s": add_s,
        "bytes_per_profile": mem / n, "rss_bytes": _rss(),
        "engine_message_s": _per_message(engine.match, msg_batches),
    }
    # The floors again, in turns with the engine: the ratio the issue sets a bound on
    # (against parse + event walk), and against the bare walk and the event parser.
    out["engine_bytes_s"], out["floor_s"], out["walk_floor_s"], out["event_floor_s"] = _paired(
        engine.match, [_parse_event_walk, _parse_walk, _event_walk], batches)
    out["x_floor"] = out["engine_bytes_s"] / out["floor_s"]
    out["x_walk_floor"] = out["engine_bytes_s"] / out["walk_floor_s"]
    out["x_event_floor"] = out["engine_bytes_s"] / out["event_floor_s"]
    matched = [len(engine.match(d)) for d in docs]
    out["match_fraction"] = sum(matched) / len(docs) / n
    out["matched_per_message"] = sum(matched) / len(docs)
    evaluated = []
    out["matching_s"] = _per_message(lambda d: evaluated.append(engine.evaluate(d)),
                                     split_batches)
    t = time.process_time()
    for m in evaluated:
        m.ids()
    out["reporting_s"] = (time.process_time() - t) / len(evaluated)
    out["stats"] = engine.stats()
    if profiled:
        out["profile"] = profile(engine.match, docs)
    # lxml one by one: compiled once (like registration), then every profile per message.
    k = min(n, lxml_max)
    xpaths = [etree.XPath(f"boolean({p})") for p in profiles[:k]]
    def lxml_all(d):
        root = etree.fromstring(d, _PARSER)
        for x in xpaths:
            x(root)

    lxml_docs = docs[: max(5, n_docs // 10)] if k > 1000 else batches[0]
    lx = _per_message(lxml_all, [lxml_docs])
    out["lxml_measured_profiles"] = k
    out["lxml_s"] = lx * n / k
    out["lxml_extrapolated"] = k < n
    out["speedup_vs_lxml"] = out["lxml_s"] / out["engine_bytes_s"]
    out["doc_bytes"] = sum(map(len, docs)) / len(docs)
    out["doc_elements"] = sum(len(m) for b in msg_batches for m in b) / (n_docs * passes)
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if n <= ADD_EACH_MAX:  # the peer of add_many, last: its heap is not measured
        each = Engine()
        t = time.process_time()
        for i, p in enumerate(profiles):
            each.add(str(i), p)
        out["add_each_s"] = time.process_time() - t
    return out


def corpus_documents(corpus: Path = CORPUS_DIR) -> list[bytes]:
    return [p.read_bytes() for p in sorted(Path(corpus).glob("*.xml"))]


def corpus_profiles(workload: str, n: int, seed: int, docs: list[bytes]
                    ) -> tuple[list[str], dict[str, str], int]:
    """``n`` profiles of ``c-<construct>`` (or ``c-mixed``), their namespaces and how
    many repeat an earlier one (the vocabulary allows fewer distinct ones)."""
    construct = workload.removeprefix("c-")
    mix = None if construct == "mixed" else {construct: 1.0}
    g = CorpusProfileGenerator(docs, mix=mix, seed=seed)
    return g.batch(n), g.namespaces, g.duplicates


def _median_per_message(fn, docs: list, passes: int) -> float:
    times = []
    for _ in range(passes):
        t = time.process_time()
        for d in docs:
            fn(d)
        times.append((time.process_time() - t) / len(docs))
    return statistics.median(times)


def _paired_median(fns: list, docs: list, passes: int) -> list[float]:
    """Median CPU seconds per message of each of ``fns``, their passes taking turns."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(passes):
        for i, f in enumerate(fns):
            times[i].append(_median_per_message(f, docs, 1))
    return [statistics.median(t) for t in times]


def run_corpus(workload: str, n: int, corpus: str, passes: int, lxml_max: int, seed: int,
               profiled: bool = False) -> dict:
    """One corpus workload at one size, in a fresh child: the engine on the corpus
    documents' bytes and decoded Messages, and lxml one by one on the same profiles
    (all of them up to ``lxml_max``, beyond extrapolated linearly and marked so)."""
    docs = corpus_documents(Path(corpus))
    t = time.process_time()
    profiles, namespaces, dups = corpus_profiles(workload, n, seed, docs)
    gen_s = time.process_time() - t
    msgs = [Message.from_xml(d) for d in docs]
    gc.collect()
    rss0 = _rss()
    engine = Engine(namespaces=namespaces)
    t = time.process_time()
    engine.add_many((str(i), p) for i, p in enumerate(profiles))
    add_s = time.process_time() - t
    gc.collect()
    mem = _rss() - rss0
    for d in docs:  # warm-up: the DFA caches and the C side's filing
        engine.match(d)
    for m in msgs:
        engine.match(m)
    out = {"workload": workload, "profiles": n, "duplicates": dups, "messages": len(docs),
           "warmup_messages": 2 * len(docs), "passes": passes, "generate_s": gen_s,
           "add_s": add_s, "bytes_per_profile": mem / n, "rss_bytes": _rss(),
           "statistic": "median"}
    out["engine_bytes_s"], out["floor_s"], out["walk_floor_s"], out["event_floor_s"] = \
        _paired_median([engine.match, _parse_event_walk, _parse_walk, _event_walk], docs,
                       passes)
    out["engine_message_s"] = _median_per_message(engine.match, msgs, passes)
    out["x_floor"] = out["engine_bytes_s"] / out["floor_s"]
    out["x_walk_floor"] = out["engine_bytes_s"] / out["walk_floor_s"]
    out["x_event_floor"] = out["engine_bytes_s"] / out["event_floor_s"]
    matched = [len(engine.match(d)) for d in docs]
    out["match_fraction"] = sum(matched) / len(docs) / n
    out["matched_per_message"] = sum(matched) / len(docs)
    evaluated = []
    out["matching_s"] = _median_per_message(lambda d: evaluated.append(engine.evaluate(d)),
                                            docs, passes)
    t = time.process_time()
    for m in evaluated:
        m.ids()
    out["reporting_s"] = (time.process_time() - t) / len(evaluated)
    out["stats"] = engine.stats()
    if profiled:
        out["profile"] = profile(engine.match, docs * 3)
    k = min(n, lxml_max)
    xpaths = [etree.XPath(f"boolean({p})", namespaces=namespaces) for p in profiles[:k]]

    def lxml_all(d):
        root = etree.fromstring(d, _PARSER)
        for x in xpaths:
            x(root)

    lx = _median_per_message(lxml_all, docs, 1 if k > 1000 else passes)
    out["lxml_measured_profiles"] = k
    out["lxml_s"] = lx * n / k
    out["lxml_extrapolated"] = k < n
    out["speedup_vs_lxml"] = out["lxml_s"] / out["engine_bytes_s"]
    out["doc_bytes"] = sum(map(len, docs)) / len(docs)
    out["doc_elements"] = sum(len(m) for m in msgs) / len(msgs)
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _child(args):
    if args[0].startswith("c-"):
        wl, n, _n_docs, passes, lxml_max, _n_warm, seed, profiled, corpus = args
        return run_corpus(wl, n, corpus, passes, lxml_max, seed, profiled)
    return run_one(*args[:-1])


def plot(results: list[dict], fl: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    many = len({r["workload"] for r in results}) > 2
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 10) if many else (13, 5))
    doc_mb = results[0]["doc_bytes"] / 1e6
    names = list(dict.fromkeys(r["workload"] for r in results))
    cmap = plt.get_cmap("tab10")
    for i, wl in enumerate(names):
        color = cmap(i % 10)
        rs = [r for r in results if r["workload"] == wl]
        if not rs:
            continue
        xs = [r["profiles"] for r in rs]
        ax1.plot(xs, [r["engine_bytes_s"] * 1e6 for r in rs], "o-", color=color,
                 label=f"yfilter {wl} (XML bytes)")
        ax1.plot(xs, [r["engine_message_s"] * 1e6 for r in rs], "s:", color=color,
                 label=f"yfilter {wl} (decoded Message)")
        meas = [r for r in rs if not r["lxml_extrapolated"]]
        extra = [r for r in rs if r["lxml_extrapolated"]]
        ax1.plot([r["profiles"] for r in meas], [r["lxml_s"] * 1e6 for r in meas], "^-",
                 color=color, alpha=0.5, label=f"lxml one-by-one {wl}")
        if extra:
            joined = meas[-1:] + extra  # from the last measured point, if any
            ax1.plot([r["profiles"] for r in joined], [r["lxml_s"] * 1e6 for r in joined],
                     "^--", color=color, alpha=0.3, label=f"lxml {wl} (extrapolated)")
        ax2.plot(xs, [doc_mb / r["engine_bytes_s"] for r in rs], "o-", color=color,
                 label=f"yfilter {wl}")
        ax2.plot(xs, [doc_mb / r["lxml_s"] for r in rs], "^--", color=color, alpha=0.5,
                 label=f"lxml one-by-one {wl}")
    for key, style, label in (("parse_s", ":", "lxml parse"),
                              ("parse_event_walk_s", "-", "parse + event walk (floor)"),
                              ("parse_walk_s", "-.", "parse + bare walk"),
                              ("event_walk_s", "--", "lxml event parser")):
        ax1.axhline(fl[key] * 1e6, color="gray", linestyle=style, label=label)
        ax2.axhline(doc_mb / fl[key], color="gray", linestyle=style, label=label)
    ax1.set(xscale="log", yscale="log", xlabel="distinct profiles",
            ylabel="time per message (us)", title="Time per message")
    ax2.set(xscale="log", yscale="log", xlabel="distinct profiles", ylabel="MB/s",
            title="Throughput")
    if many:  # below the plots, in columns
        ax1.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(0, -0.1))
        ax2.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(0, -0.1))
    else:
        ax1.legend(fontsize=7)
        ax2.legend(fontsize=7)
    ax1.grid(True, which="both", alpha=0.3)
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(results: list[dict], fl: dict) -> str:
    head = (f"{'workload':10} {'profiles':>8} {'add s':>7} {'1 by 1':>7} {'B/prof':>7} "
            f"{'match%':>7} {'bytes us':>9} {'match us':>9} {'report us':>9} {'Msg us':>8} "
            f"{'MB/s':>6} {'lxml us':>11} {'speedup':>8} {'x floor':>7} {'x walk':>7} "
            f"{'x event':>7}")
    lines = [head, "-" * len(head)]
    for r in results:
        mbs = r["doc_bytes"] / 1e6 / r["engine_bytes_s"]
        lx = f"{r['lxml_s'] * 1e6:,.0f}" + ("*" if r["lxml_extrapolated"] else " ")
        each = f"{r['add_each_s']:.1f}" if "add_each_s" in r else "-"
        lines.append(
            f"{r['workload']:10} {r['profiles']:>8,} {r['add_s']:>7.1f} {each:>7} "
            f"{r['bytes_per_profile']:>7,.0f} {r['match_fraction'] * 100:>6.2f}% "
            f"{r['engine_bytes_s'] * 1e6:>9,.0f} {r['matching_s'] * 1e6:>9,.0f} "
            f"{r['reporting_s'] * 1e6:>9,.0f} {r['engine_message_s'] * 1e6:>8,.0f} "
            f"{mbs:>6.2f} {lx:>11} {r['speedup_vs_lxml']:>7.0f}x "
            f"{r['x_floor']:>6.1f}x {r['x_walk_floor']:>6.1f}x {r['x_event_floor']:>6.1f}x")
    lines.append(f"floors per message: parse {fl['parse_s'] * 1e6:.0f} us, parse + event walk "
                 f"{fl['parse_event_walk_s'] * 1e6:.0f} us, parse + bare walk "
                 f"{fl['parse_walk_s'] * 1e6:.0f} us, lxml event parser "
                 f"{fl['event_walk_s'] * 1e6:.0f} us, at the start  (* = lxml extrapolated "
                 "linearly; x floor / x walk / x event: against parse + event walk / parse + "
                 "bare walk / the event parser, each timed in turns with the engine; add s: "
                 "add_many, 1 by 1: add in a loop)")
    return "\n".join(lines)


def targets(results: list[dict], fl: dict) -> dict:
    """The issue's "Done when" numbers."""
    def get(wl, n):
        return next((r for r in results if r["workload"] == wl and r["profiles"] == n), None)

    out = {}
    for wl in WORKLOADS:
        r = get(wl, 10_000)
        if r:
            out[f"speedup_10k_{wl}"] = r["speedup_vs_lxml"]
            out[f"speedup_10k_{wl}_ok"] = r["speedup_vs_lxml"] >= 100
    r = get("pred", 100_000)
    if r:
        out["pred_100k_match_fraction"] = r["match_fraction"]
        out["pred_100k_x_floor"] = r["x_floor"]
        out["pred_100k_x_walk_floor"] = r["x_walk_floor"]
        out["pred_100k_x_event_floor"] = r["x_event_floor"]
        out["pred_100k_ok"] = r["match_fraction"] <= 0.01 and out["pred_100k_x_floor"] <= 5
    for wl in WORKLOADS:
        r = get(wl, 100_000)
        if r:
            out[f"add_100k_{wl}_s"] = r["add_s"]
            out[f"add_100k_{wl}_one_by_one_s"] = r["add_each_s"]
            out[f"bytes_per_profile_100k_{wl}"] = r["bytes_per_profile"]
        r = get(wl, 500_000)
        if r:
            out[f"loaded_500k_{wl}"] = True
            out[f"rss_500k_{wl}_bytes"] = r["rss_bytes"]
            out[f"max_rss_500k_{wl}_bytes"] = r["max_rss_bytes"]
    # issue 28, the corpus workloads
    r = get("c-mixed", 10_000)
    if r:
        out["corpus_speedup_10k_mixed"] = r["speedup_vs_lxml"]
        out["corpus_speedup_10k_mixed_ok"] = r["speedup_vs_lxml"] >= 100
    for wl in CORPUS_WORKLOADS:
        r = get(wl, 10_000)
        if r:
            out[f"corpus_10k_{wl}_ms"] = r["engine_bytes_s"] * 1e3
            out[f"corpus_10k_{wl}_ok"] = r["engine_bytes_s"] <= 0.3e-3
            out[f"corpus_10k_{wl}_bytes_per_profile"] = r["bytes_per_profile"]
        r100 = get(wl, 100_000)
        if r and r100:
            out[f"corpus_100k_over_10k_{wl}"] = r100["engine_bytes_s"] / r["engine_bytes_s"]
            out[f"corpus_100k_over_10k_{wl}_ok"] = r100["engine_bytes_s"] <= 4 * r["engine_bytes_s"]
        for big in (100_000, 500_000):
            rb = get(wl, big)
            if rb:
                out[f"corpus_{big // 1000}k_{wl}_ms"] = rb["engine_bytes_s"] * 1e3
                out[f"corpus_{big // 1000}k_{wl}_bytes_per_profile"] = rb["bytes_per_profile"]
    return out


def main(argv: list[str] | None = None) -> int:
    global DOC_DEPTH, MAX_REPEATS
    ap = argparse.ArgumentParser(prog="python -m bench.yfilter", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="sizes 1k and 10k, fewer messages (a smoke run; not for the record)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated profile counts (default 1000,10000,100000,500000)")
    ap.add_argument("--workloads", default="path,pred",
                    help="comma-separated: path, pred, c-<construct> (" +
                         ", ".join(CORPUS_WORKLOADS) + ") or 'corpus' for all of those")
    ap.add_argument("--corpus", type=Path, default=CORPUS_DIR,
                    help="directory of the XML documents of the corpus workloads")
    ap.add_argument("--docs", type=int, help="messages per measurement (default 200)")
    ap.add_argument("--warmup", type=int,
                    help="messages matched before timing, to warm the DFA caches as in a "
                         "running broker (default 500; 50 with --quick)")
    ap.add_argument("--passes", type=int,
                    help="timed passes, each over its own new messages; best is kept "
                         "(default 3)")
    ap.add_argument("--lxml-max", type=int, default=10_000,
                    help="largest profile count lxml is measured at; beyond, extrapolated")
    ap.add_argument("--doc-depth", type=int, default=DOC_DEPTH,
                    help=f"DocDepth of the generated messages (default {DOC_DEPTH})")
    ap.add_argument("--max-repeats", type=int, default=MAX_REPEATS,
                    help=f"MaxRepeats of the generated messages (default {MAX_REPEATS})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true",
                    help="also show where the engine's time goes at each size (cProfile: "
                         "the functions with the most own time, shares of the total)")
    ap.add_argument("--out", type=Path, help="default bench/results/yfilter.json "
                    "(yfilter_corpus.json when a corpus workload runs)")
    ap.add_argument("--plot", type=Path, help="default: --out with .png")
    args = ap.parse_args(argv)
    DOC_DEPTH, MAX_REPEATS = args.doc_depth, args.max_repeats  # inherited by the children
    sizes = args.sizes or ([1_000, 10_000] if args.quick else
                           [1_000, 10_000, 100_000, 500_000])
    n_docs = args.docs or (30 if args.quick else 200)
    passes = args.passes or (2 if args.quick else 3)
    n_warm = args.warmup or (50 if args.quick else 500)
    lxml_max = min(args.lxml_max, 1_000) if args.quick else args.lxml_max
    workloads = []
    for w in args.workloads.split(","):
        workloads += CORPUS_WORKLOADS if w == "corpus" else [w]
    for w in workloads:
        if w not in WORKLOADS and w not in CORPUS_WORKLOADS:
            ap.error(f"unknown workload {w!r}")
    corpus_run = any(w.startswith("c-") for w in workloads)
    if args.out is None:
        args.out = RESULTS / ("yfilter_corpus.json" if corpus_run else "yfilter.json")
    if args.plot is None:
        args.plot = args.out.with_suffix(".png")
    print(f"yfilter benchmark: sizes {sizes}, workloads {workloads}, {n_docs} messages per "
          f"pass (fewer above 10k profiles), best of {passes} passes, {n_warm} warm-up "
          f"messages, lxml measured up to {lxml_max:,} profiles" + (
              f"; corpus workloads: the documents of {args.corpus} in every pass, median of "
              f"{passes} passes" if corpus_run else ""), flush=True)
    fl = floors([corpus_documents(args.corpus)] * passes if corpus_run
                else _batches(n_docs, passes, args.seed + 1))
    results = []
    ctx = multiprocessing.get_context("fork")
    for wl in workloads:
        for n in sizes:
            print(f"  {wl:5} {n:>8,} profiles ...", end="", flush=True)
            t = time.perf_counter()
            with ctx.Pool(1) as pool:
                r = pool.apply(_child, ((wl, n, n_docs, passes, lxml_max, n_warm, args.seed,
                                         args.profile, str(args.corpus)),))
            results.append(r)
            print(f" {r['engine_bytes_s'] * 1e6:,.0f} us/message, match "
                  f"{r['match_fraction'] * 100:.2f}% ({time.perf_counter() - t:.0f} s)",
                  flush=True)
            if args.profile:
                print(profile_table(r["profile"]), flush=True)
    print()
    print(table(results, fl))
    tg = targets(results, fl)
    print()
    for k, v in tg.items():
        print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python -m bench.yfilter " + " ".join(argv if argv is not None
                                                        else sys.argv[1:]),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "lxml": etree.LXML_VERSION, "libxml2": etree.LIBXML_VERSION},
        "messages": n_docs, "warmup": n_warm, "passes": passes, "doc_depth": DOC_DEPTH,
        "max_repeats": MAX_REPEATS, "corpus": str(args.corpus) if corpus_run else None,
        "floors": fl, "results": results,
        "targets": tg}, indent=1))
    plot(results, fl, args.plot)
    print(f"\nwrote {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
