"""ONYX Figure 9: partitions a message matches, PEP vs random partitioning.

    python -m bench.pep --profiles 1000000 --partitions 200 --patterns 10 --json bench/results/pep.json
    python -m bench.pep --quick          # 40,000 profiles, 20 partitions, a few seconds

The workload (ONYX section 4.4): N profiles, each comparing 2 of M exclusiveness
patterns, drawn uniformly, to a value; K partitions. A pattern ``j`` is the
attribute ``v`` of element ``ej`` under the root ``m``; a profile reads
``/m[e3/@v = 17][e7/@v = 4]`` and values are drawn uniformly from ``--values`` (D)
numbers. The source's DTD declares every ``ej`` optional and single
(``<!ELEMENT m (e0?, e1?, ...)>``), so PEP takes all patterns as at most once.

Messages and "repeated elements": a message holds every pattern element once, with
a uniform value. A message with ``r`` repeated elements has ``r`` more pattern
elements: each repeats a uniformly chosen pattern with a value that message does not
have yet for it (``<e3 v="17"/><e3 v="5"/>``). A repetition is exactly what breaks
exclusiveness: the message now matches profiles on both values, whose buckets can
be in different partitions. PEP's matched partitions are therefore bounded by
(patterns chosen + r) / K, printed as ``bound``; at r = 0 that is about M/K.

"A message matches a partition" when at least one profile in it matches the
message: the partitions perfect content-based routing must send it to. Matching
is computed with array operations over all N profiles; in the same run a sample of
the profiles (as texts) is matched by ``yfilter.Engine`` on the messages as XML,
and the two must agree (``oracle_disagreements`` is 0).

Why D = 40 by default: random partitioning matches nearly every partition only
when each partition holds several matching profiles (N / (K * D^2) = 3 at D = 40),
and PEP can only balance when the chosen patterns have together well over K values.
Both hold here; with far larger D few profiles match at all and both curves drop.

"Placing" is PEP from the profiles' equalities (pattern discovery, buckets,
assignment) plus placing the partitions on ``--brokers`` brokers and every profile
on its host. Reading equalities from texts is timed separately on a sample (the
registration service parses every profile once anyway to validate it).

Writes the JSON (``repetitions``, ``pep_percent``, ``random_percent`` and the
details) and a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from partitioning.occurrence import SchemaOccurrence
from partitioning.pep import PepPartitioner, random_partitioning
from partitioning.placement import BrokerSite, assign_hosts, place_partitions
from partitioning.predicates import Equality, Pattern, equalities
from yfilter import Engine

RESULTS = Path(__file__).resolve().parent / "results"
PLACE_LIMIT_S = 60.0


def dtd(m: int) -> str:
    """The source's schema: every pattern element optional and single."""
    kids = ", ".join(f"e{j}?" for j in range(m))
    decls = "".join(f"<!ELEMENT e{j} EMPTY><!ATTLIST e{j} v CDATA #REQUIRED>" for j in range(m))
    return f"<!ELEMENT m ({kids})>{decls}"


def profile_text(pats: np.ndarray, vals: np.ndarray) -> str:
    return "/m" + "".join(f"[e{p}/@v = {v}]" for p, v in zip(pats, vals))


def message_xml(present: np.ndarray) -> bytes:
    body = "".join(f'<e{p} v="{v}"/>' for p, v in zip(*np.nonzero(present)))
    return f"<m>{body}</m>".encode()


def make_profiles(n: int, m: int, d: int, per: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pattern and value arrays, shape (n, per): distinct patterns per profile."""
    pats = np.argsort(rng.random((n, m)), axis=1)[:, :per].astype(np.int16)
    vals = rng.integers(0, d, size=(n, per), dtype=np.int32)
    return pats, vals


def make_message(m: int, d: int, r: int, rng: random.Random) -> np.ndarray:
    """present[p, v]: the message has element ``e<p>`` with ``v = <v>``."""
    present = np.zeros((m, d), dtype=bool)
    for p in range(m):
        present[p, rng.randrange(d)] = True
    for _ in range(r):
        open_patterns = [p for p in range(m) if not present[p].all()]
        if not open_patterns:
            break
        p = rng.choice(open_patterns)
        present[p, rng.choice(np.flatnonzero(~present[p]).tolist())] = True
    return present


def matched_partitions(present: np.ndarray, pats: np.ndarray, vals: np.ndarray, parts: np.ndarray,
                       k: int) -> tuple[int, np.ndarray]:
    hit = present[pats, vals].all(axis=1)
    return int(np.count_nonzero(np.bincount(parts[hit], minlength=k))), hit


def run(args: argparse.Namespace) -> dict:
    n, k, m, d, per = args.profiles, args.partitions, args.patterns, args.values, args.per_profile
    if per > m:
        raise SystemExit(f"error: --per-profile {per} is more than --patterns {m}")
    nrng, rng = np.random.default_rng(args.seed), random.Random(args.seed)
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    pats, vals = make_profiles(n, m, d, per, nrng)
    patterns = [Pattern(f"/m/e{j}", "@v") for j in range(m)]
    eq = [[Equality(p, float(v)) for v in range(d)] for p in patterns]
    ids = [f"p{i}" for i in range(n)]
    population = {pid: tuple(eq[p][v] for p, v in zip(ps, vs))
                  for pid, ps, vs in zip(ids, pats.tolist(), vals.tolist())}
    timings["generate_s"] = time.perf_counter() - t0

    sample = range(0, n, max(1, n // args.sample))
    texts = {ids[i]: profile_text(pats[i], vals[i]) for i in sample}
    t0 = time.perf_counter()
    parsed = {pid: equalities(text) for pid, text in texts.items()}
    extract_us = (time.perf_counter() - t0) / len(texts) * 1e6
    extraction_mismatches = sum(1 for pid, eqs in parsed.items() if eqs != population[pid])

    occurrence = SchemaOccurrence.from_dtd(dtd(m))
    sites = [BrokerSite(f"b{i + 1}") for i in range(args.brokers)]
    t0 = time.perf_counter()
    pep = PepPartitioner.fit(population, k, occurrence=occurrence, tolerance=args.tolerance)
    t1 = time.perf_counter()
    part = pep.partitioning()
    brokers_of = place_partitions(part.loads, sites, tolerance=args.tolerance)
    hosts = assign_hosts(part, brokers_of, sites)
    t2 = time.perf_counter()
    timings["pep_partition_s"] = t1 - t0
    timings["place_on_brokers_s"] = t2 - t1
    timings["place_total_s"] = t2 - t0
    t0 = time.perf_counter()
    rand = random_partitioning(ids, k, seed=args.seed)
    timings["random_partition_s"] = time.perf_counter() - t0
    broker_load = {b: 0 for b in brokers_of}
    for b in hosts.values():
        broker_load[b] += 1

    pep_parts = np.fromiter((part.assignment[pid] for pid in ids), dtype=np.int32, count=n)
    rand_parts = np.fromiter((rand.assignment[pid] for pid in ids), dtype=np.int32, count=n)
    chosen = len(part.patterns)
    reps = list(range(0, args.max_repetitions + 1, args.step))
    pep_pct, rand_pct, bound_pct, matching = [], [], [], []
    oracle = Engine()
    for pid, text in texts.items():
        oracle.add(pid, text)
    sample_idx = np.fromiter((int(pid[1:]) for pid in texts), dtype=np.int64)
    disagreements = oracle_messages = 0
    t0 = time.perf_counter()
    for r in reps:
        pp, rp, hits = [], [], []
        for i in range(args.messages):
            present = make_message(m, d, r, rng)
            n_pep, hit = matched_partitions(present, pats, vals, pep_parts, k)
            n_rand, _ = matched_partitions(present, pats, vals, rand_parts, k)
            pp.append(100 * n_pep / k)
            rp.append(100 * n_rand / k)
            hits.append(int(hit.sum()))
            if i < args.oracle_messages:
                want = {f"p{j}" for j in sample_idx[hit[sample_idx]]}
                disagreements += len(oracle.match(message_xml(present)) ^ want)
                oracle_messages += 1
        pep_pct.append(round(statistics.fmean(pp), 3))
        rand_pct.append(round(statistics.fmean(rp), 3))
        bound_pct.append(round(min(100.0, 100 * (chosen + r) / k), 3))
        matching.append(round(statistics.fmean(hits), 1))
    timings["measure_s"] = time.perf_counter() - t0

    return {
        "figure": "ONYX (VLDB 2004) Figure 9: percentage of partitions a message matches",
        "repetitions": reps,
        "pep_percent": pep_pct,
        "random_percent": rand_pct,
        "pep_bound_percent": bound_pct,
        "matching_profiles_per_message": matching,
        "config": {"profiles": n, "partitions": k, "patterns": m, "values": d, "patterns_per_profile": per,
                   "messages_per_point": args.messages, "tolerance": args.tolerance, "brokers": args.brokers,
                   "seed": args.seed},
        "pep": {**part.summary(), "discovery": pep.discovery.summary()},
        "random": {"max_load": max(rand.loads), "min_load": min(rand.loads)},
        "brokers": {"profiles_max": max(broker_load.values()), "profiles_min": min(broker_load.values())},
        "extraction": {"sample": len(texts), "us_per_profile": round(extract_us, 1),
                       "mismatches": extraction_mismatches},
        "oracle": {"engine": "yfilter.Engine", "profiles": len(texts), "messages": oracle_messages,
                   "disagreements": disagreements},
        "timings": {key: round(v, 3) for key, v in timings.items()},
        "place_limit_s": PLACE_LIMIT_S,
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
    }


def table(res: dict) -> str:
    c = res["config"]
    lines = [f"Figure 9: {c['profiles']:,} profiles, {c['partitions']} partitions, {c['patterns']} patterns "
             f"({c['patterns_per_profile']} per profile, {c['values']} values each), "
             f"{c['messages_per_point']} messages per point",
             f"{'repeated':>8} {'PEP %':>8} {'random %':>9} {'bound %':>8} {'matching profiles':>18}"]
    for row in zip(res["repetitions"], res["pep_percent"], res["random_percent"], res["pep_bound_percent"],
                   res["matching_profiles_per_message"]):
        lines.append(f"{row[0]:>8} {row[1]:>8.2f} {row[2]:>9.2f} {row[3]:>8.2f} {row[4]:>18,.1f}")
    p, t = res["pep"], res["timings"]
    lines += [
        f"PEP: {len(p['patterns'])} patterns chosen of {p['discovery']['candidates']} candidates; don't care "
        f"{p['dont_care']}; loads {p['min_load']}..{p['max_load']} (cap {p['cap']}, tolerance "
        f"{p['tolerance']:.0%}, imbalance {p['imbalance']}); spilled {p['spilled']}",
        f"random: loads {res['random']['min_load']}..{res['random']['max_load']}; "
        f"brokers ({c['brokers']}): {res['brokers']['profiles_min']}..{res['brokers']['profiles_max']} profiles",
        f"placing {c['profiles']:,} profiles: {t['place_total_s']:.1f} s (PEP {t['pep_partition_s']:.1f} s + "
        f"brokers {t['place_on_brokers_s']:.1f} s; limit {res['place_limit_s']:.0f} s); random partitioning "
        f"{t['random_partition_s']:.1f} s",
        f"reading equalities from profile text: {res['extraction']['us_per_profile']} us/profile "
        f"({res['extraction']['sample']} texts, {res['extraction']['mismatches']} mismatches)",
        f"oracle: yfilter.Engine on {res['oracle']['profiles']} profiles x {res['oracle']['messages']} messages: "
        f"{res['oracle']['disagreements']} disagreements",
    ]
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = res["config"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(res["repetitions"], res["random_percent"], "s-", label="random partitioning", color="tab:red")
    ax.plot(res["repetitions"], res["pep_percent"], "o-", label="PEP", color="tab:blue")
    ax.plot(res["repetitions"], res["pep_bound_percent"], "--", color="tab:blue", alpha=0.5,
            label="PEP bound (patterns + r) / K")
    ax.set_xlabel("repeated elements in the message")
    ax.set_ylabel("partitions matched (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{c['profiles']:,} profiles, {c['partitions']} partitions, {c['patterns']} patterns")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.pep", description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--profiles", type=int, help="profiles (default 1000000, quick 40000)")
    a("--partitions", type=int, help="partitions K (default 200, quick 20)")
    a("--patterns", type=int, default=10, help="exclusiveness patterns M (default 10)")
    a("--per-profile", type=int, default=2, help="patterns per profile (default 2)")
    a("--values", type=int, default=40, help="values per pattern D (default 40)")
    a("--max-repetitions", type=int, default=40, help="largest number of repeated elements (default 40)")
    a("--step", type=int, help="repetitions step (default 2, quick 10)")
    a("--messages", type=int, help="messages per point (default 40, quick 10)")
    a("--oracle-messages", type=int, default=3, help="messages per point also matched by yfilter (default 3)")
    a("--sample", type=int, help="profiles read from text and matched by yfilter (default 2000, quick 500)")
    a("--brokers", type=int, default=20, help="brokers the partitions are placed on (default 20)")
    a("--tolerance", type=float, default=0.1, help="balance tolerance (default 0.1)")
    a("--seed", type=int, default=0)
    a("--quick", action="store_true", help="small run for a smoke test")
    a("--json", type=Path, help="where to write the JSON (default bench/results/pep.json)")
    a("--plot", type=Path, help="where to write the PNG (default: the JSON path with .png)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    q = args.quick
    args.profiles = args.profiles or (40_000 if q else 1_000_000)
    args.partitions = args.partitions or (20 if q else 200)
    args.step = args.step or (10 if q else 2)
    args.messages = args.messages or (10 if q else 40)
    args.sample = args.sample or (500 if q else 2000)
    for name in ("profiles", "partitions", "patterns", "per_profile", "values", "messages", "brokers", "step"):
        if getattr(args, name) < 1:
            parser().error(f"--{name.replace('_', '-')} must be at least 1")
    res = run(args)
    json_path = args.json or RESULTS / "pep.json"
    plot_path = args.plot or json_path.with_suffix(".png")
    print(table(res))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res, plot_path)
    print(f"wrote {json_path} and {plot_path}")
    return 0 if res["oracle"]["disagreements"] == 0 and res["extraction"]["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
