"""The MDV paper's experiments (``../shared/seeds/001`` section 4, Figures 10-15) on the catalog.

    python -m bench.catalog            # 10k and 100k rules, SQLite and PostgreSQL (about 15 minutes)
    python -m bench.catalog --quick    # 1k and 5k rules, smaller batches (a minute or two)

Documents like Figure 1 (one CycleProvider and its ServerInformation each) are registered in
batches at a backbone whose rule base holds one rule type of Figure 10:

* OID  ``search CycleProvider c register c where c = URI``
* COMP ``search CycleProvider c register c where c.synthValue > INT``
* PATH ``search CycleProvider c register c where c.serverInformation.memory = INT``
* JOIN ``... where c.serverHost contains 'uni-passau.de' and c.serverInformation.cpu = 600 and
  c.serverInformation.memory = INT``

As in the paper, for OID, PATH and JOIN each CycleProvider is matched by exactly one rule; for
COMP by a set percentage of the rule base (10% in Figs. 13 and 14's COMP curve). The metric is
the paper's: the average registration time of a document, the filter's time for a batch divided
by the batch size (the median over several batches per point; the filter's time is the batch's
transaction: the three runs, what to ship to the repository, the commit; the repository itself
is a stub that drops the deltas). Rule-base sizes 10k and 100k (Figs. 11-14) over batch sizes
1..1000, and 10,000 COMP rules over batch size and matched percentage (Fig. 15), on SQLite (a
file) and on PostgreSQL (a local server started for the run, durability off as a scratch server).
COMP's matched pairs grow with batch size times percentage times rule base, so its largest
batches are left out where a point would write millions of results (the table says which).
Prints a table, writes ``bench/results/catalog.json`` and a PNG.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.output import save

RESULTS = Path(__file__).resolve().parent / "results"
TYPES = ("OID", "COMP", "PATH", "JOIN")
NS = "urn:onyx:objectglobe#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"


def rule(kind: str, k: int) -> str:
    """Rule ``k`` of a type (Figure 10)."""
    head = "search CycleProvider c register c where "
    return head + {
        "OID": f"c = 'doc{k}.rdf#host'",
        "COMP": f"c.synthValue > {k}",
        "PATH": f"c.serverInformation.memory = {k}",
        "JOIN": f"c.serverHost contains 'uni-passau.de' and c.serverInformation.cpu = 600 and "
                f"c.serverInformation.memory = {k}",
    }[kind]


def document(k: int, synth: int) -> str:
    """A document like Figure 1, matched by rule ``k`` (and, for COMP, by the rules below ``synth``)."""
    return (f'<rdf:RDF xmlns:rdf="{RDF}" xmlns="{NS}"><CycleProvider rdf:ID="host">'
            f"<serverHost>host{k}.uni-passau.de</serverHost><serverPort>5874</serverPort>"
            f"<synthValue>{synth}</synthValue><serverInformation>"
            f'<ServerInformation rdf:ID="info" memory="{k}" cpu="600"/></serverInformation>'
            f"</CycleProvider></rdf:RDF>")


def backbone(url: str, kind: str, rules: int):
    from catalog import Backbone
    from catalog.schema import FIGURE_1_SCHEMA

    mdp = Backbone(url, batch_size=10**9)
    mdp.register_schema(FIGURE_1_SCHEMA)
    mdp.connect("bench", lambda delta: None)
    t0 = time.perf_counter()
    for start in range(0, rules, 10_000):
        mdp.subscribe_many("bench", [rule(kind, k) for k in range(start, min(rules, start + 10_000))])
    return mdp, time.perf_counter() - t0


def measure(mdp, kind: str, rules: int, batch: int, reps: int, next_doc: list[int], percent: float) -> dict:
    """Median ms per document over ``reps`` batches (one more first, as warm-up)."""
    per_doc, iterations = [], 0
    for rep in range(reps + 1):
        for _ in range(batch):
            k = next_doc[0] % rules
            next_doc[0] += 1
            mdp.register_document(f"doc{k}.rdf" if kind == "OID" else f"d{next_doc[0]}.rdf",
                                  document(k, int(round(rules * percent / 100))))
        report = mdp.flush()
        iterations = max(report["iterations"].values())
        if rep:
            per_doc.append(report["filter_seconds"] * 1e3 / batch)
    return {"ms_per_doc": statistics.median(per_doc), "batches": reps, "iterations": iterations}


def reps_for(batch: int, quick: bool) -> int:
    return max(2 if quick or batch > 100 else 3, (20 if quick else 60) // batch)


def comp_cap(rules: int, percent: float, quick: bool) -> int:
    """Largest COMP batch measured: a batch writes batch x rules x percent results twice."""
    budget = 50_000 if quick else 250_000
    return max(1, int(budget / max(1.0, rules * percent / 100)))


def run(args, postgres=None) -> dict:
    from broker.local.pgserver import PostgresDevServer

    batches = [b for b in (1, 3, 10, 30, 100, 300, 1000) if b <= args.max_batch]
    res = {"config": {"rules": args.rules, "batches": batches, "comp_percent": args.percent,
                      "fig15_rules": args.fig15_rules, "fig15_percents": args.fig15_percents,
                      "machine": f"{os.cpu_count()} cores", "date": datetime.now(timezone.utc).isoformat(),
                      "load_average_1min": [round(os.getloadavg()[0], 2)]},
           "curves": {}, "setup_s": {}, "fig15": {}}
    pg = postgres or (PostgresDevServer().start() if "postgresql" in args.databases else None)
    names = iter(range(10**6))
    try:
        with tempfile.TemporaryDirectory(prefix="onyx-bench-catalog-") as tmp:
            def url(db: str) -> str:
                n = next(names)
                return pg.create_database(f"bench{n}") if db == "postgresql" else f"sqlite:///{tmp}/b{n}.db"

            for db in args.databases:
                for kind in TYPES:
                    for rules in args.rules:
                        mdp, setup = backbone(url(db), kind, rules)
                        res["setup_s"][f"{db}/{kind}/{rules}"] = round(setup, 2)
                        curve = {}
                        next_doc = [0]
                        for b in batches:
                            if kind == "COMP" and b > comp_cap(rules, args.percent, args.quick):
                                continue
                            curve[str(b)] = measure(mdp, kind, rules, b, reps_for(b, args.quick), next_doc, args.percent)
                        res["curves"][f"{db}/{kind}/{rules}"] = curve
                        print(f"{db:10} {kind:4} {rules:>7,} rules: setup {setup:6.1f} s; ms/doc "
                              + " ".join(f"{b}:{v['ms_per_doc']:.2f}" for b, v in curve.items()), flush=True)
                        mdp.engine.dispose()
                for pct in args.fig15_percents:
                    mdp, _ = backbone(url(db), "COMP", args.fig15_rules)
                    curve, next_doc = {}, [0]
                    for b in batches:
                        if b <= comp_cap(args.fig15_rules, pct, args.quick):
                            curve[str(b)] = measure(mdp, "COMP", args.fig15_rules, b, reps_for(b, args.quick),
                                                    next_doc, pct)
                    res["fig15"][f"{db}/{pct:g}"] = curve
                    print(f"{db:10} COMP {args.fig15_rules:,} rules, {pct:g}% matched: ms/doc "
                          + " ".join(f"{b}:{v['ms_per_doc']:.2f}" for b, v in curve.items()), flush=True)
                    mdp.engine.dispose()
    finally:
        if pg is not None and postgres is None:
            pg.stop()
    res["config"]["load_average_1min"].append(round(os.getloadavg()[0], 2))
    res["ratios"] = ratios(res)
    return res


def ratios(res: dict) -> dict:
    """The shapes the paper describes, as numbers: cost per document at batch 1 over the largest
    batch measured (falling with batch size), and the larger rule base over the smaller at each
    type's batch-size median (OID about 1: rule-base size does not matter)."""
    out = {}
    small, large = min(res["config"]["rules"]), max(res["config"]["rules"])
    for key, curve in res["curves"].items():
        db, kind, rules = key.split("/")
        if curve:
            first, last = curve[min(curve, key=int)], curve[max(curve, key=int)]
            out[f"{key} batch1/batch{max(curve, key=int)}"] = round(first["ms_per_doc"] / last["ms_per_doc"], 2)
        if int(rules) == large and small != large:
            base = res["curves"].get(f"{db}/{kind}/{small}", {})
            common = [b for b in curve if b in base]
            if common:
                out[f"{db}/{kind} {large}/{small} rules"] = round(statistics.median(
                    curve[b]["ms_per_doc"] / base[b]["ms_per_doc"] for b in common), 2)
    return out


def table(res: dict) -> str:
    batches = res["config"]["batches"]
    lines = [f"average registration time per document (ms, median), by batch size; load average "
             f"{res['config']['load_average_1min'][0]} -> {res['config']['load_average_1min'][-1]} on "
             f"{res['config']['machine']}",
             f"{'database/type/rules':26} {'setup s':>8} " + " ".join(f"{b:>8}" for b in batches)]
    for key, curve in res["curves"].items():
        lines.append(f"{key:26} {res['setup_s'][key]:>8.1f} " + " ".join(
            f"{curve[str(b)]['ms_per_doc']:>8.3f}" if str(b) in curve else f"{'-':>8}" for b in batches))
    lines.append(f"Fig. 15: COMP, {res['config']['fig15_rules']:,} rules, by matched percentage")
    for key, curve in res["fig15"].items():
        lines.append(f"{key + '%':26} {'':>8} " + " ".join(
            f"{curve[str(b)]['ms_per_doc']:>8.3f}" if str(b) in curve else f"{'-':>8}" for b in batches))
    lines.append("ratios: " + ", ".join(f"{k} {v}" for k, v in res["ratios"].items()))
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    panels = {"OID": (0, 0, "Fig. 11: OID"), "PATH": (0, 1, "Fig. 12: PATH"),
              "COMP": (0, 2, f"Fig. 13: COMP ({res['config']['comp_percent']:g}% of the rule base)"),
              "JOIN": (1, 0, "Fig. 14: JOIN")}
    styles = {"sqlite": "-", "postgresql": "--"}
    for key, curve in res["curves"].items():
        db, kind, rules = key.split("/")
        r, c, title = panels[kind]
        ax = axes[r][c]
        xs = sorted(int(b) for b in curve)
        ax.plot(xs, [curve[str(x)]["ms_per_doc"] for x in xs], styles[db], marker="o", ms=3,
                label=f"{db}, {int(rules):,} rules")
        ax.set_title(title)
    for db in {k.split("/")[0] for k in res["fig15"]}:
        ax = axes[1][1 if db == "sqlite" else 2]
        for key, curve in res["fig15"].items():
            if key.startswith(db + "/"):
                xs = sorted(int(b) for b in curve)
                ax.plot(xs, [curve[str(x)]["ms_per_doc"] for x in xs], marker="o", ms=3,
                        label=f"{key.split('/')[1]}% matched")
        ax.set_title(f"Fig. 15: {res['config']['fig15_rules']:,} COMP rules ({db})")
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("batch size (documents)")
        ax.set_ylabel("ms per document")
        ax.legend(fontsize=7)
    fig.suptitle("MDV filter on the catalog: average registration time per document")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None, postgres=None) -> int:
    """The command line; ``postgres``: a running :class:`PostgresDevServer` to use (the tests')."""
    p = argparse.ArgumentParser(prog="python -m bench.catalog", description=__doc__.split("\n\n")[0])
    p.add_argument("--rules", type=int, nargs="+", help="rule-base sizes (default 10000 100000; quick 1000 5000)")
    p.add_argument("--max-batch", type=int, help="largest batch size (default 1000; quick 100)")
    p.add_argument("--percent", type=float, default=10.0, help="COMP: matched percentage of the rule base")
    p.add_argument("--fig15-rules", type=int, help="Fig. 15's rule base (default 10000; quick 2000)")
    p.add_argument("--fig15-percents", type=float, nargs="+", default=[1.0, 10.0, 25.0])
    p.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/catalog.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.rules = args.rules or ([1000, 5000] if args.quick else [10_000, 100_000])
    args.max_batch = args.max_batch or (100 if args.quick else 1000)
    args.fig15_rules = args.fig15_rules or (2000 if args.quick else 10_000)
    res = run(args, postgres)
    print(table(res))
    save(res, args.json or RESULTS / "catalog.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
