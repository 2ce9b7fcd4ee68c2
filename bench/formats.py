"""ONYX Figures 7 and 8 for Onyx's wire formats, plus receive+match on the engine.

For every workload -- generated NITF-like documents at DocDepth-MaxRepeats 4-1 ...
6-3 (``yfilter.generators``) and the real news corpus -- and every format:

* wire size (Figure 7): bytes on the wire, and their total over the total of the
  published text;
* processing delay (Figure 8): sender + receiver time, medians over documents.
  The sender is a forwarding broker holding the received text and its decoded
  table: text formats pass the text on (compressing it if asked), binary formats
  encode the table. The receiver does what the engine needs before matching:
  decompress, then an lxml parse for text formats (the engine walks lxml's tree)
  or ``formats.decode`` for the binary ones.

Then receive+match, from a Kafka record to the matching profile ids: the packet
header is parsed (the same work for every input), then ``yfilter.Engine.match`` on
text input (it parses with lxml and walks lxml's tree: the target's baseline), on
text decoded to the element table (what a broker that needs the table anyway does),
and ``match(header.decode(...))`` on binary input, with a few hundred generated
profiles, path-only and with value predicates, timed interleaved. Both sides are
broken down so a missed target shows where the time goes: header; lxml parse, then
match on lxml's tree (of which building the element list the walk iterates,
``TreeDoc.preorder``); decode (of which ``msgpack.unpackb``), then match on the
table (of which building the columns a decoded message leaves to first use --
texts, attribute maps, tree links -- which predicates need and paths do not).

Dictionaries (names and zstd) are learned from other documents than the measured
ones: a separate generated sample per grid point; leave-one-out on the corpus
(two folds with ``--quick``), as a source's dictionary learned from its history.

    python -m bench.formats            # full run, about two minutes on 2 shared cores
    python -m bench.formats --quick    # smaller, about 15 seconds

Writes ``bench/results/formats.json`` and ``bench/results/formats.png``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import formats
from broker import config
from formats import Dictionary, DictionaryStore, Message, PacketHeader, learn_dictionary
from formats.message import parse_xml

GRID = [(depth, repeats) for depth in (4, 5, 6) for repeats in (1, 2, 3)]
RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SIZE = 0.25
TARGET_SPEEDUP = 1.5
MATCH_FORMATS = ("stream", "stream-dict", "stream-dict+zstd-dict")
TEXT_INPUTS = ("text", "text as table")
"""``text``: ``Engine.match(xml)``, the engine parses with lxml and walks lxml's tree
(the target's baseline). ``text as table``: ``formats.decode("text")`` (parse and
build the element table) then match, which is what a broker does when it needs the
table anyway (routing tables, forwarding in a binary format)."""
MATCH_INPUTS = TEXT_INPUTS + MATCH_FORMATS


@dataclass
class Workload:
    """Documents to measure, each with the dictionary its source would use."""

    name: str
    docs: list[bytes]
    dictionaries: list[Dictionary]
    schema: object  # yfilter.generators.Schema, for generating profiles


def _time_us(fn: Callable[[], object], reps: int) -> float:
    """Median microseconds per call over ``reps`` batches of at least ~0.2 ms."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    number = max(1, int(2e-4 / max(once, 1e-7)))
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples) * 1e6


def generated_workloads(n_docs: int, n_train: int) -> list[Workload]:
    from yfilter.generators import DocGenerator, Schema

    schema = Schema.nitf()
    out = []
    for depth, repeats in GRID:
        def make(seed: int, n: int) -> list[bytes]:
            gen = DocGenerator(schema, doc_depth=depth, max_repeats=repeats, seed=seed)
            return [gen.generate() for _ in range(n)]

        dictionary = learn_dictionary(f"nitf-{depth}-{repeats}", make(1, n_train))
        out.append(Workload(f"{depth}-{repeats}", make(0, n_docs), [dictionary] * n_docs, schema))
    return out


def corpus_workload(quick: bool) -> Workload | None:
    from yfilter.generators import Schema

    files = sorted(config.CORPUS_DIR.glob("*.xml")) if config.CORPUS_DIR.is_dir() else []
    if not files:
        print(f"(no corpus at {config.CORPUS_DIR}: corpus rows skipped)", file=sys.stderr)
        return None
    docs = [f.read_bytes() for f in files]
    if quick:  # two folds: each half's dictionary is learned from the other half
        halves = [docs[0::2], docs[1::2]]
        learned = [learn_dictionary("news", halves[1]), learn_dictionary("news", halves[0])]
        docs = halves[0] + halves[1]
        dictionaries = [learned[0]] * len(halves[0]) + [learned[1]] * len(halves[1])
    else:  # leave one out
        dictionaries = [learn_dictionary("news", docs[:i] + docs[i + 1 :]) for i in range(len(docs))]
    schema = Schema.from_documents([parse_xml(d) for d in docs])
    return Workload("corpus", docs, dictionaries, schema)


def measure_formats(w: Workload, reps: int) -> dict:
    """Figure 7 and 8 numbers for one workload."""
    names = formats.available()
    sizes: dict[str, list[int]] = {name: [] for name in names}
    sends: dict[str, list[float]] = {name: [] for name in names}
    recvs: dict[str, list[float]] = {name: [] for name in names}
    for xml, d in zip(w.docs, w.dictionaries):
        message = Message.from_xml(xml)
        calls = {}
        for name in names:
            fmt = formats.get(name)
            blob = fmt.encode(xml, d)
            sizes[name].append(len(blob))
            if fmt.base.name == "text":
                send = (lambda fmt=fmt: fmt.pack(xml, d)) if fmt.compression else None
                recv = lambda fmt=fmt, blob=blob: parse_xml(fmt.unpack(blob, d))  # noqa: E731
            else:
                send = lambda fmt=fmt: fmt.encode(message, d)  # noqa: E731
                recv = lambda fmt=fmt, blob=blob: fmt.decode(blob, d)  # noqa: E731
            calls[name] = (send, recv)
        # Interleaved, so that a noisy neighbour on the CPU hits every format alike.
        samples = {name: ([], []) for name in names}
        for _ in range(reps):
            for name, (send, recv) in calls.items():
                samples[name][0].append(_time_us(send, 1) if send else 0.0)
                samples[name][1].append(_time_us(recv, 1))
        for name in names:
            sends[name].append(statistics.median(samples[name][0]))
            recvs[name].append(statistics.median(samples[name][1]))
    text_total = sum(map(len, w.docs))
    out = {
        name: {
            "bytes_median": statistics.median(sizes[name]),
            "size_vs_text": sum(sizes[name]) / text_total,
            "send_us": statistics.median(sends[name]),
            "recv_us": statistics.median(recvs[name]),
            "send_recv_us": statistics.median(s + r for s, r in zip(sends[name], recvs[name])),
        }
        for name in names
    }
    table_us = [_time_us(lambda: Message.from_xml(x), reps) for x in w.docs]
    return {
        "docs": len(w.docs),
        "elements_median": statistics.median(len(Message.from_xml(x)) for x in w.docs),
        "text_bytes_median": statistics.median(map(len, w.docs)),
        "text_to_table_us": statistics.median(table_us),
        "formats": out,
    }


def measure_match(w: Workload, n_profiles: int, reps: int) -> dict:
    """Receive+match per input format, for path-only and predicate profiles. Every
    input starts from a Kafka record: the packet header is parsed first (the same
    work for every format), then the payload is matched."""
    import msgpack

    from yfilter import Engine
    from yfilter.document import TreeDoc
    from yfilter.document import parse_xml as tree_parse
    from yfilter.generators import ProfileGenerator

    out: dict[str, dict] = {}
    for mix, preds in (("paths", 0), ("predicates", (0, 1))):
        engine = Engine(namespaces=w.schema.namespaces)
        gen = ProfileGenerator(w.schema, depth=6, n_preds=preds, seed=7)
        for i, text in enumerate(gen.batch(n_profiles)):
            engine.add(f"q{i}", text)
        totals = dict.fromkeys(MATCH_INPUTS, 0.0)
        header_only = decode_only = unpack_only = parse_only = preorder_only = columns_only = 0.0
        for k, (xml, d) in enumerate(zip(w.docs, w.dictionaries)):
            store = DictionaryStore([d])
            headers = {
                name: PacketHeader("xml", format=name, source_id=d.source_id, root_broker="b1",
                                   message_id=f"{w.name}-{k}", dictionary_version=d.version).to_kafka()
                for name in ("text",) + MATCH_FORMATS
            }
            blobs = {name: formats.encode(name, xml, dictionary=d) for name in MATCH_FORMATS}
            expected = engine.match(xml)
            for name in MATCH_FORMATS:
                assert engine.match(formats.decode(name, blobs[name], dictionary=d)) == expected, name
            text_header = headers["text"]

            def text_input() -> None:
                PacketHeader.from_kafka(text_header)
                engine.match(xml)

            def text_as_table() -> None:
                engine.match(PacketHeader.from_kafka(text_header).decode(xml, store))

            def binary_input(name: str) -> Callable[[], None]:
                blob, header = blobs[name], headers[name]
                return lambda: engine.match(PacketHeader.from_kafka(header).decode(blob, store))

            calls = {"text": text_input, "text as table": text_as_table,
                     **{name: binary_input(name) for name in MATCH_FORMATS}}
            # Interleaved, so that a noisy neighbour on the CPU hits every input alike.
            samples: dict[str, list[float]] = {name: [] for name in MATCH_INPUTS}
            for _ in range(reps):
                for name, fn in calls.items():
                    samples[name].append(_time_us(fn, 1))
            for name in MATCH_INPUTS:
                totals[name] += statistics.median(samples[name])
            blob = blobs["stream"]
            header_only += _time_us(lambda: PacketHeader.from_kafka(headers["stream"]), reps)
            decode_only += _time_us(lambda: formats.decode("stream", blob), reps)
            unpack_only += _time_us(lambda: msgpack.unpackb(blob), reps)
            parse_only += _time_us(lambda: parse_xml(xml), reps)
            root = tree_parse(xml)
            preorder_only += _time_us(lambda: TreeDoc(root).preorder(), reps)
            built = formats.decode("stream", blob)
            engine.match(built)  # builds the columns the engine reads
            fresh = _time_us(lambda: engine.match(formats.decode("stream", blob)), reps)
            columns_only += max(0.0, fresh - _time_us(lambda: formats.decode("stream", blob), reps)
                                - _time_us(lambda: engine.match(built), reps))
        n = len(w.docs)
        out[mix] = {
            "profiles": n_profiles,
            "us_per_doc": {name: t / n for name, t in totals.items()},
            "speedup_stream_vs_text": totals["text"] / totals["stream"],
            "speedup_stream_vs_text_as_table": totals["text as table"] / totals["stream"],
            "breakdown_us": {
                "header parse (any input)": header_only / n,
                "text: lxml parse": parse_only / n,
                "text: match on lxml tree": (totals["text"] - header_only - parse_only) / n,
                "text: of which element list": preorder_only / n,
                "stream: decode": decode_only / n,
                "stream: of which unpackb": unpack_only / n,
                "stream: match on table": (totals["stream"] - header_only - decode_only) / n,
                "stream: of which columns": columns_only / n,
            },
        }
    return out


def render(results: dict) -> str:
    names = list(formats.available())
    work = list(results["workloads"])
    lines = ["Figure 7 -- wire size, total bytes / total published text bytes"]
    lines.append(f"{'format':28}" + "".join(f"{w:>8}" for w in work))
    for name in names:
        cells = "".join(f"{results['workloads'][w]['formats'][name]['size_vs_text']:8.3f}" for w in work)
        lines.append(f"{name:28}{cells}")
    lines.append("")
    lines.append("Figure 8 -- sender + receiver time per message, median us (receiver: parse for text, decode otherwise)")
    lines.append(f"{'format':28}" + "".join(f"{w:>8}" for w in work))
    for name in names:
        cells = "".join(f"{results['workloads'][w]['formats'][name]['send_recv_us']:8.1f}" for w in work)
        lines.append(f"{name:28}{cells}")
    lines.append(f"{'(text -> Message table)':28}" + "".join(
        f"{results['workloads'][w]['text_to_table_us']:8.1f}" for w in work))
    lines.append(f"{'(elements per doc)':28}" + "".join(
        f"{results['workloads'][w]['elements_median']:8.0f}" for w in work))
    lines.append(f"{'(text bytes per doc)':28}" + "".join(
        f"{results['workloads'][w]['text_bytes_median']:8.0f}" for w in work))
    if any("match" in results["workloads"][w] for w in work):
        lines.append("")
        lines.append("Receive+match per message, us (yfilter.Engine; text input is parsed by the engine)")
        for mix in ("paths", "predicates"):
            profiles = next(results["workloads"][w]["match"][mix]["profiles"] for w in work)
            lines.append(f"  {profiles} {mix} profiles")
            lines.append(f"{'input':28}" + "".join(f"{w:>8}" for w in work))
            for name in MATCH_INPUTS:
                cells = "".join(f"{results['workloads'][w]['match'][mix]['us_per_doc'][name]:8.1f}" for w in work)
                lines.append(f"{name:28}{cells}")
            lines.append(f"{'speedup stream vs text':28}" + "".join(
                f"{results['workloads'][w]['match'][mix]['speedup_stream_vs_text']:8.2f}" for w in work))
            lines.append(f"{'  vs text as table':28}" + "".join(
                f"{results['workloads'][w]['match'][mix]['speedup_stream_vs_text_as_table']:8.2f}" for w in work))
            for part in results["workloads"][work[0]]["match"][mix]["breakdown_us"]:
                lines.append(f"{'  ' + part:28}" + "".join(
                    f"{results['workloads'][w]['match'][mix]['breakdown_us'][part]:8.1f}" for w in work))
    lines.append("")
    for target in results["targets"].values():
        lines.append(f"target: {target['what']}: {target['value']} -> {'met' if target['met'] else 'MISSED'}")
    return "\n".join(lines)


def targets(results: dict) -> dict:
    out = {}
    corpus = results["workloads"].get("corpus")
    if corpus:
        best = min(corpus["formats"], key=lambda n: corpus["formats"][n]["size_vs_text"])
        ratio = corpus["formats"][best]["size_vs_text"]
        out["size"] = {
            "what": f"best format on the corpus <= {TARGET_SIZE:.0%} of text ({best})",
            "value": f"{ratio:.3f}",
            "met": ratio <= TARGET_SIZE,
        }
    for mix in ("paths", "predicates"):
        speedups = {
            w: r["match"][mix]["speedup_stream_vs_text"] for w, r in results["workloads"].items() if "match" in r
        }
        if speedups:
            worst = min(speedups, key=speedups.get)
            out[f"speedup_{mix}"] = {
                "what": f"stream receive+match >= {TARGET_SPEEDUP}x text, {mix} profiles, every workload",
                "value": ", ".join(f"{w} {s:.2f}" for w, s in speedups.items()) + f" (worst {worst})",
                "met": min(speedups.values()) >= TARGET_SPEEDUP,
            }
    return out


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    work = list(results["workloads"])
    x = range(len(work))
    has_match = all("match" in results["workloads"][w] for w in work)
    fig, grid = plt.subplots(2 if has_match else 1, 2, figsize=(15, 11 if has_match else 5.5), squeeze=False)
    axes = grid.flatten()
    # Line style by base format, colour by compression: twelve lines stay readable.
    styles = {"text": "-", "stream": "--", "stream-dict": ":"}
    colours = {"": "black", "zlib": "tab:blue", "zstd": "tab:green", "zstd-dict": "tab:red"}
    for name in formats.available():
        base, _, compression = name.partition("+")
        style = dict(linestyle=styles[base], color=colours[compression], marker="o", markersize=3, label=name)
        axes[0].plot(x, [results["workloads"][w]["formats"][name]["size_vs_text"] for w in work], **style)
        axes[1].plot(x, [results["workloads"][w]["formats"][name]["send_recv_us"] for w in work], **style)
    axes[0].axhline(TARGET_SIZE, color="grey", linewidth=0.8)
    axes[0].set(title="Fig. 7: wire size / text size", ylabel="ratio", ylim=(0, None))
    axes[1].set(title="Fig. 8: sender + receiver time (median)", ylabel="us per message", yscale="log")
    axes[1].legend(fontsize=7, ncol=2)
    if has_match:
        _plot_speedups(axes[2], results, work)
        _plot_breakdown(axes[3], results, work)
    for ax in axes:
        ax.set_xticks(list(x), work)
        ax.set_xlabel("DocDepth-MaxRepeats / corpus")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _plot_speedups(ax, results: dict, work: list[str]) -> None:
    x = range(len(work))
    for mix, marker in (("paths", "o"), ("predicates", "s")):
        match = [results["workloads"][w]["match"][mix] for w in work]
        ax.plot(x, [m["speedup_stream_vs_text"] for m in match], marker=marker, color="tab:green",
                label=f"stream vs text, {mix}")
        ax.plot(x, [m["speedup_stream_vs_text_as_table"] for m in match], marker=marker, color="tab:orange",
                linestyle="--", label=f"stream vs text as table, {mix}")
    ax.axhline(TARGET_SPEEDUP, color="grey", linewidth=0.8)
    ax.set(title="receive + match speedup of stream input", ylabel="x", ylim=(0, None))
    ax.legend(fontsize=7)


def _plot_breakdown(ax, results: dict, work: list[str]) -> None:
    """Where receive+match time goes, text (left bar) vs stream (right bar), for the
    profiles with predicates, as fractions of the text total: header, parse or
    decode, the element list or the columns built on first use, and the rest of
    matching (the engine's walk). The target is a stream bar at 1/1.5 or below."""
    width = 0.38
    x = range(len(work))
    match = [results["workloads"][w]["match"]["predicates"] for w in work]
    scale = [m["us_per_doc"]["text"] for m in match]
    parts = [
        ("header", "tab:gray", "header parse (any input)", "header parse (any input)"),
        ("lxml parse / decode", "tab:blue", "text: lxml parse", "stream: decode"),
        ("element list / columns", "tab:orange", "text: of which element list", "stream: of which columns"),
    ]
    for side, offset in (("text", -width / 2), ("stream", width / 2)):
        bottom = [0.0] * len(work)
        for label, colour, text_key, stream_key in parts:
            key = text_key if side == "text" else stream_key
            values = [m["breakdown_us"][key] / t for m, t in zip(match, scale)]
            ax.bar([i + offset for i in x], values, width, bottom=bottom, color=colour,
                   label=label if side == "text" else None)
            bottom = [b + v for b, v in zip(bottom, values)]
        rest = [m["us_per_doc"][side] / t - b for m, t, b in zip(match, scale, bottom)]
        ax.bar([i + offset for i in x], rest, width, bottom=bottom, color="tab:green",
               label="rest of matching (engine)" if side == "text" else None)
    ax.axhline(1 / TARGET_SPEEDUP, color="grey", linewidth=0.8)
    profiles = match[0]["profiles"]
    ax.set(title=f"receive+match, text (left) vs stream (right), {profiles} profiles with predicates",
           ylabel="fraction of text's time")
    ax.legend(fontsize=7)


def _git_state() -> str:
    """The commit measured ("-dirty" when the working tree has changes: others may
    be editing the engine or the generators while this runs)."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.formats", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer documents, repetitions and profiles")
    parser.add_argument("--docs", type=int, help="measured documents per grid point (default 30, quick 8)")
    parser.add_argument("--profiles", type=int, help="profiles for receive+match (default 300, quick 100)")
    parser.add_argument("--reps", type=int, help="timing repetitions (default 7, quick 3)")
    parser.add_argument("--no-match", action="store_true", help="skip receive+match")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    n_docs = args.docs or (8 if args.quick else 30)
    n_profiles = args.profiles or (100 if args.quick else 300)
    reps = args.reps or (3 if args.quick else 7)

    workloads = generated_workloads(n_docs, n_train=20 if args.quick else 40)
    corpus = corpus_workload(args.quick)
    if corpus:
        workloads.append(corpus)
    results: dict = {
        "meta": {
            "command": "python -m bench.formats" + (" --quick" if args.quick else ""),
            "docs_per_grid_point": n_docs,
            "reps": reps,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "git": _git_state(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "workloads": {},
    }
    for w in workloads:
        print(f"measuring {w.name} ({len(w.docs)} documents)...", file=sys.stderr)
        r = results["workloads"][w.name] = measure_formats(w, reps)
        if not args.no_match:
            r["match"] = measure_match(w, n_profiles, reps)
    results["targets"] = targets(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "formats.json").write_text(json.dumps(results, indent=1))
    plot(results, args.out / "formats.png")
    print(render(results))
    print(f"\nwrote {args.out / 'formats.json'} and {args.out / 'formats.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
