"""Benchmark of the holistic plan: how soon the routing decision comes, and what
pruning saves.

    python -m bench.plan            # 1k, 10k and 100k local profiles (about 10 minutes)
    python -m bench.plan --quick    # 1k and 10k, fewer messages (about a minute)

A broker with 8 output links, each with the routing query of 60 generated NITF
profiles below it (``routing.dnf.map_profile``, so a disjunction of up to a few
hundred conjunctions of linear paths) and 2 transformation profiles, hosts N local
profiles (the *pred* workload of ``bench.yfilter``, one in fifty a transformation
profile). Per message (generated NITF documents the plan has not seen, after a
warm-up pass over others): the time to the ``Routed`` event (the routing decision is
complete) and to the end of :meth:`Plan.process` (every transformation and local
result out), median and p99. In the same run, per message: the peer, one engine
holding every target as a profile (the routing paths, the transformations, the local
profiles) and matching them in one pass, whose routing decision is available only at
the end; and the floor, the routing paths alone on their own engine
(``routing.matcher.LinkMatcher``, how routing works without a plan). Operator
executions are counted with and without pruning (``Plan.process(prune=False)``: every
conjunction in full, every transformation whether or not its link was reached) on the
same messages; the share skipped is reported for the route and transform classes and
for the whole message. Prints a table, writes ``bench/results/plan.json`` and a PNG.

Python's cyclic garbage collector is paused during each timed call (and the heap is
frozen after registration and after the warm-up, ``gc.freeze()``): a full collection
over the millions of objects of 100k profiles and their warm caches takes 1-3 s here,
lands on whichever message (of the plan or of the peer) happens to trigger it, and
would be all the p99 shows. A broker tunes its collector the same way (freeze after
loading profiles, thresholds); collections run between the timed calls.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time
from pathlib import Path

from routing.dnf import map_profile
from routing.matcher import LinkMatcher
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator
from yfilter.plan import Plan, Routed

RESULTS = Path(__file__).resolve().parent / "results"
LINKS, PROFILES_PER_LINK, TRANSFORMS_PER_LINK = 8, 60, 2
PRED = dict(depth=6, p_star=0.2, p_desc=0.2, n_preds=(1, 2), n_nested=1, nested_values=1.0)


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _targets(n_users: int, seed: int):
    schema = Schema.nitf()
    below = ProfileGenerator(schema, seed=seed, **PRED).batch(LINKS * PROFILES_PER_LINK)
    routes = {}
    for i in range(LINKS):
        dnf = set()
        for text in below[i * PROFILES_PER_LINK:(i + 1) * PROFILES_PER_LINK]:
            dnf |= map_profile(text)
        routes[f"b{i}"] = sorted(sorted(c) for c in dnf)
    flwr = FlwrGenerator(schema, seed=seed + 1)
    transforms = {(f"b{i}", f"t{i}.{k}"): flwr.spec().text()
                  for i in range(LINKS) for k in range(TRANSFORMS_PER_LINK)}
    users = ProfileGenerator(schema, seed=seed + 2, **PRED).batch(n_users)
    for k in range(0, n_users, 50):
        users[k] = flwr.spec().text()
    return routes, transforms, users


def measure(n_users: int, messages: int, warmup: int, seed: int = 1) -> dict:
    routes, transforms, users = _targets(n_users, seed)
    t0 = time.perf_counter()
    plan = Plan()
    for link, dnf in routes.items():
        plan.add_route(link, dnf)
    for (link, pid), text in transforms.items():
        plan.add_transform(link, pid, text)
    for i, text in enumerate(users):
        plan.add_user(f"u{i}", text)
    build_s = time.perf_counter() - t0
    flat = Engine()
    floor = LinkMatcher()
    for link, dnf in routes.items():
        for conj in dnf:
            floor.add(link, frozenset(conj))
            for atom in conj:
                flat.add(f"route:{atom}", atom)
    for (_, pid), text in transforms.items():
        flat.add(pid, text)
    for i, text in enumerate(users):
        flat.add(f"u{i}", text)
    gc.collect()
    gc.freeze()

    docs = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=seed + 100)
    for _ in range(warmup):
        xml = docs.generate()
        list(plan.process(xml))
        flat.run(xml)
        floor.route(xml)
    gc.collect()
    gc.freeze()
    rows = []
    for _ in range(messages):
        xml = docs.generate()
        gc.disable()
        start = time.perf_counter()
        routed_at = None
        for event in plan.process(xml):
            if isinstance(event, Routed):
                routed_at = time.perf_counter() - start
        done = time.perf_counter() - start
        gc.enable()
        c = plan.counters
        flat_s = _timed(flat.run, xml)
        floor_s = _timed(floor.route, xml)
        list(plan.process(xml, prune=False))
        full = plan.counters
        rows.append({"routed_s": routed_at, "done_s": done, "flat_s": flat_s,
                     "floor_s": floor_s, "links": c.routes_reached,
                     "pruned": c.as_dict(), "unpruned": full.as_dict()})
    return _summary(n_users, rows, build_s, plan.stats())


def _timed(fn, arg) -> float:
    gc.disable()
    start = time.perf_counter()
    fn(arg)
    elapsed = time.perf_counter() - start
    gc.enable()
    return elapsed


def _summary(n_users: int, rows: list[dict], build_s: float, stats: dict) -> dict:
    def col(key):
        return [r[key] for r in rows]

    def skipped(cls: str) -> float:
        pruned = sum(r["pruned"][cls] for r in rows)
        full = sum(r["unpruned"][cls] for r in rows)
        return 1 - pruned / full if full else 0.0

    out = {"local_profiles": n_users, "messages": len(rows), "build_s": build_s,
           "links_reached_mean": statistics.mean(col("links")),
           "plan_stats": {k: stats[k] for k in ("links", "conjunctions", "route_paths",
                                                  "transforms", "profiles", "guards")}}
    for key in ("routed_s", "done_s", "flat_s", "floor_s"):
        out[key] = {"median": statistics.median(col(key)), "p99": _p(col(key), 0.99)}
    out["ops_per_message"] = {
        "pruned": {k: statistics.mean(r["pruned"][k] for r in rows)
                   for k in ("route_ops", "transform_ops", "user_ops", "ops")},
        "unpruned": {k: statistics.mean(r["unpruned"][k] for r in rows)
                     for k in ("route_ops", "transform_ops", "user_ops", "ops")}}
    out["skipped_share"] = {"route": skipped("route_ops"), "transform": skipped("transform_ops"),
                            "route+transform": 1 - (
                                sum(r["pruned"]["route_ops"] + r["pruned"]["transform_ops"]
                                    for r in rows)
                                / max(1, sum(r["unpruned"]["route_ops"]
                                             + r["unpruned"]["transform_ops"] for r in rows))),
                            "all": skipped("ops")}
    return out


def _table(results: list[dict]) -> str:
    ms = 1000.0
    lines = [f"{'local':>8} | {'routing decision ms':>21} | {'whole message ms':>19} | "
             f"{'one-pass engine ms':>19} | {'routing alone':>13} | {'ops skipped':>24}",
             f"{'profiles':>8} | {'median':>10} {'p99':>10} | {'median':>9} {'p99':>9} | "
             f"{'median':>9} {'p99':>9} | {'median ms':>13} | {'route+transf.':>13} {'all':>10}"]
    for r in results:
        lines.append(
            f"{r['local_profiles']:>8} | {r['routed_s']['median'] * ms:>10.2f} "
            f"{r['routed_s']['p99'] * ms:>10.2f} | {r['done_s']['median'] * ms:>9.2f} "
            f"{r['done_s']['p99'] * ms:>9.2f} | {r['flat_s']['median'] * ms:>9.2f} "
            f"{r['flat_s']['p99'] * ms:>9.2f} | {r['floor_s']['median'] * ms:>13.2f} | "
            f"{r['skipped_share']['route+transform']:>13.1%} {r['skipped_share']['all']:>10.1%}")
    return "\n".join(lines)


def _plot(results: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["local_profiles"] for r in results]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, style in (("routed_s", "routing decision (plan)", "o-"),
                              ("done_s", "whole message (plan)", "s-"),
                              ("flat_s", "one-pass engine, all targets", "^--"),
                              ("floor_s", "routing paths alone", "x:")):
        med = [r[key]["median"] * 1000 for r in results]
        p99 = [r[key]["p99"] * 1000 for r in results]
        ax.plot(xs, med, style, label=f"{label}, median")
        ax.fill_between(xs, med, p99, alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("local profiles")
    ax.set_ylabel("ms per message (band: median to p99)")
    ax.set_title("When the routing decision is out")
    ax.legend(fontsize=8)
    width = 0.25
    for k, (key, label) in enumerate((("route", "route class"), ("transform", "transform class"),
                                      ("all", "whole message"))):
        bx.bar([i + (k - 1) * width for i in range(len(xs))],
               [r["skipped_share"][key] * 100 for r in results], width, label=label)
    bx.set_xticks(range(len(xs)), [f"{x:,}" for x in xs])
    bx.set_xlabel("local profiles")
    bx.set_ylabel("% of operator executions skipped")
    bx.set_title("Target pruning")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k profiles, 30 messages")
    ap.add_argument("--sizes", type=int, nargs="*", help="local profile counts")
    ap.add_argument("--messages", type=int, help="timed messages per size")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([1000, 10_000] if args.quick else [1000, 10_000, 100_000])
    messages = args.messages or (30 if args.quick else 200)
    warmup = 20 if args.quick else 100
    results = []
    for n in sizes:
        print(f"measuring {n:,} local profiles ...", flush=True)
        results.append(measure(n, messages, warmup))
        gc.unfreeze()
        gc.collect()
    print(_table(results))
    RESULTS.mkdir(exist_ok=True)
    out = {"command": "python -m bench.plan" + (" --quick" if args.quick else ""),
           "machine": {"python": platform.python_version(), "platform": platform.platform()},
           "links": LINKS, "profiles_per_link": PROFILES_PER_LINK,
           "transforms_per_link": TRANSFORMS_PER_LINK, "warmup": warmup, "results": results}
    (RESULTS / "plan.json").write_text(json.dumps(out, indent=1))
    _plot(results, RESULTS / "plan.png")
    print(f"wrote {RESULTS / 'plan.json'} and {RESULTS / 'plan.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
