"""Presenting a simulator run: a text table, the JSON file and a plot.

>>> r = {"config": {"brokers": 2, "profiles": 1, "messages": 1, "churn": 0, "interests": "uniform",
...                 "placement": "nearest", "overlay": "ring", "sources": 1, "generalize": False,
...                 "budget": None, "seed": 0},
...      "overlay": {"brokers": 2, "trees": 1}, "link_messages": 1, "flooding_link_messages": 2,
...      "ideal_link_messages": 1, "false_positive_link_messages": 0, "link_bytes": 10,
...      "flooding_link_bytes": 20, "transformed_link_bytes": 4, "transformed_link_messages": 1,
...      "results_compared": 1, "result_mismatches": 0, "false_negatives": 0, "expected_deliveries": 1, "deliveries": 1,
...      "delivery_mismatches": 0, "profiles_with_matches": 1, "profiles_delivered_exactly": 1,
...      "delta_messages": 1, "delta_bytes": 30, "table_mismatches": 0,
...      "tables": {"count": 1, "atoms": {"total": 2, "mean": 2.0, "max": 2}}, "timings": {"total": 0.1},
...      "cpu": {"forwards_per_message": 0.0012, "deliver_per_message": 0.0034}}
>>> print(table(r).splitlines()[2])
link messages                           1            2   0.500
>>> print(table(r).splitlines()[6])
transformed forwardings                 1            1   1.000   (4 bytes; 0 of 1 results differing)
>>> print(table(r).splitlines()[-1])
cpu per message: forwards 1.200 ms, deliver 3.400 ms
"""

from __future__ import annotations

import json
from pathlib import Path


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def table(r: dict) -> str:
    """The run's headline numbers as a fixed-width table."""
    c = r["config"]
    gen = f"generalized to {c['budget']}" if c["generalize"] else "exact tables"
    lines = [
        f"{r['overlay']['brokers']} brokers ({c['overlay']}, {r['overlay']['trees']} trees), "
        f"{c['profiles']} profiles ({c['interests']} interests, {c['placement']} placement), "
        f"{c['messages']} messages, churn {c['churn']}, seed {c['seed']}, {gen}",
        f"{'':28} {'routed':>12} {'flooding':>12} {'ratio':>7}",
        f"{'link messages':28} {r['link_messages']:>12} {r['flooding_link_messages']:>12} "
        f"{_ratio(r['link_messages'], r['flooding_link_messages']):>7}",
        f"{'link bytes':28} {r['link_bytes']:>12} {r['flooding_link_bytes']:>12} "
        f"{_ratio(r['link_bytes'], r['flooding_link_bytes']):>7}",
        f"{'  perfect routing would send':28} {r['ideal_link_messages']:>12} {'':>12} "
        f"{_ratio(r['ideal_link_messages'], r['flooding_link_messages']):>7}",
        f"{'  false-positive forwardings':28} {r['false_positive_link_messages']:>12}",
        f"{'transformed forwardings':28} {r['transformed_link_messages']:>12} {r['link_messages']:>12} "
        f"{_ratio(r['transformed_link_messages'], r['link_messages']):>7}   "
        f"({r['transformed_link_bytes']} bytes; {r['result_mismatches']} of {r['results_compared']} "
        f"results differing)",
        f"{'false negatives':28} {r['false_negatives']:>12}",
        f"{'deliveries / expected':28} {r['deliveries']:>12} {r['expected_deliveries']:>12}",
        f"{'profiles delivered exactly':28} {r['profiles_delivered_exactly']:>12} "
        f"{r['profiles_with_matches']:>12}   (mismatched deliveries: {r['delivery_mismatches']})",
        f"{'deltas on links (bytes)':28} {r['delta_messages']:>12} {r['delta_bytes']:>12}",
        f"{'tables differing from rebuild':28} {r['table_mismatches']:>12}",
        f"routing tables ({r['tables']['count']} in use): {'':4}{'total':>12} {'mean':>12} {'max':>7}",
    ]
    for key in ("atoms", "nfa_states", "guards", "conjunctions", "exact_atoms", "exact_nfa_states",
                "exact_guards", "rebuilds"):
        s = r["tables"].get(key)
        if s:
            lines.append(f"{'  ' + key:28} {s['total']:>12} {s['mean']:>12} {s['max']:>7}")
    lines.append("seconds: " + ", ".join(f"{k} {v}" for k, v in r["timings"].items()))
    cpu = r.get("cpu")
    if cpu:
        lines.append(f"cpu per message: forwards {1e3 * cpu['forwards_per_message']:.3f} ms, "
                     f"deliver {1e3 * cpu['deliver_per_message']:.3f} ms")
    return "\n".join(lines)


def write_json(r: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(r, indent=1) + "\n")


def plot(r: dict, path: str | Path) -> None:
    """Per-link traffic against flooding and perfect routing, and table sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    links = sorted(r["per_link"].values(), key=lambda v: -v["flooding_messages"])
    links = [v for v in links if v["flooding_messages"]]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    x = range(len(links))
    ax = axes[0]
    ax.plot(x, [v["flooding_messages"] for v in links], label="flooding", color="grey")
    ax.plot(x, [v["messages"] for v in links], label="routed", color="tab:blue")
    ax.plot(x, [v["ideal_messages"] for v in links], label="perfect routing", color="tab:green", lw=0.8)
    ax.set(title="messages per tree link", xlabel="links, busiest first", ylabel="messages")
    ax.legend()
    ax = axes[1]
    names = ["flooding", "routed", "perfect"]
    totals = [r["flooding_link_bytes"], r["link_bytes"], r["ideal_link_bytes"]]
    colors = ["grey", "tab:blue", "tab:green"]
    if r["config"].get("transform"):
        names += ["transformed"]
        totals += [r["transformed_link_bytes"]]
        colors += ["tab:orange"]
    ax.bar(names, [t / 1e6 for t in totals], color=colors)
    ax.set(title=f"bytes on links (false negatives: {r['false_negatives']})", ylabel="MB")
    ax = axes[2]
    t = r["tables"]
    keys = [k for k in ("atoms", "nfa_states", "guards") if k in t]
    ax.bar([k for k in keys], [t[k]["mean"] for k in keys], color="tab:blue", label="routing view")
    if "exact_atoms" in t:
        ax.bar([k for k in keys], [t["exact_" + k]["mean"] for k in keys], color="none",
               edgecolor="black", label="exact table")
    ax.set(title="routing table size (mean per table)", yscale="log")
    ax.legend()
    c = r["config"]
    fig.suptitle(f"{r['overlay']['brokers']} brokers, {c['profiles']} profiles ({c['interests']}), "
                 f"{c['messages']} messages, churn {c['churn']}, "
                 f"{'generalized' if c['generalize'] else 'exact'}")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
