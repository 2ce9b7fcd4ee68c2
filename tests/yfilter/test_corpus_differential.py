"""Differential tests on the profiles people write: :class:`CorpusProfileGenerator`
over the whole news corpus' vocabulary, every construct, matched by the engine
against every corpus document, as XML text and as a decoded ``formats.Message``,
each compared with lxml evaluating every profile one by one (zero disagreements).

Default: 150 profiles of each construct plus 1,000 mixed ones (about 2,200), each
on all 52 documents. ``-m slow``: 5,000 of each construct and 20,000 mixed, with
other seeds. A disagreement found becomes a named case in
``test_corpus_regressions.py``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
from lxml import etree

from broker.config import CORPUS_DIR
from formats import Message
from tests.yfilter.oracle import disagreements, strip_msg
from yfilter import Engine
from yfilter.generators import CorpusProfileGenerator
from yfilter.generators.corpus import CONSTRUCTS


def _corpus() -> list[Path]:
    return sorted(CORPUS_DIR.glob("*.xml")) if CORPUS_DIR.is_dir() else []


pytestmark = pytest.mark.skipif(not _corpus(), reason=f"corpus not found at {CORPUS_DIR}")


@lru_cache(maxsize=None)
def _documents() -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in _corpus())


def corpus_profiles(per_construct: int, mixed: int, seed: int) -> tuple[dict[str, str], dict]:
    docs = _documents()
    out: dict[str, str] = {}
    for i, c in enumerate(CONSTRUCTS):
        g = CorpusProfileGenerator(docs, seed=seed * 100 + i)
        out.update((f"{c}-{j}", p) for j, p in enumerate(g.batch(per_construct, c)))
    g = CorpusProfileGenerator(docs, seed=seed * 100 + 99)
    out.update((f"mixed-{j}", p) for j, p in enumerate(g.batch(mixed)))
    return out, g.namespaces


def check(profiles: dict[str, str], namespaces: dict[str, str], docs,
          runtimes=("native", "python")) -> list[tuple]:
    """Every (document, runtime, input, profile, lxml) where an engine on the XML text
    or on the decoded Message differs from lxml (on the Message, lxml reads its own
    XML): the native runtime, and the Python one that is its reference."""
    engines = {}
    for runtime in runtimes:
        engines[runtime] = Engine(namespaces=namespaces, runtime=runtime)
        engines[runtime].add_many(profiles)
    xpaths = {pid: etree.XPath(f"boolean({strip_msg(t)})", namespaces=namespaces)
              for pid, t in profiles.items()}
    out = []
    matched = 0
    for i, xml in enumerate(docs):
        msg = Message.from_xml(xml)
        for what, message, text in (("xml", xml, xml), ("msg", msg, msg.to_xml())):
            root = etree.fromstring(text)
            expected = {pid for pid, x in xpaths.items() if x(root)}
            for runtime, engine in engines.items():
                got = engine.match(message)
                matched += len(got)
                out += [(i, runtime, what, profiles[pid], pid in expected)
                        for pid in expected ^ got]
    assert matched > len(docs)  # not vacuous
    return out


def test_every_construct_on_every_corpus_document():
    profiles, ns = corpus_profiles(150, 1000, seed=1)
    assert check(profiles, ns, _documents()) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_every_construct_on_every_corpus_document_long(seed):
    profiles, ns = corpus_profiles(5000, 20_000, seed=seed)
    assert check(profiles, ns, _documents(), runtimes=("native",)) == []


def test_generator_is_seeded_and_reads_the_vocabulary():
    docs = _documents()
    a = CorpusProfileGenerator(docs, seed=5).batch(50)
    assert a == CorpusProfileGenerator(docs, seed=5).batch(50)
    assert a != CorpusProfileGenerator(docs, seed=6).batch(50)
    g = CorpusProfileGenerator(docs, seed=1)
    assert "ns0" in g.namespaces and len(g.nodes) > 100
    for c in CONSTRUCTS:  # every construct is what it says
        p = g.generate(c)
        mark = {"or": " or ", "not": "not(", "contains": "(", "tail": ("/@", "/text()"),
                "position": "]", "nested": "[", "value": "=", "path": "/"}[c]
        assert any(m in p for m in ((mark,) if isinstance(mark, str) else mark)), (c, p)
    only_or = CorpusProfileGenerator(docs, mix={"or": 1}, seed=1).batch(20)
    assert all(" or " in p for p in only_or)
    with pytest.raises(ValueError):
        CorpusProfileGenerator(docs, mix={"xor": 1})


def test_or_is_filed_as_alternatives_by_their_values():
    """A profile with ``or`` is filed in the C matcher once per branch, each under
    its own value, and still reported once; a later position keeps it whole."""
    e = Engine()
    e.add("p", "/a/b[@x = '1' or @y = '2' or c = 'z']")
    e.add("q", "/a/b[@x = '1' or @y = '2'][2]")
    assert e._native.queries() == 4
    assert e.match(b"<a><b y='2'/><b x='1'/></a>") == {"p", "q"}
    assert e.match(b"<a><b/><b y='2'/></a>") == {"p"}
    assert e.match(b"<a><b><c>z</c></b></a>") == {"p"}
    assert e.match(b"<a><b x='2'/></a>") == frozenset()
    e.remove("p")
    assert e._native.queries() == 1 and e.match(b"<a><b x='1'/><b y='2'/></a>") == {"q"}


@pytest.mark.parametrize("xml", [
    "<a x='über'>ab<b>cd</b>e<!--c-->fg<![CDATA[hé€]]>ij</a>",
    "<a><b>xxab</b><b>cdyy</b><c y='ab cd'/></a>",
    "<a>ab\ncd <b x='𝄞𝄞𝄞x'>éé</b>é</a>",
])
def test_contains_filed_by_trigrams_agrees_with_lxml(xml, monkeypatch):
    """contains / starts-with with a literal of three or more characters are filed
    under the literal's trigrams, which the C side marks over the whole text (a
    string-value crosses elements, comments and CDATA) and each attribute value."""
    lits = ["abc", "bcd", "bcde", "efg", "fgh", "é€i", "hé€ij", "dyy", "b cd", "über", "𝄞𝄞x",
            "𝄞x", "cdé", "ab\ncd", "d é", "ééé", "ijk", "xxa"]
    profiles = {}
    for i, lit in enumerate(lits):
        for j, (fn, arg) in enumerate([("contains", "."), ("contains", "text()"),
                                       ("starts-with", "."), ("contains", "@x"),
                                       ("contains", "b"), ("starts-with", "@y")]):
            profiles[f"{i}-{j}"] = f"//*[{fn}({arg}, '{lit}')]"
    plain = Engine()
    plain.add_many(profiles)
    monkeypatch.setattr("yfilter.native.FILE_TRIGRAMS", True)
    e = Engine()
    e.add_many(profiles)
    assert e.stats()["native_alternatives"] == len(profiles)
    assert e.stats()["native_values"] > plain.stats()["native_values"] + 15  # trigrams filed
    assert plain.match(xml.encode()) == e.match(xml.encode())
    assert disagreements(e, profiles, xml.encode()) == []
    assert e.match(xml.encode())  # something matched


def test_positions_filed_by_the_siblings_they_need():
    """[n], [position() = n], >= and > need n children of one name (of the previous
    step's name on the child axis, of any parent on //): filed under that count."""
    docs = [b"<a><b/><b x='1'/><c><b/><b/><b/></c></a>",
            b"<r><a><b/></a><a><b/><b/></a></r>",
            b"<a>" + b"<b/>" * 12 + b"<c/>" * 20 + b"<d/><e/><f/><g/><h/><i/><j/><k/><l/><m/><n/>"
            b"<o/><p/><q/><s/><t/><u/><v/><w/><b/></a>"]
    profiles = {}
    for i, pos in enumerate(["[1]", "[2]", "[3]", "[4]", "[9]", "[12]", "[13]", "[position() = 2]",
                             "[position() >= 3]", "[position() > 1]", "[position() > 2.5]",
                             "[@x][1]", "[@x][2]", "[position() = 2.5]", "[position() < 3]"]):
        for j, path in enumerate(["/a/b", "//b", "/*/b", "/a/c/b", "//a/b", "/r/a/b"]):
            profiles[f"{i}-{j}"] = path + pos
    e = Engine()
    e.add_many(profiles)
    for xml in docs:
        assert disagreements(e, profiles, xml) == []
