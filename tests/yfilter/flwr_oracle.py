"""lxml as the oracle for transformation profiles: XPath per clause.

For a :class:`FlwrSpec`: the for path selects the bindings, ``boolean(where)`` keeps
some, and for each kept binding the return constructor is built with lxml from the
XPath results of each projection (relative to the binding), the steps applied by the
straightforward tree rewrites below. Results are compared after Canonical XML 2.0
with comments and prefix rewriting: attribute order, namespace declarations that
nothing uses and the choice of prefixes do not count (lxml picks the prefix when it
reconciles the declarations of a copied element, and where a document binds two
prefixes to one namespace that choice depends on how the copy was made).

Also a command for the big run (not part of ``make test``)::

    python -m tests.yfilter.flwr_oracle --generated 4000 --corpus 1560
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

from lxml import etree

from formats import Message
from yfilter import Engine
from yfilter.generators.flwr import Elem, FlwrSpec, Proj, Text

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def c14n(xml: bytes) -> str:
    return etree.canonicalize(xml.decode("utf-8"), with_comments=True, rewrite_prefixes=True)


def lxml_results(spec: FlwrSpec, xml: bytes, ns: dict[str, str]) -> list[bytes]:
    """The results of ``spec`` on ``xml`` (one per binding, document order)."""
    root = etree.fromstring(xml, _PARSER)
    bindings = root.xpath(spec.for_path, namespaces=ns)
    where = spec.where_xpath()
    out = []
    for b in bindings:
        if where is not None and not b.xpath(f"boolean({where})", namespaces=ns):
            continue
        el = _build(spec.ret, b, ns)
        etree.cleanup_namespaces(el)
        out.append(etree.tostring(el, encoding="utf-8"))
    return out


def _add_text(el, text: str) -> None:
    if len(el):
        el[-1].tail = (el[-1].tail or "") + text
    else:
        el.text = (el.text or "") + text


def _values(p: Proj, b, ns) -> list[str]:
    out = []
    for r in b.xpath(p.path, namespaces=ns):
        out.append(r.xpath("string(.)") if isinstance(r, etree._Element) else str(r))
    return out


def _build(e: Elem, b, ns):
    el = etree.Element(e.name)
    for name, parts in e.attrs:
        el.set(name, "".join(x.value if isinstance(x, Text)
                             else " ".join(v for p in x for v in _values(p, b, ns))
                             for x in parts))
    for item in e.content:
        if isinstance(item, Text):
            if not item.boundary:
                _add_text(el, item.value)
        elif isinstance(item, Elem):
            el.append(_build(item, b, ns))
        else:
            for p in item:
                for r in b.xpath(p.path, namespaces=ns):
                    if p.kind == "attribute":
                        if el.get(r.attrname) is None:
                            el.set(r.attrname, str(r))
                    elif p.kind == "text":
                        _add_text(el, str(r))
                    else:
                        c = copy.deepcopy(r)
                        c.tail = None
                        for frag in _steps([c], p.steps, ns):
                            el.append(frag)
    return el


def _clark(name: str, ns: dict[str, str]) -> str:
    if ":" not in name:
        return name
    prefix, local = name.split(":", 1)
    uri = "http://www.w3.org/XML/1998/namespace" if prefix == "xml" else ns[prefix]
    return f"{{{uri}}}{local}"


def _steps(els: list, steps: list[tuple[str, list[str]]], ns) -> list:
    for name, args in steps:
        if name == "drop":
            els = [_dropped(e, args, ns) for e in els]
            els = [e for e in els if e is not None]
        elif name == "rename":
            old, new = _clark(args[0], ns), args[1]
            for e in els:
                for x in [e, *e.iterdescendants()]:
                    if x.tag == old:
                        x.tag = new
        elif name == "table_to_list":
            els = [_tables(e) for e in els]
        elif name == "project":
            els = [_project(e, args, ns) for e in els]
        else:
            raise ValueError(name)
    return els


def _dropped(e, args, ns):
    names = {_clark(a, ns) for a in args if not a.endswith("()")}
    if e.tag in names:
        return None
    doomed = [x for x in e.iterdescendants()
              if (x.tag in names) or ("comment()" in args and x.tag is etree.Comment)
              or ("processing-instruction()" in args and x.tag is etree.PI)]
    for x in doomed:
        remove(x)
    return e


def remove(x) -> None:
    """Detach ``x`` from its parent, the text after it staying where it was (XQuery's
    ``delete node``, the reference's own way: by index, not by yfilter's code)."""
    parent = x.getparent()
    if parent is None:
        return
    i = parent.index(x)
    if x.tail:
        if i == 0:
            parent.text = (parent.text or "") + x.tail
        else:
            parent[i - 1].tail = (parent[i - 1].tail or "") + x.tail
    del parent[i]


def _tables(e):
    """Every table below or at ``e`` as a list, innermost first, rewritten in place."""
    for t in reversed([x for x in e.iter() if x.tag == "table"]):
        rows = [r for r in t.iter() if r.tag == "tr"
                and next(a for a in r.iterancestors() if a.tag == "table") is t]
        items = []
        for row in rows:
            li = etree.SubElement(t, "li")
            for k, cell in enumerate(c for c in row if c.tag in ("td", "th")):
                if k:
                    _add_text(li, " | ")
                _add_text(li, cell.text or "")
                li.extend(list(cell))
            items.append(li)
        for c in [c for c in t if c not in items]:
            t.remove(c)
        t.attrib.clear()
        t.tag, t.text = "ul", None
    return e


def _project(e, paths, ns):
    """Keep of ``e`` what ``paths`` select, deleting everything else bottom-up."""
    keep = {k for p in paths for k in e.xpath(p, namespaces=ns)}  # holds the proxies
    if e in keep:
        return e
    for x in reversed(list(e.iterdescendants())):
        if any(a in keep for a in x.iterancestors()):
            continue
        if x in keep or any(d in keep for d in x.iterdescendants()):
            x.tail = None
            if x not in keep:
                x.text = None
            continue
        x.getparent().remove(x)
    e.text = None
    return e


def disagreements(engine: Engine, specs: dict[str, FlwrSpec], xml: bytes,
                  ns: dict[str, str] | None = None) -> list[tuple]:
    """(profile id, input kind, lxml results, engine results) wherever they differ
    after C14N, on the bytes and on the decoded Message (whose reference is lxml on
    the Message's own XML, which keeps no comments)."""
    ns = ns or {}
    out = []
    msg = Message.from_xml(xml)
    for kind, given, ref_xml in (("bytes", xml, xml), ("message", msg, msg.to_xml())):
        got = engine.run(given)
        matched = engine.match(given)
        for pid, spec in specs.items():
            want = [c14n(r) for r in lxml_results(spec, ref_xml, ns)]
            have = [c14n(r) for r in got.get(pid, [])]
            if want != have or (pid in matched) != bool(want):
                out.append((pid, kind, want, have))
    return out


def _run(n_generated: int, n_corpus: int, seed: int) -> tuple[int, int, list]:
    """The big differential run: generated profiles on generated NITF documents, and
    profiles from each corpus document's vocabulary on that document."""
    from broker.config import CORPUS_DIR
    from yfilter.generators import DocGenerator, Schema
    from yfilter.generators.flwr import FlwrGenerator

    profiles = results = 0
    bad: list = []
    schema = Schema.nitf()
    batch = 500
    for k in range(0, n_generated, batch):
        gen = FlwrGenerator(schema, seed=seed + k)
        specs = {str(i): s for i, s in enumerate(gen.specs(min(batch, n_generated - k)))}
        engine = Engine()
        for pid, s in specs.items():
            engine.add(pid, s.text())
        docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=seed + k + 1)
        for _ in range(4):
            xml = docs.generate()
            bad += disagreements(engine, specs, xml)
            results += sum(len(v) for v in engine.run(xml).values())
        profiles += len(specs)
    files = sorted(CORPUS_DIR.glob("*.xml")) if CORPUS_DIR.is_dir() else []
    per_file = -(-n_corpus // len(files)) if files else 0
    for path in files:
        xml = path.read_bytes()
        schema = Schema.from_documents([etree.fromstring(xml, _PARSER)])
        gen = FlwrGenerator(schema, depth=4, seed=seed + len(xml))
        specs = {str(i): s for i, s in enumerate(gen.specs(per_file))}
        engine = Engine(namespaces=schema.namespaces)
        for pid, s in specs.items():
            engine.add(pid, s.text())
        bad += disagreements(engine, specs, xml, schema.namespaces)
        results += sum(len(v) for v in engine.run(xml).values())
        profiles += len(specs)
    return profiles, results, bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generated", type=int, default=4000,
                    help="profiles on generated NITF documents (4 documents per 500)")
    ap.add_argument("--corpus", type=int, default=1560,
                    help="profiles on the corpus documents, spread over the files")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    profiles, results, bad = _run(args.generated, args.corpus, args.seed)
    print(f"{profiles} transformation profiles, {results} results compared (bytes and "
          f"Message input), {len(bad)} disagreements, {time.perf_counter() - t0:.0f} s")
    for pid, kind, want, have in bad[:5]:
        print(f"  profile {pid} on {kind}: lxml {want!r}\n    engine {have!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
