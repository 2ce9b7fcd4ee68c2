"""Figure 9 through the whole pipeline: brokers a message visits under PEP, random
and nearest-broker placement, in the routing simulator.

    python -m bench.pep_pipeline                 # 30 brokers, 5,000 profiles, 300 messages; a few minutes
    python -m bench.pep_pipeline --quick         # 12 brokers, 600 profiles, 60 messages

For each placement the simulator (:class:`routing.simulate.Simulation`) builds the
same seeded overlay and workload: NITF-like profiles from ``yfilter.generators``
(the simulator's subscribers), generated NITF messages, routing tables built from
the profiles by ``routing`` and kept current by deltas up the broadcast trees. Only
the host of each profile differs:

* ``nearest`` -- the subscriber's home broker (homes are uniform, so with
  ``uniform`` interests this is random; with ``geo`` interests neighbours share
  vocabulary and values);
* ``random`` -- a uniformly random broker;
* ``pep`` -- the ``pep`` strategy of :mod:`routing.placement`: PEP partitions (4 per broker)
  learned online from the profiles registered so far, the NITF schema telling which
  patterns occur at most once.

A message enters at its source's root and is forwarded down the tree along links
whose routing query it matches; on a tree every reached broker but the root got
exactly one copy, so the fraction of brokers a message visits is
``(messages + link messages) / (messages * brokers)``. Flooding visits every broker
(1.0); ``ideal`` is perfect routing for that placement (only brokers on the way to
a matching profile). Every run checks itself against a centralized engine: false
negatives and delivery mismatches must be 0.

``--preds`` sets the value predicates per profile (default 1..2, the simulator's
own default is 3..5): with the simulator's very selective profiles (about 5 matches
in 10,000 per message) almost no message needs to go anywhere under any placement,
and the comparison says nothing. Writes ``bench/results/pep_pipeline.json`` and a PNG.

Caveat: the simulator draws subscribers' homes from the same random stream that
shuffles deltas in flight, and how many deltas travel depends on the placement; so
with ``geo`` interests (profile text depends on the home) the three placements see
slightly different profiles (the ``deliveries`` column shows it). With ``uniform``
interests the profiles and messages are the same for all three.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from routing.simulate import Config, Simulation
from routing.workload import Interests
from yfilter.generators import Schema

RESULTS = Path(__file__).resolve().parent / "results"
PLACEMENTS = ("nearest", "random", "pep")
"""The placements compared (strategies of :mod:`routing.placement`)."""


def measure(config: Config, preds: tuple[int, int]) -> dict:
    sim = Simulation(config)
    sim.interests = Interests.build(config.interests, sim.overlay, Schema.nitf(), config.seed,
                                    n_preds=preds, n_nested=1)
    t0 = time.perf_counter()
    rep = sim.run()
    elapsed = time.perf_counter() - t0
    n, b = rep["messages"], rep["overlay"]["brokers"]
    load = Counter(p.host for p in sim.profiles.values())
    mean = len(sim.profiles) / b
    return {
        "visited_fraction": round((n + rep["link_messages"]) / (n * b), 4),
        "ideal_fraction": round((n + rep["ideal_link_messages"]) / (n * b), 4),
        "link_messages": rep["link_messages"],
        "ideal_link_messages": rep["ideal_link_messages"],
        "false_positive_link_messages": rep["false_positive_link_messages"],
        "expected_deliveries": rep["expected_deliveries"],
        "false_negatives": rep["false_negatives"],
        "delivery_mismatches": rep["delivery_mismatches"],
        "table_mismatches": rep["table_mismatches"],
        "host_load_max_over_mean": round(max(load.values()) / mean, 3) if mean else None,
        "brokers_hosting": len(load),
        "seconds": round(elapsed, 1),
    }


def run(args: argparse.Namespace) -> dict:
    results: dict[str, dict[str, dict]] = {}
    for interests in args.interests:
        results[interests] = {}
        for placement in PLACEMENTS:
            config = Config(brokers=args.brokers, profiles=args.profiles, messages=args.messages,
                            seed=args.seed, interests=interests, placement=placement, overlay=args.overlay,
                            sources=args.sources)
            results[interests][placement] = measure(config, args.preds)
            r = results[interests][placement]
            print(f"  {interests:8} {placement:8} visited {r['visited_fraction']:.3f} "
                  f"(ideal {r['ideal_fraction']:.3f})  {r['seconds']} s", file=sys.stderr)
    return {"config": {"brokers": args.brokers, "profiles": args.profiles, "messages": args.messages,
                       "overlay": args.overlay, "sources": args.sources, "seed": args.seed,
                       "value_predicates": list(args.preds), "nested_paths": 1},
            "placements": list(PLACEMENTS), "results": results}


def table(res: dict) -> str:
    c = res["config"]
    lines = [f"brokers a message visits: {c['brokers']} brokers ({c['overlay']}, {c['sources']} sources), "
             f"{c['profiles']:,} profiles, {c['messages']} messages (flooding = 1.000)",
             f"{'interests':9} {'placement':9} {'visited':>8} {'ideal':>7} {'false pos.':>10} {'deliveries':>10} "
             f"{'FN':>3} {'host max/mean':>13}"]
    for interests, by in res["results"].items():
        for placement, r in by.items():
            lines.append(f"{interests:9} {placement:9} {r['visited_fraction']:>8.3f} {r['ideal_fraction']:>7.3f} "
                         f"{r['false_positive_link_messages']:>10} {r['expected_deliveries']:>10} "
                         f"{r['false_negatives']:>3} {r['host_load_max_over_mean']:>13}")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(res["results"])
    width = 0.8 / len(res["placements"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, placement in enumerate(res["placements"]):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [res["results"][g][placement]["visited_fraction"] for g in groups], width, label=placement)
        ax.scatter(xs, [res["results"][g][placement]["ideal_fraction"] for g in groups], color="black",
                   marker="_", s=200, zorder=3, label="ideal" if i == 0 else None)
    ax.set_xticks([g + width * (len(res["placements"]) - 1) / 2 for g in range(len(groups))],
                  [f"{g} interests" for g in groups])
    ax.set_ylabel("fraction of brokers a message visits")
    ax.set_ylim(0, 1)
    c = res["config"]
    ax.set_title(f"{c['brokers']} brokers, {c['profiles']:,} profiles (flooding = 1)")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _preds(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("..")
    return int(lo), int(hi or lo)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pep_pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", type=int, help="brokers (default 30, quick 12)")
    p.add_argument("--profiles", type=int, help="profiles (default 5000, quick 600)")
    p.add_argument("--messages", type=int, help="messages (default 300, quick 60)")
    p.add_argument("--preds", type=_preds, default=(1, 2), metavar="LO..HI",
                   help="value predicates per profile (default 1..2)")
    p.add_argument("--interests", nargs="+", choices=("uniform", "geo"), help="default: uniform geo (quick: uniform)")
    p.add_argument("--overlay", default="geometric", choices=("geometric", "transit-stub", "tree", "ring"))
    p.add_argument("--sources", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/pep_pipeline.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.brokers = args.brokers or (12 if args.quick else 30)
    args.profiles = args.profiles or (600 if args.quick else 5000)
    args.messages = args.messages or (60 if args.quick else 300)
    args.interests = args.interests or (["uniform"] if args.quick else ["uniform", "geo"])
    res = run(args)
    json_path = args.json or RESULTS / "pep_pipeline.json"
    print(table(res))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res, args.plot or json_path.with_suffix(".png"))
    print(f"wrote {json_path} and {args.plot or json_path.with_suffix('.png')}")
    bad = sum(r["false_negatives"] + r["delivery_mismatches"] for by in res["results"].values() for r in by.values())
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
