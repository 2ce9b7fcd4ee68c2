"""Content-based routing at scale: the simulator's grid against flooding and the truth.

``python -m bench.routing`` runs :mod:`routing.simulate` over {uniform, geo} interests
x {exact, generalized} routing tables, with profile churn (adds, updates and deletes
interleaved with the messages), on a random geometric overlay, plus one run of
transformation profiles with early projection. Each run is checked against the
centralized engine (ground truth) and measured against flooding in the same run.
Prints a table, writes ``bench/results/routing.json`` and ``routing.png``; each run
is merged into the JSON as soon as it ends (``--runs`` picks some of the grid, so
big runs can be made one at a time and land in the same file).

Defaults: 100 brokers, 100,000 profiles, 200 messages, churn 0.1 (10,000 changes);
the projection run has 100 brokers, 2,000 transformation profiles. ``--quick``: 20
brokers, 3,000 profiles, 50 messages (a few minutes). ``--jobs`` runs that many
simulations at once (a 100k-profile run holds about 6 GB).

The committed ``routing.json`` came from two commands on a shared 2-core machine::

    python -m bench.routing --messages 100 --profiles 20000 --runs uniform/exact geo/exact
    python -m bench.routing --messages 100 --generalized-profiles 3000 \
        --runs uniform/generalized geo/generalized transform/exact

Generalized tables re-plan (:mod:`routing.planner`) on every table over budget when
the sample grows and after many changes; that cost grows with the exact table, so
generalized runs are kept at thousands of profiles here (3,000: about 20 minutes).
The 100k-profile exact runs are ``routing_simulate_100k_*.json`` (``routing.simulate``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from routing.simulate import Config, Simulation

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = ("false_negatives", "expected_deliveries", "deliveries", "delivery_mismatches", "profiles_with_matches",
        "profiles_delivered_exactly", "link_messages", "flooding_link_messages", "ideal_link_messages",
        "false_positive_link_messages", "link_bytes", "flooding_link_bytes", "ideal_link_bytes",
        "transformed_link_bytes", "transformed_link_messages", "result_mismatches",
        "delta_messages", "delta_bytes", "table_mismatches", "tables", "profiles", "overlay", "timings")


def grid(base: Config, transform: Config, generalized_profiles: int) -> list[tuple[str, Config]]:
    runs = [(f"{interests}/{'generalized' if gen else 'exact'}",
             replace(base, interests=interests, generalize=gen,
                     profiles=generalized_profiles if gen else base.profiles))
            for interests in ("uniform", "geo") for gen in (False, True)]
    return runs + [("transform/exact", transform)]


def _run(item: tuple[str, Config]) -> tuple[str, dict]:
    name, cfg = item
    t0 = time.perf_counter()
    def progress(phase: str, done: int, total: int, info: dict) -> None:
        if done == total or done % max(1, total // 5) == 0:
            print(f"  {name}: {phase} {done}/{total} at {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    r = Simulation(cfg, progress=progress).run()
    out = {k: r[k] for k in KEYS}
    out["config"] = r["config"]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"  {name}: {out['seconds']} s, false negatives {r['false_negatives']}", file=sys.stderr, flush=True)
    return name, out


def table(results: dict[str, dict]) -> str:
    head = (f"{'run':22} {'profiles':>8} {'FN':>3} {'mism':>4} {'deliveries':>10} {'link msgs':>9} {'flood':>7} {'ratio':>6} "
            f"{'FP msgs':>7} {'link MB':>8} {'flood MB':>8} {'ratio':>6} {'proj MB':>8} {'atoms/table':>11} "
            f"{'exact atoms':>11} {'s':>6}")
    lines = [head]
    for name, r in results.items():
        t = r["tables"]
        exact = t.get("exact_atoms", t.get("atoms"))
        lines.append(
            f"{name:22} {r['config']['profiles']:>8} {r['false_negatives']:>3} {r['delivery_mismatches'] + r['result_mismatches']:>4} "
            f"{r['deliveries']:>10} {r['link_messages']:>9} {r['flooding_link_messages']:>7} "
            f"{r['link_messages'] / r['flooding_link_messages']:>6.3f} {r['false_positive_link_messages']:>7} "
            f"{r['link_bytes'] / 1e6:>8.2f} {r['flooding_link_bytes'] / 1e6:>8.2f} "
            f"{r['link_bytes'] / r['flooding_link_bytes']:>6.3f} {r['transformed_link_bytes'] / 1e6:>8.2f} "
            f"{t['atoms']['mean']:>11} {exact['mean']:>11} {r['seconds']:>6}")
    return "\n".join(lines)


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    x = range(len(names))
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    w = 0.27
    ax = axes[0]
    for i, (key, label, color) in enumerate((("flooding_link_messages", "flooding", "grey"),
                                             ("link_messages", "routed", "tab:blue"),
                                             ("ideal_link_messages", "perfect routing", "tab:green"))):
        ax.bar([j + (i - 1) * w for j in x], [results[n][key] for n in names], w, label=label, color=color)
    ax.set(title="messages on links", xticks=list(x))
    ax.set_xticklabels(names, rotation=20)
    ax.legend()
    ax = axes[1]
    for i, (key, label, color) in enumerate((("flooding_link_bytes", "flooding", "grey"),
                                             ("link_bytes", "routed", "tab:blue"),
                                             ("transformed_link_bytes", "of which transformed", "tab:orange"))):
        ax.bar([j + (i - 1) * w for j in x], [results[n][key] / 1e6 for n in names], w, label=label, color=color)
    ax.set(title="bytes on links (MB)", xticks=list(x))
    ax.set_xticklabels(names, rotation=20)
    ax.legend()
    ax = axes[2]
    mean = [results[n]["tables"]["atoms"]["mean"] for n in names]
    exact = [results[n]["tables"].get("exact_atoms", results[n]["tables"]["atoms"])["mean"] for n in names]
    ax.bar([j - w / 2 for j in x], exact, w, label="exact table", color="grey")
    ax.bar([j + w / 2 for j in x], mean, w, label="routing view (generalized where asked)", color="tab:blue")
    ax.set(title="routing table atoms (mean per table)", yscale="log", xticks=list(x))
    ax.set_xticklabels(names, rotation=20)
    ax.legend()
    fns = sum(r["false_negatives"] for r in results.values())
    c = next(iter(results.values()))["config"]
    profiles = "/".join(sorted({str(r["config"]["profiles"]) for r in results.values()}, key=int))
    fig.suptitle(f"{c['brokers']} brokers, {profiles} profiles, {c['messages']} messages, churn {c['churn']} "
                 f"- false negatives in all runs: {fns}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _merge(out: Path, name: str, result: dict) -> dict[str, dict]:
    """Put one run into the JSON file (keeping the other runs there); all runs, in grid order."""
    runs = json.loads(out.read_text())["runs"] if out.exists() else {}
    runs[name] = result
    order = [n for n, _ in grid(Config(), Config(), 0)]
    runs = {n: runs[n] for n in sorted(runs, key=lambda n: order.index(n) if n in order else len(order))}
    out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small grid (20 brokers, 3,000 profiles, 50 messages)")
    p.add_argument("--brokers", type=int, help="brokers (default 100; 20 with --quick)")
    p.add_argument("--profiles", type=int, help="profiles (default 100000; 3000 with --quick)")
    p.add_argument("--messages", type=int, help="messages (default 200; 50 with --quick)")
    p.add_argument("--churn", type=float, default=0.1, help="churn fraction (default 0.1)")
    p.add_argument("--transform-profiles", type=int,
                   help="profiles of the early-projection run (default 2000; 300 with --quick)")
    p.add_argument("--generalized-profiles", type=int,
                   help="profiles of the generalized runs (default: --profiles; generalized tables re-plan "
                        "as profiles arrive, several times slower to load)")
    p.add_argument("--runs", nargs="+", metavar="NAME",
                   help="only these runs of the grid (e.g. uniform/exact geo/exact); others in the JSON stay")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="simulations run at once (default 2)")
    p.add_argument("--out", default=str(RESULTS / "routing.json"), help="JSON path (the plot goes next to it)")
    args = p.parse_args(argv)
    quick = args.quick
    brokers = args.brokers or (20 if quick else 100)
    base = Config(brokers=brokers, profiles=args.profiles or (3000 if quick else 100_000),
                  messages=args.messages or (50 if quick else 200), churn=args.churn, seed=args.seed)
    transform = replace(base, profiles=args.transform_profiles or (300 if quick else 2000), transform=1.0)
    runs = grid(base, transform, args.generalized_profiles or base.profiles)
    if args.runs:
        unknown = set(args.runs) - {name for name, _ in runs}
        if unknown:
            p.error(f"unknown run(s) {', '.join(sorted(unknown))}; choose from {', '.join(n for n, _ in runs)}")
        runs = [(name, cfg) for name, cfg in runs if name in args.runs]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{len(runs)} simulations, {args.jobs} at a time", file=sys.stderr)
    results = {}
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for name, r in pool.map(_run, runs):
            results = _merge(out, name, r)
    print(table(results))
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    bad = sum(r["false_negatives"] + r["delivery_mismatches"] + r["result_mismatches"]
              + r["table_mismatches"] for r in results.values())
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
