"""Incremental transformation (ONYX 4.2.2) in the course of routing: what it saves on the links
and what it costs the brokers, with and without it, at two link bandwidths.

In-process, no Kafka: the six :class:`routing.node.Node` objects of the ``figure4`` overlay
(root b1; b1 -> b2 -> b4 -> b5, b6; b1 -> b3), wired by their routing deltas, each message
pushed down the tree through :meth:`Node.forwards` (every link it is routed to, carrying the
message or what the link's transformation query makes of it, :mod:`routing.incremental`) and
:meth:`Node.deliver` at every broker it reaches. Two workloads:

* ``batched`` — the paper's: a message is ``<batched-nitf>`` around 4-10 articles of the
  news corpus (``../shared/corpus/news``, the NITF files in no namespace), profiles ``for $n
  in $msg/batched-nitf/nitf where <conjuncts on values the corpus has> return ...``: each host
  has a subject of its own (``tobject.subject.type``: Finance, Sport, Justice, Politics,
  Weather), every profile there tests it, some also the article type; b4, b5 and b6 return
  ``<r>{$n/body/body.head/hedline}</r>``, b2 and b3 ``copy $c := $n modify (delete node
  $c//media) return $c``;
* ``generator`` — the routing simulator's mix (:class:`routing.workload.Interests`, uniform,
  half transformation profiles on two shared for paths, half filters with at most one value
  predicate) on generated NITF messages, each profile hosted at a random broker other than
  the root.

For each, with (``project``) and without (``project=False``) incremental transformation, at
100 Mbit/s and 10 Gbit/s (:attr:`Node.bandwidth`, what :class:`routing.node.LinkCost` weighs
a link's transformation against), per message: link bytes (XML text of what each link
carries, summed over the links), CPU seconds in ``forwards`` (senders) and in ``deliver``
(hosts), and the end-to-end cost = CPU + link bytes * 8 / bandwidth. Medians over the
repetitions (each: every message once, after a warm-up pass), ratios with / without.
Every delivery is checked against one :class:`yfilter.Engine` with every profile.

    python -m bench.transform            # 7 repetitions, 60 messages a workload
    python -m bench.transform --quick    # 5 repetitions, 20 messages
    python -m bench.transform --profile  # where the time of the transforming run goes (cProfile)

Writes ``bench/results/transform.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import formats
from bench.output import save
from broker import config
from routing.node import Node
from routing.overlay import builtin
from routing.workload import Interests
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema

RESULTS = Path(__file__).resolve().parent / "results" / "transform.json"
BANDWIDTHS = (100e6, 10e9)
HOSTS = ("b2", "b3", "b4", "b5", "b6")
SUBJECT = '$n/head/tobject/tobject.subject/@tobject.subject.type = "{}"'
TYPE = '$n/head/tobject/@tobject.type = "{}"'
HEDLINE = "<r>{$n/body/body.head/hedline}</r>"
NO_MEDIA = "copy $c := $n modify (delete node $c//media) return $c"
PLACES = {"b2": ("Finance", NO_MEDIA), "b3": ("Justice", NO_MEDIA), "b4": ("Politics", HEDLINE),
          "b5": ("Sport", HEDLINE), "b6": ("Weather", HEDLINE)}
"""The batched workload's hosts: the subject every profile there tests, and the return."""


def corpus_articles(corpus: Path) -> list[bytes]:
    """The corpus' NITF articles in no namespace, each without its XML declaration."""
    out = []
    for p in sorted(Path(corpus).glob("*.xml")):
        data = p.read_bytes()
        body = re.sub(rb"^\s*(<\?xml[^>]*\?>)?\s*(<!DOCTYPE[^>]*>)?\s*", b"", data)
        if body.startswith(b"<nitf") and b"xmlns" not in body[:200]:
            try:
                formats.decode("text", body)
            except Exception:
                continue
            out.append(body)
    return out


def batched(corpus: Path, n_messages: int, per_host: int, seed: int) -> tuple[list[bytes], list[tuple[str, str]]]:
    """Messages of 4-10 corpus articles, and (host, profile) pairs (see the module docstring)."""
    articles = corpus_articles(corpus)
    if not articles:
        raise SystemExit(f"no NITF articles in {corpus}: set ONYX_CORPUS to the news corpus")
    rnd = random.Random(seed)
    messages = [b"<batched-nitf>" + b"".join(rnd.choice(articles) for _ in range(rnd.randint(4, 10)))
                + b"</batched-nitf>" for _ in range(n_messages)]
    types = ["News", "news"]
    profiles = []
    for host, (subject, ret) in PLACES.items():
        for i in range(per_host):
            where = SUBJECT.format(subject)
            if i % 2:
                where += " and " + TYPE.format(types[(i // 2) % len(types)])
            profiles.append((host, f"for $n in $msg/batched-nitf/nitf where {where} return {ret}"))
    return messages, profiles


def generator(n_messages: int, n_profiles: int, seed: int) -> tuple[list[bytes], list[tuple[str, str]]]:
    """The simulator's mix: half transformation profiles on two shared for paths."""
    ov = builtin("figure4")
    schema = Schema.nitf()
    # The simulator's filters have 3-5 value predicates (about 5 matches in 10,000 profiles):
    # at 200 profiles nothing would match; these have at most one.
    interests = Interests.build("uniform", ov, schema, seed=seed, transform=0.5, bindings=2, n_preds=(0, 1),
                                n_nested=0)
    rnd = random.Random(seed)
    profiles = []
    for _ in range(n_profiles):
        host = rnd.choice(HOSTS)
        profiles.append((host, interests.generate(host)))
    messages = [DocGenerator(schema, doc_depth=6, max_repeats=3, seed=seed * 1000 + i).generate()
                for i in range(n_messages)]
    return messages, profiles


def overlay_of(profiles: list[tuple[str, str]], bandwidth: float) -> dict[str, Node]:
    """The figure4 nodes with ``profiles`` hosted and every routing delta collected up the tree."""
    ov = builtin("figure4")
    nodes = {b: Node(b, ov, bandwidth=bandwidth) for b in ov.brokers}
    for i, (host, text) in enumerate(profiles):
        queue = [(host, u) for u in nodes[host].host(f"p{i}", 1, text)]
        while queue:
            child, u = queue.pop()
            queue += [(u.parent, v) for v in nodes[u.parent].collect(u.root, child, u.delta)]
    for n in nodes.values():
        n.warm()
    return nodes


def push(nodes: dict[str, Node], doc: bytes, project: bool) -> dict:
    """One message down b1's tree: what the links carried, the CPU it took, the deliveries."""
    fwd = dlv = 0.0
    link_bytes = sends = transformed = 0
    got: dict[str, list[bytes]] = {}
    queue = [("b1", formats.decode("text", doc), None, doc)]
    while queue:
        broker, msg, applied, xml = queue.pop()
        node = nodes[broker]
        t = time.process_time()
        forwards = node.forwards("b1", msg, project=project, applied=applied)
        fwd += time.process_time() - t
        for f in forwards:
            carried = msg if f.transformed is None else f.transformed
            link_bytes += len(xml) if f.transformed is None and xml is not None else len(carried.to_xml())
            sends += 1
            transformed += f.transformed is not None
            queue.append((f.link, carried, f.effect, xml if f.transformed is None else None))
        t = time.process_time()
        results = node.deliver(msg, xml if applied is None else None, applied=applied)
        dlv += time.process_time() - t
        for pid, r in results.items():
            if r:
                got[pid] = r
    return {"link_bytes": link_bytes, "sends": sends, "transformed": transformed, "forwards_s": fwd,
            "deliver_s": dlv, "results": got}


def run_config(messages: list[bytes], profiles: list[tuple[str, str]], expected: list[dict],
               project: bool, bandwidth: float, reps: int) -> dict:
    nodes = overlay_of(profiles, bandwidth)
    for doc in messages:  # warm-up: the links' cost measurements, compiled transformations
        push(nodes, doc, project)
    per_rep = []
    wrong = 0
    for rep in range(reps):
        rows = [push(nodes, doc, project) for doc in messages]
        if rep == 0:
            wrong = sum(r["results"] != e for r, e in zip(rows, expected))
        n = len(rows)
        m = {k: sum(r[k] for r in rows) / n for k in ("link_bytes", "sends", "transformed", "forwards_s", "deliver_s")}
        m["cpu_s"] = m["forwards_s"] + m["deliver_s"]
        m["link_s"] = m["link_bytes"] * 8 / bandwidth
        m["cost_s"] = m["cpu_s"] + m["link_s"]
        per_rep.append(m)
    med = {k: statistics.median(r[k] for r in per_rep) for k in per_rep[0]}
    return {"project": project, "bandwidth": bandwidth, "median": med, "reps": per_rep, "wrong_deliveries": wrong}


def match_rates(messages: list[bytes], profiles: list[tuple[str, str]], expected: list[dict]) -> dict:
    """How selective the profiles are: messages with a result per profile, and articles
    (bindings) per message a profile returns."""
    per_profile = Counter(pid for e in expected for pid in e)
    results = [sum(len(r) for r in e.values()) for e in expected]
    return {"profiles": len(profiles),
            "messages_matching_a_profile": statistics.median(per_profile.get(f"p{i}", 0) / len(messages)
                                                             for i in range(len(profiles))),
            "profiles_matched_per_message": statistics.median(len(e) for e in expected),
            "results_per_message": statistics.median(results),
            "message_bytes": statistics.median(len(m) for m in messages)}


def run_workload(name: str, messages: list[bytes], profiles: list[tuple[str, str]], reps: int) -> dict:
    engine = Engine()
    for i, (_, text) in enumerate(profiles):
        engine.add(f"p{i}", text)
    expected = [{pid: r for pid, r in engine.run(d, xml=d).items() if r} for d in messages]
    out = {"workload": name, "messages": len(messages), **match_rates(messages, profiles, expected), "runs": []}
    for bw in BANDWIDTHS:
        pair = {}
        for project in (False, True):
            r = run_config(messages, profiles, expected, project, bw, reps)
            out["runs"].append(r)
            pair[project] = r["median"]
        ratio = {k: pair[True][k] / pair[False][k] if pair[False][k] else None
                 for k in ("link_bytes", "forwards_s", "deliver_s", "cpu_s", "cost_s")}
        out.setdefault("ratios", {})[f"{bw:g}"] = ratio
        print(f"  {name} at {bw / 1e6:g} Mbit/s: link bytes x{ratio['link_bytes']:.3f}, cost x{ratio['cost_s']:.3f}",
              flush=True)
    return out


def profile_run(messages: list[bytes], profiles: list[tuple[str, str]], top: int = 15) -> list[dict]:
    """cProfile of one transforming pass (100 Mbit/s): the functions with the most own time."""
    nodes = overlay_of(profiles, BANDWIDTHS[0])
    for doc in messages:
        push(nodes, doc, True)
    prof = cProfile.Profile()
    prof.enable()
    for doc in messages:
        push(nodes, doc, True)
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = sum(v[2] for v in stats.stats.values()) or 1
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [{"function": f"{Path(f).name}:{line} {fn}", "own_share": v[2] / total, "cumulative_s": v[3]}
            for (f, line, fn), v in rows]


def table(res: dict) -> str:
    lines = ["Incremental transformation on the figure4 overlay, per message (medians over "
             f"{res['reps']} repetitions; CPU = forwards at senders + deliver at hosts; cost = CPU + link bytes*8/bw)",
             f"{'workload':<10} {'bw':>9} {'transform':<9} {'link bytes':>11} {'x':>6} {'sends':>6} {'transf.':>7} "
             f"{'fwd ms':>7} {'dlv ms':>7} {'CPU ms':>7} {'link ms':>8} {'cost ms':>8} {'x':>6} {'wrong':>5}"]
    for w in res["workloads"]:
        base = {}
        for r in w["runs"]:
            m = r["median"]
            key = r["bandwidth"]
            if not r["project"]:
                base[key] = m
            b = base[key]
            lines.append(
                f"{w['workload']:<10} {r['bandwidth'] / 1e6:>6g} Mb {'on' if r['project'] else 'off':<9} "
                f"{m['link_bytes']:>11,.0f} {m['link_bytes'] / b['link_bytes']:>6.3f} {m['sends']:>6.2f} "
                f"{m['transformed']:>7.2f} {m['forwards_s'] * 1e3:>7.3f} {m['deliver_s'] * 1e3:>7.3f} "
                f"{m['cpu_s'] * 1e3:>7.3f} {m['link_s'] * 1e3:>8.3f} {m['cost_s'] * 1e3:>8.3f} "
                f"{m['cost_s'] / b['cost_s']:>6.3f} {r['wrong_deliveries']:>5}")
    for w in res["workloads"]:
        lines.append(f"{w['workload']}: {w['messages']} messages of {w['message_bytes']:,.0f} bytes (median), "
                     f"{w['profiles']} profiles; a profile has results for {w['messages_matching_a_profile']:.0%} "
                     f"of the messages (median), a message matches {w['profiles_matched_per_message']:g} profiles "
                     f"with {w['results_per_message']:g} results (medians)")
    return "\n".join(lines)


def plot(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    labels, off_b, on_b, off_c, on_c = [], [], [], [], []
    for w in res["workloads"]:
        for bw in BANDWIDTHS:
            runs = {r["project"]: r["median"] for r in w["runs"] if r["bandwidth"] == bw}
            labels.append(f"{w['workload']}\n{bw / 1e9:g} Gbit/s" if bw >= 1e9 else f"{w['workload']}\n{bw / 1e6:g} Mbit/s")
            off_b.append(runs[False]["link_bytes"])
            on_b.append(runs[True]["link_bytes"])
            off_c.append(runs[False]["cost_s"] * 1e3)
            on_c.append(runs[True]["cost_s"] * 1e3)
    x = range(len(labels))
    for ax, off, on, unit in ((axes[0], off_b, on_b, "link bytes per message"), (axes[1], off_c, on_c,
                                                                                   "end-to-end cost per message (ms)")):
        ax.bar([i - 0.2 for i in x], off, 0.4, label="whole messages (project=False)", color="tab:red")
        ax.bar([i + 0.2 for i in x], on, 0.4, label="incremental transformation", color="tab:blue")
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_ylabel(unit)
        for i, (a, b) in enumerate(zip(off, on)):
            ax.annotate(f"x{b / a:.2f}" if a else "", (i, max(a, b)), ha="center", va="bottom", fontsize=8)
    axes[0].legend(fontsize=8)
    fig.suptitle("ONYX 4.2.2 incremental transformation on the figure4 overlay (in-process nodes, medians)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.transform", description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=60, help="messages per workload and repetition (default 60)")
    ap.add_argument("--reps", type=int, default=7, help="repetitions; the table gives medians (default 7)")
    ap.add_argument("--per-host", type=int, default=20, help="batched workload: profiles per host broker (default 20)")
    ap.add_argument("--generator-profiles", type=int, default=200,
                    help="generator workload: profiles, placed at random hosts (default 200)")
    ap.add_argument("--seed", type=int, default=7, help="seed of messages and profiles (default 7)")
    ap.add_argument("--corpus", type=Path, default=config.CORPUS_DIR,
                    help=f"the news corpus the batched messages are made of (default {config.CORPUS_DIR})")
    ap.add_argument("--quick", action="store_true", help="20 messages, 5 repetitions")
    ap.add_argument("--profile", action="store_true", help="cProfile the transforming run of each workload")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"the JSON to write, a PNG beside it (default {RESULTS})")
    args = ap.parse_args(argv)
    n, reps = (20, 5) if args.quick else (args.messages, max(5, args.reps))
    res = {"reps": reps, "seed": args.seed, "bandwidths": list(BANDWIDTHS), "workloads": []}
    loads = {"batched": batched(args.corpus, n, args.per_host, args.seed),
             "generator": generator(n, args.generator_profiles, args.seed)}
    for name, (messages, profiles) in loads.items():
        res["workloads"].append(run_workload(name, messages, profiles, reps))
        if args.profile:
            res["workloads"][-1]["profile"] = profile_run(messages, profiles)
    print(table(res))
    if args.profile:
        for w in res["workloads"]:
            print(f"where the transforming run's time goes ({w['workload']}, own time):")
            for row in w["profile"]:
                print(f"  {row['own_share']:6.1%}  {row['function']}")
    save(res, args.out, None, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
