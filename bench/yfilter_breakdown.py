"""Where the engine's time goes per message on the corpus workloads (issue 28):

    python -m bench.yfilter_breakdown [--workloads c-mixed,c-contains,c-not,c-position]
                                      [--sizes 10000,100000]

For each workload and size (CPU time, median of 5 passes over the 52 corpus documents,
after two warm-up passes): the whole ``Engine.match`` on XML bytes, and its stages
timed apart on the same documents: lxml parse, the C matcher (profiles with
predicates), the lazy DFA (profiles without), building the id set; and the C
matcher's counts per message: posting records scanned (``filed_hits``), candidates
whose need the message met and that were checked (``need_met``), matches, and ids
reported. Writes ``bench/results/yfilter_corpus_breakdown.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.yfilter import RESULTS, corpus_documents, corpus_profiles
from yfilter import Engine
from yfilter.document import TreeDoc, parse_xml
from yfilter.runtime import Run, walk


def _median_ms(fn, xs, reps: int = 5) -> float:
    ts = []
    for _ in range(reps):
        t = time.process_time()
        for x in xs:
            fn(x)
        ts.append((time.process_time() - t) / len(xs))
    return statistics.median(ts) * 1e3


def breakdown(workload: str, n: int, docs: list[bytes], seed: int = 1) -> dict:
    profiles, ns, _ = corpus_profiles(workload, n, seed, docs)
    e = Engine(namespaces=ns)
    e.add_many((str(i), p) for i, p in enumerate(profiles))
    for _ in range(2):
        for d in docs:
            e.match(d)
    trees = [TreeDoc(parse_xml(d)) for d in docs]
    before = e._native.stats()
    r = {"workload": workload, "profiles": n,
         "total_ms": _median_ms(e.match, docs),
         "parse_ms": _median_ms(lambda d: TreeDoc(parse_xml(d)), docs),
         "native_ms": _median_ms(lambda t: e._native_match(t) if len(e._native) else None,
                                 trees),
         "dfa_ms": _median_ms(lambda t: walk(e._dfa, Run(t), checks=False)
                              if e._plain else None, trees)}
    evaluated = [e.evaluate(d) for d in docs]
    r["report_ms"] = _median_ms(lambda m: m.ids(), evaluated)
    after = e._native.stats()
    k = (after["messages"] - before["messages"]) or 1
    for x in ("filed_hits", "need_met", "matched"):
        r[f"c_{x}_per_message"] = (after[x] - before[x]) / k
    r["ids_per_message"] = sum(len(e.match(d)) for d in docs) / len(docs)
    r["c_ns_per_candidate"] = r["native_ms"] * 1e6 / max(r["c_need_met_per_message"], 1)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.yfilter_breakdown", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="c-mixed,c-contains,c-not,c-position")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--out", type=Path, default=RESULTS / "yfilter_corpus_breakdown.json")
    args = ap.parse_args(argv)
    docs = corpus_documents()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for wl in args.workloads.split(","):
            r = breakdown(wl, n, docs)
            rows.append(r)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in r.items()), flush=True)
    args.out.write_text(json.dumps({"command": "python -m bench.yfilter_breakdown " +
                                    " ".join(argv if argv is not None else sys.argv[1:]),
                                    "results": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
