"""Reading a source's schema (``formats.schema_names``, what ``POST /sources`` and every
start of the registration service run): CPU time against size, for valid DTDs and XML
Schemas and for the adversarial DTDs of the "bounded work per request" issue, before and
after the DTD reader became linear, with lxml as the peer.

    python -m bench.schema            # up to 1 MB (a minute or two on 2 shared cores)
    python -m bench.schema --quick    # up to 64 KB (seconds)

Rows, each measured in this run:

* **after**: ``formats.schema_names`` as it is (:mod:`formats.dtd`'s scanner for DTDs;
  lxml's parse and a walk for XML Schema);
* **before (regex)**: the regular expressions ``formats.schema`` read DTDs with until the
  scanner replaced them, reproduced here (:func:`before_schema_names`) and nowhere else in
  the project: they are also the reference ``tests/formats/test_dtd.py`` and the ``schema``
  fuzz target compare the scanner with. They backtrack, so on adversarial inputs a row
  stops at the first size where one call takes more than ``--before-budget`` seconds; the
  1 MB figure is then extrapolated from the last two sizes measured (labelled so, with the
  growth exponent it used);
* **lxml** (valid inputs only, the peer): ``etree.DTD`` (a full parse of the DTD:
  declarations, content models, entities) and ``etree.XMLSchema`` (parse and compile).

Inputs: valid DTDs and XML Schemas rendered from the NITF-like schema ``yfilter.generators``
ships (:func:`render_dtd`, :func:`render_xsd`: every attribute type and default, comments,
a parameter entity, notations; its elements repeated with numbered names up to each size),
and :data:`ADVERSARIAL`, one DTD per way the old expressions were made to backtrack (and
:data:`ADVERSARIAL_XSD`, XML Schema documents built to stress lxml's parse: only "after",
which is lxml's parse with the limits of ``formats.message.parse_xml``). The
metric is CPU time of one call (``time.process_time``: the service holds the GIL for all
of it), the median of ``--reps`` calls; ratios before/after and after/lxml at each size.
Prints a table, writes ``bench/results/schema.json`` and a PNG.
"""

from __future__ import annotations

import argparse
import io
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lxml import etree

from bench.output import save
from formats import FormatError, schema_names
from formats.names import check_name
from yfilter.generators.schema import Schema

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (1_000, 6_000, 16_000, 64_000, 256_000, 1_000_000)
QUICK_SIZES = (1_000, 6_000, 16_000, 64_000)

# -- before: the reader the scanner replaced -------------------------------------------

BEFORE_ELEMENT = re.compile(rb"<!ELEMENT\s+([^\s>()]+)")
BEFORE_ATTLIST = re.compile(rb"<!ATTLIST\s+[^\s>]+((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
BEFORE_ATTDEF = re.compile(
    rb"([^\s%()|]+)\s+(?:CDATA|IDREFS|IDREF|ID|ENTITY|ENTITIES|NMTOKENS|NMTOKEN"
    rb"|NOTATION\s*\([^)]*\)|\([^)]*\))\s+(?:#REQUIRED|#IMPLIED|(?:#FIXED\s+)?(?:\"[^\"]*\"|'[^']*'))"
)
"""``formats.schema``'s DTD expressions before the scanner (quadratic: ``BEFORE_ATTLIST``
backtracks over its name and body, ``BEFORE_ATTDEF`` over every start in a body)."""


def before_declared(data: bytes) -> tuple[list[bytes], list[list[bytes]]]:
    """What the old expressions read from a DTD: the element names, and per attribute
    list the names of its definitions (the raw bytes, before names are checked)."""
    elements = [m.group(1) for m in BEFORE_ELEMENT.finditer(data)]
    attlists = [[m.group(1) for m in BEFORE_ATTDEF.finditer(a.group(1))] for a in BEFORE_ATTLIST.finditer(data)]
    return elements, attlists


def before_schema_names(schema: bytes | str) -> list[str]:
    """``formats.schema_names`` as it was before the scanner, verbatim but for the XML
    Schema branch, which did not change and is today's."""
    data = schema.encode("utf-8") if isinstance(schema, str) else bytes(schema)
    if not (data.lstrip().startswith((b"<!", b"<?xml")) and b"<!ELEMENT" in data):
        return schema_names(data)
    elements, attlists = before_declared(data)
    names = []
    for raw in elements + [name for attlist in attlists for name in attlist]:
        name = raw.decode("utf-8", "replace")
        if name.startswith("xml:"):
            name = "{http://www.w3.org/XML/1998/namespace}" + name[4:]
        try:
            names.append(check_name(name))
        except FormatError:
            continue
    return list(dict.fromkeys(names))


# -- inputs ------------------------------------------------------------------------------

_NMTOKEN = re.compile(r"[\w.\-:]+")
_DTD_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated for bench.schema: names from yfilter.generators' NITF-like schema. -->
<!ENTITY % common "onyx.class NMTOKENS #IMPLIED onyx.note CDATA 'x > 1'">
<!NOTATION gif SYSTEM "image/gif">
<!NOTATION png PUBLIC "-//onyx//png" "image/png">
"""


def _prefixed(name: str, prefixes: dict[str, str]) -> str:
    """A Clark name as a DTD writes it (a prefix per namespace; ``xml:`` for XML's)."""
    if not name.startswith("{"):
        return name
    uri, local = name[1:].split("}", 1)
    if uri == "http://www.w3.org/XML/1998/namespace":
        return "xml:" + local
    return f"{prefixes.setdefault(uri, f'p{len(prefixes)}')}:{local}"


def _attdef(name: str, values: list[str], i: int) -> str:
    """An attribute definition, its type and default chosen by ``i`` (every kind in turn)."""
    tokens = list(dict.fromkeys(v for v in values if _NMTOKEN.fullmatch(v)))[:8]
    kind = i % 6
    if kind == 1 and tokens:
        return f"{name} ({' | '.join(tokens)}) \"{tokens[0]}\""
    return {
        0: f"{name} CDATA #IMPLIED",
        1: f"{name} CDATA #REQUIRED",
        2: f"{name} CDATA #FIXED \"{tokens[0] if tokens else 'x'} > 'fixed'\"",
        3: f"{name} NMTOKEN #IMPLIED",
        4: f"{name} CDATA 'a \"quoted\" default > 1'",
        5: f"{name} {('IDREFS', 'ENTITIES', 'IDREF', 'NMTOKENS', 'ENTITY')[i // 6 % 5]} #IMPLIED",
    }[kind]


def render_dtd(schema: Schema, copies: int = 1) -> bytes:
    """A valid DTD declaring ``schema``'s elements and attributes, ``copies`` times (copy
    ``k > 0`` with names suffixed ``.k``): content models with ``?``, ``*`` and mixed
    content, attributes of every type and default, comments and processing instructions
    between declarations, a parameter entity and notations in attribute lists."""
    prefixes: dict[str, str] = {}
    out = [_DTD_HEAD]
    for k in range(copies):
        sfx = f".{k}" if k else ""
        for j, (name, spec) in enumerate(schema.elements.items()):
            tag = _prefixed(name, prefixes) + sfx
            kids = [(_prefixed(c.name, prefixes) + sfx, c) for c in spec.children]
            if spec.text:
                names = dict.fromkeys(n for n, _ in kids)
                model = "(#PCDATA" + "".join(f" | {n}" for n in names) + ")*" if names else "(#PCDATA)"
            elif kids:
                model = "(" + ", ".join(n + ("" if c.min and c.max == 1 else "?" if c.max == 1 else "*")
                                        for n, c in kids) + ")"
            else:
                model = "EMPTY"
            if j % 7 == 0:
                out.append(f"<!-- {tag}: the \"{k}\" copy's > declarations, don't read -->\n")
            out.append(f"<!ELEMENT {tag} {model}>\n")
            defs = [_attdef(_prefixed(a, prefixes), v, i + j) for i, (a, v) in enumerate(spec.attrs.items())]
            if j == 0:
                defs += ["%common;", "onyx.id ID #IMPLIED", "xml:lang NMTOKEN #IMPLIED",
                         "onyx.image NOTATION (gif | png) #IMPLIED"]
            if defs:
                sep = "\n    " if len(defs) > 2 else " "
                out.append(f"<!ATTLIST {tag}{sep}" + sep.join(defs) + ">\n")
            if j % 11 == 5:
                out.append(f"<?onyx copy='{k}'?>\n")
    return "".join(out).encode("utf-8")


def render_xsd(schema: Schema, copies: int = 1, target: str | None = None) -> bytes:
    """A valid XML Schema declaring ``schema``'s elements (global, referenced from their
    parents) and attributes, ``copies`` times as :func:`render_dtd`; with ``target`` a
    target namespace, its elements qualified; a local element in each copy's root."""
    ref = "t:" if target else ""
    head = f' targetNamespace="{target}" xmlns:t="{target}" elementFormDefault="qualified"' if target else ""
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           f'<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"{head}>\n']
    for k in range(copies):
        sfx = f".{k}" if k else ""
        for j, (name, spec) in enumerate(schema.elements.items()):
            mixed = ' mixed="true"' if spec.text else ""
            out.append(f'  <xs:element name="{name}{sfx}"><xs:complexType{mixed}>\n')
            if spec.children or j == 0:
                out.append('    <xs:choice minOccurs="0" maxOccurs="unbounded">\n')
                out.extend(f'      <xs:element ref="{ref}{c}{sfx}"/>\n'
                           for c in dict.fromkeys(c.name for c in spec.children))
                if j == 0:
                    out.append(f'      <xs:element name="onyx.local{sfx}" type="xs:string"/>\n')
                out.append("    </xs:choice>\n")
            out.extend(f'    <xs:attribute name="{a}" type="xs:string"/>\n' for a in spec.attrs
                       if not a.startswith("{"))  # xml:lang: its schema would have to be imported
            out.append("  </xs:complexType></xs:element>\n")
            if j % 9 == 0:
                out.append(f"  <!-- {name}{sfx} -->\n")
    out.append("</xs:schema>\n")
    return "".join(out).encode("utf-8")


def _copies_for(render: Callable[[int], bytes], size: int) -> bytes:
    """``render(copies)`` with the fewest copies that reach ``size`` bytes."""
    one = len(render(1))
    return render(max(1, math.ceil(size / one)))


def _repeat(head: bytes, unit: bytes, tail: bytes = b"") -> Callable[[int], bytes]:
    def make(size: int) -> bytes:
        return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail
    return make


_DECLARED = b"<!ELEMENT a ANY>\n"  # makes a text a DTD for formats.schema_names
ADVERSARIAL: dict[str, Callable[[int], bytes]] = {
    "attlist name without >": _repeat(_DECLARED + b"<!ATTLIST ", b"a"),
    "unterminated attlists": _repeat(_DECLARED, b"<!ATTLIST a "),
    "unterminated literals": _repeat(_DECLARED, b"<!ATTLIST a b CDATA \""),
    "quotes in attlist names": _repeat(_DECLARED + b"<!ATTLIST ", b"\"a'"),
    "one long attribute name": _repeat(_DECLARED + b"<!ATTLIST a ", b"b", b">"),
    "unclosed enumerations": _repeat(_DECLARED + b"<!ATTLIST a ", b"a (", b">"),
    "definitions without default": _repeat(_DECLARED + b"<!ATTLIST a ", b"a CDATA ", b">"),
    "nested content models": lambda size: _DECLARED + b"<!ELEMENT b " + b"(" * (size // 2) + b")" * (size // 2) + b">",
}
"""DTDs that made the old expressions backtrack (the first is the reported attack: 6 KB
took 0.4 s of CPU), or that stress a scanner: each a function of the size."""

_XS = b'<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"'
ADVERSARIAL_XSD: dict[str, Callable[[int], bytes]] = {
    "XSD: nested elements": lambda size: _XS + b">" + b"<a>" * (size // 7) + b"</a>" * (size // 7) + b"</xs:schema>",
    "XSD: attributes of one element": lambda size: _XS + b"".join(b' a%d=""' % i for i in range(size // 9)) + b"/>",
    "XSD: namespaces of one element": lambda size: _XS + b"".join(
        b' xmlns:p%d="u"' % i for i in range(size // 15)) + b"/>",
    "XSD: unnamed declarations": _repeat(_XS + b">", b'<xs:element ref="a"/>', b"</xs:schema>"),
}
"""XML Schema documents against lxml's parse (depth beyond 256 is refused; attribute and
namespace checks that were quadratic in old libxml2 versions)."""


# -- measuring ---------------------------------------------------------------------------

def cpu_ms(call: Callable[[], object], reps: int) -> float:
    """Median CPU milliseconds of ``call()`` over ``reps`` calls."""
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        call()
        times.append((time.process_time() - t0) * 1000)
    return statistics.median(times)


def _quiet(call: Callable[[bytes], object]) -> Callable[[bytes], object]:
    """``call`` that takes a refusal (FormatError, lxml's parse errors) as a result."""
    def run(data: bytes) -> object:
        try:
            return call(data)
        except (FormatError, etree.LxmlError) as exc:
            return exc
    return run


def lxml_dtd(data: bytes) -> etree.DTD:
    return etree.DTD(io.BytesIO(data))


def lxml_xsd(data: bytes) -> etree.XMLSchema:
    return etree.XMLSchema(etree.fromstring(data))


def measure(make: Callable[[int], bytes], sizes: tuple[int, ...], readers: dict[str, Callable],
            reps: int, budget: float) -> dict:
    """Per reader: nominal size -> the input's bytes and the median CPU ms of a call. A
    reader's row stops after the first size where one call took more than ``budget``
    seconds (that call is the point)."""
    rows: dict = {reader: {} for reader in readers}
    last = None
    for size in sizes:
        data = make(size)
        if data == last:
            continue  # a valid schema's whole copies: the size before already reached this one
        last = data
        for reader, call in readers.items():
            row = rows[reader]
            if any(p["ms"] > budget * 1000 for p in row.values()):
                continue
            once = cpu_ms(lambda: call(data), 1)
            ms = once if once > budget * 1000 else cpu_ms(lambda: call(data), reps)
            row[str(size)] = {"bytes": len(data), "ms": round(ms, 3)}
    return rows


def extrapolate(row: dict, size: int) -> dict | None:
    """The row's time at ``size`` bytes by the power law through its last two points
    (``None`` if the row reaches that nominal size)."""
    points = sorted((p["bytes"], p["ms"]) for p in row.values())
    if len(points) < 2 or str(size) in row:
        return None
    (s1, t1), (s2, t2) = points[-2:]
    exponent = math.log(max(t2, 1e-3) / max(t1, 1e-3)) / math.log(s2 / s1)
    return {"ms": round(t2 * (size / s2) ** exponent, 1), "exponent": round(exponent, 2), "from_bytes": s2}


def run(sizes: tuple[int, ...], reps: int, budget: float) -> dict:
    nitf = Schema.nitf()
    valid = {
        "DTD (NITF-like)": lambda size: _copies_for(lambda c: render_dtd(nitf, c), size),
        "XML Schema (NITF-like)": lambda size: _copies_for(lambda c: render_xsd(nitf, c), size),
        "XML Schema, target namespace": lambda size: _copies_for(lambda c: render_xsd(nitf, c, "urn:onyx:t"), size),
    }
    after, before = _quiet(schema_names), _quiet(before_schema_names)
    res: dict = {"config": {"sizes": list(sizes), "reps": reps, "before_budget_s": budget,
                            "machine": platform.machine(), "python": platform.python_version(),
                            "libxml2": ".".join(map(str, etree.LIBXML_VERSION))},
                 "valid": {}, "adversarial": {}}
    for kind, make in valid.items():
        peer = _quiet(lxml_dtd if kind.startswith("DTD") else lxml_xsd)
        readers = {"after": after, "lxml": peer}
        if kind.startswith("DTD"):
            readers["before (regex)"] = before
        res["valid"][kind] = measure(make, sizes, readers, reps, budget)
    for kind, make in ADVERSARIAL.items():
        res["adversarial"][kind] = measure(make, sizes, {"after": after, "before (regex)": before}, reps, budget)
    for kind, make in ADVERSARIAL_XSD.items():
        res["adversarial"][kind] = measure(make, sizes, {"after": after}, reps, budget)
    res["ratios"] = ratios(res, max(sizes))
    return res


def ratios(res: dict, largest: int) -> dict:
    """before/after and after/lxml at every size both rows have; the before row's time
    at the largest size, extrapolated where it stopped."""
    out: dict = {}
    for group in ("valid", "adversarial"):
        for kind, rows in res[group].items():
            a = rows["after"]
            for other, key in (("before (regex)", "before/after"), ("lxml", "after/lxml")):
                if other not in rows:
                    continue
                common = [s for s in a if s in rows[other]]
                num, den = (rows[other], a) if other.startswith("before") else (a, rows[other])
                out[f"{kind}: {key}"] = {s: round(num[s]["ms"] / max(den[s]["ms"], 1e-3), 2) for s in common}
            if "before (regex)" in rows:
                guess = extrapolate(rows["before (regex)"], largest)
                if guess:
                    out[f"{kind}: before at {largest} bytes (extrapolated)"] = guess
    return out


def table(res: dict) -> str:
    sizes = res["config"]["sizes"]
    lines = [f"CPU ms per call (median of {res['config']['reps']}) by nominal schema size (valid schemas: whole "
             f"copies, so at least one); '>' = stopped after a call over {res['config']['before_budget_s']} s",
             f"{'input: reader':46} " + " ".join(f"{s:>10,}" for s in sizes)]
    for group in ("valid", "adversarial"):
        lines.append(f"-- {group}")
        for kind, rows in res[group].items():
            for reader, row in rows.items():
                cells = [f"{row[str(s)]['ms']:>10.2f}" if str(s) in row else f"{'>':>10}" for s in sizes]
                lines.append(f"{(kind + ': ' + reader)[:46]:46} " + " ".join(cells))
    for key, value in res["ratios"].items():
        if "extrapolated" in key:
            lines.append(f"{key}: {value['ms'] / 1000:,.0f} s (growth exponent {value['exponent']} "
                         f"up to {value['from_bytes']:,} bytes)")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 6))
    styles = {"after": "-", "before (regex)": "--", "lxml": ":"}
    for ax, group in zip(axes, ("valid", "adversarial")):
        for i, (kind, rows) in enumerate(res[group].items()):
            for reader, row in rows.items():
                points = sorted((p["bytes"], max(p["ms"], 1e-3)) for p in row.values())
                ax.plot(*zip(*points), styles[reader], color=f"C{i}", marker="o", ms=3, label=f"{kind}: {reader}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("schema size (bytes)")
        ax.set_ylabel("CPU ms per call (median)")
        ax.set_title(f"{group} schemas (solid: after, dashed: before (regex), dotted: lxml)")
        ax.legend(fontsize=6)
    fig.suptitle("formats.schema_names: the DTD scanner against the regular expressions it replaced, and lxml")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.schema", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", help=f"schema sizes in bytes (default {SIZES}; quick {QUICK_SIZES})")
    p.add_argument("--reps", type=int, help="calls per point, the median is kept (default 5; quick 3)")
    p.add_argument("--before-budget", type=float, help="seconds one call of a row may take before the row stops "
                                                       "(default 3; quick 0.5)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, help="default bench/results/schema.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    res = run(sizes, args.reps or (3 if args.quick else 5), args.before_budget or (0.5 if args.quick else 3.0))
    print(table(res))
    save(res, args.json or RESULTS / "schema.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
