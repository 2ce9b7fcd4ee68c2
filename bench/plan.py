"""Benchmark of a broker's plan (ONYX 4.3.1): when the routing decision is out, and when
the whole message is done, in the priority-ordered plan brokers run, against one
shared network of every target.

    python -m bench.plan            # 1k, 10k and 100k local profiles (about 5 minutes)
    python -m bench.plan --quick    # 1k and 10k, fewer messages (about a minute)

A broker with 8 output links, each with 60 generated NITF filter profiles and 2
transformation profiles below it (their routing queries make the link's entry in the
broker's routing table, a disjunction of a few hundred conjunctions of linear paths),
hosts N local profiles (the *pred* workload of ``bench.yfilter``, one in fifty a
transformation profile). Per message (generated NITF documents the broker has not seen,
after a warm-up pass over others), median and p99, in the same run:

* **priority-ordered plan** (what a broker runs, :meth:`routing.node.Node.process`): the
  message decoded, :meth:`~routing.node.Node.forwards` (the routing table, and each
  routed link's projection where the profiles below allow one; none does here: the
  filters below each link read the whole message) — the *routing decision* — then
  :meth:`~routing.node.Node.deliver` (the engine of the local profiles) — the *whole
  message*;
* **one shared network**: one :class:`yfilter.Engine` holding every target as a
  profile (every routing path, the links' transformation profiles, the local
  profiles), matched in one pass: its routing decision is out only when everything is.

The design the issue compared it with, ``yfilter/plan.py`` (routing, transformation
and local profiles as one operator network scheduled by dependency-aware priority,
ONYX's own design), was measured on this workload and removed (issue 41: the routing
decision took 4.6x (committed run) to 6x (re-run) as long as the routing table's); its
numbers are kept in the results file as ``removed_shared_plan``, which this benchmark
carries over from the file it replaces and draws beside its own.

Python's cyclic garbage collector is paused during each timed call (and the heap is
frozen after registration and after the warm-up, ``gc.freeze()``): a full collection
over the millions of objects of 100k profiles takes 1-3 s here and would be all the p99
shows. A broker does the same (``broker.dataplane.executor.Copies.settle``).

Prints a table, writes ``bench/results/plan.json`` (``--out``) and a PNG beside it.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time
from pathlib import Path

import formats
from bench.output import save
from routing.dnf import map_profile
from routing.node import Node
from routing.overlay import Overlay
from routing.incremental import need
from routing.table import Delta
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator

RESULTS = Path(__file__).resolve().parent / "results"
LINKS, PROFILES_PER_LINK, TRANSFORMS_PER_LINK = 8, 60, 2
PRED = dict(depth=6, p_star=0.2, p_desc=0.2, n_preds=(1, 2), n_nested=1, nested_values=1.0)
BROKER = "b"


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _targets(n_users: int, seed: int) -> tuple[dict[str, list[str]], list[str]]:
    """Profiles below each link (filters, then transformations) and the local profiles:
    the workload ``yfilter/plan.py`` was measured on, from the same seeds."""
    schema = Schema.nitf()
    below = ProfileGenerator(schema, seed=seed, **PRED).batch(LINKS * PROFILES_PER_LINK)
    flwr = FlwrGenerator(schema, seed=seed + 1)
    links = {f"b{i}": below[i * PROFILES_PER_LINK:(i + 1) * PROFILES_PER_LINK] for i in range(LINKS)}
    for i in range(LINKS):
        links[f"b{i}"] += [flwr.spec().text() for _ in range(TRANSFORMS_PER_LINK)]
    users = ProfileGenerator(schema, seed=seed + 2, **PRED).batch(n_users)
    for k in range(0, n_users, 50):
        users[k] = flwr.spec().text()
    return links, users


def star() -> Overlay:
    """Broker ``b``, the root of its source's tree, with the 8 links below it.

    >>> star().tree(BROKER).children[BROKER][:3]
    ['b0', 'b1', 'b2']
    """
    children = [f"b{i}" for i in range(LINKS)]
    return Overlay.from_dict({"brokers": [BROKER, *children], "links": [[BROKER, c] for c in children],
                              "sources": [{"id": "news", "root": BROKER}]})


def broker(links: dict[str, list[str]], users: list[str]) -> Node:
    """The broker as it runs: the links' routing queries collected into its table (as its
    children's deltas bring them), the local profiles hosted, everything built."""
    node = Node(BROKER, star())
    for link, texts in links.items():
        for k, text in enumerate(texts):
            node.collect(BROKER, link, Delta(f"{link}.{k}", 1, node.query(text), need(text)))
    for i, text in enumerate(users):
        node.host(f"u{i}", 1, text)
    node.warm()
    return node


def one_network(links: dict[str, list[str]], users: list[str]) -> Engine:
    """Every target as a profile of one engine: each routing path (an atom of a link's
    routing query), each transformation profile below a link, each local profile."""
    flat = Engine()
    for link, texts in links.items():
        for k, text in enumerate(texts):
            if text.startswith("for "):
                flat.add(f"{link}.{k}", text)
            for conj in map_profile(text):
                for atom in conj:
                    flat.add(f"route:{atom}", atom)
    for i, text in enumerate(users):
        flat.add(f"u{i}", text)
    return flat


def measure(n_users: int, messages: int, warmup: int, seed: int = 1) -> dict:
    """The two designs on ``messages`` new documents, after ``warmup`` others."""
    links, users = _targets(n_users, seed)
    t0 = time.perf_counter()
    node = broker(links, users)
    build_s = time.perf_counter() - t0
    flat = one_network(links, users)
    gc.collect()
    gc.freeze()

    docs = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=seed + 100)
    for _ in range(warmup):
        xml = docs.generate()
        _priority(node, xml)
        flat.run(xml)
    gc.collect()
    gc.freeze()
    rows = []
    for _ in range(messages):
        xml = docs.generate()
        routed_s, done_s, reached = _priority(node, xml)
        rows.append({"routed_s": routed_s, "done_s": done_s, "flat_s": _timed(flat.run, xml),
                     "links": reached})
    return _summary(n_users, rows, build_s, node)


def _priority(node: Node, xml: bytes) -> tuple[float, float, int]:
    """One message through the priority-ordered plan: seconds to the routing decision
    and to the end, and the links reached."""
    gc.disable()
    start = time.perf_counter()
    message = formats.decode("text", xml)  # what the broker's receive step does, once
    forwards = node.forwards(BROKER, message)
    routed = time.perf_counter() - start
    node.deliver(message, xml)
    done = time.perf_counter() - start
    gc.enable()
    return routed, done, len(forwards)


def _timed(fn, arg) -> float:
    gc.disable()
    start = time.perf_counter()
    fn(arg)
    elapsed = time.perf_counter() - start
    gc.enable()
    return elapsed


def _summary(n_users: int, rows: list[dict], build_s: float, node: Node) -> dict:
    out = {"local_profiles": n_users, "messages": len(rows), "build_s": build_s,
           "links_reached_mean": statistics.mean(r["links"] for r in rows),
           "table": node.tables[BROKER].stats(),
           "local_engine": {k: node.local.stats()[k] for k in ("profiles", "guards")}}
    for key in ("routed_s", "done_s", "flat_s"):
        values = [r[key] for r in rows]
        out[key] = {"median": statistics.median(values), "p99": _p(values, 0.99)}
    return out


def _removed(path: Path) -> dict | None:
    """The record of ``yfilter/plan.py``'s measurement in the results file replaced
    (the code is gone: it cannot be measured again)."""
    try:
        return json.loads(path.read_text()).get("removed_shared_plan")
    except (OSError, ValueError):
        return None


def _table(results: list[dict]) -> str:
    ms = 1000.0
    lines = [f"{'local':>8} | {'routing decision ms':>21} | {'whole message ms':>19} | "
             f"{'one shared network ms':>21}",
             f"{'profiles':>8} | {'median':>10} {'p99':>10} | {'median':>9} {'p99':>9} | "
             f"{'median':>10} {'p99':>10}"]
    for r in results:
        lines.append(
            f"{r['local_profiles']:>8} | {r['routed_s']['median'] * ms:>10.2f} "
            f"{r['routed_s']['p99'] * ms:>10.2f} | {r['done_s']['median'] * ms:>9.2f} "
            f"{r['done_s']['p99'] * ms:>9.2f} | {r['flat_s']['median'] * ms:>10.2f} "
            f"{r['flat_s']['p99'] * ms:>10.2f}")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    series = [(res["results"], "routed_s", "routing decision, priority-ordered plan", "o-", None),
              (res["results"], "done_s", "whole message, priority-ordered plan", "s-", None),
              (res["results"], "flat_s", "one shared network (routing known at the end)", "^--", None)]
    removed = res.get("removed_shared_plan")
    if removed:
        at = removed["measured_at"]
        series += [(removed["results"], "routed_s", f"routing decision, yfilter/plan.py (removed; {at})",
                    "o:", "grey"),
                   (removed["results"], "done_s", f"whole message, yfilter/plan.py (removed; {at})",
                    "s:", "grey")]
    for results, key, label, style, color in series:
        xs = [r["local_profiles"] for r in results]
        med = [r[key]["median"] * 1000 for r in results]
        ax.plot(xs, med, style, label=f"{label}, median", color=color)
        ax.fill_between(xs, med, [r[key]["p99"] * 1000 for r in results], alpha=0.12, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("local profiles")
    ax.set_ylabel("ms per message (band: median to p99)")
    ax.set_title("A broker's plan: when the routing decision is out")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k profiles, 30 messages")
    ap.add_argument("--sizes", type=int, nargs="*", help="local profile counts")
    ap.add_argument("--messages", type=int, help="timed messages per size")
    ap.add_argument("--out", type=Path, default=RESULTS / "plan.json")
    ap.add_argument("--plot", type=Path, help="default: --out with .png")
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
    out = {"command": "python -m bench.plan" + (" --quick" if args.quick else ""),
           "machine": {"python": platform.python_version(), "platform": platform.platform()},
           "links": LINKS, "profiles_per_link": PROFILES_PER_LINK,
           "transforms_per_link": TRANSFORMS_PER_LINK, "warmup": warmup, "results": results}
    removed = _removed(args.out)
    if removed is not None:
        out["removed_shared_plan"] = removed
    save(out, args.out, args.plot, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
