"""Differential tests: the engine against lxml evaluating every profile one by one.

Profiles counted here: 4 x 5,000 = 20,000 generated profiles on generated NITF
documents (each batch on 5 documents), 150 on each of the 52 corpus documents
(profiles from each document's own vocabulary), and the hypothesis test's examples.
With ``ONYX_YFILTER_FULL=1`` every corpus document gets 20,000 profiles too (several
minutes; not part of ``make test``). Zero disagreements allowed; any found becomes a
named case in test_semantics.py.
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from broker.config import CORPUS_DIR
from tests.yfilter.oracle import disagreements
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

FULL = os.environ.get("ONYX_YFILTER_FULL") == "1"
GENERATED_BATCHES = 4
GENERATED_PROFILES = 5000
GENERATED_DOCS = 5
CORPUS_PROFILES = 20_000 if FULL else 150


@pytest.mark.parametrize("seed", range(GENERATED_BATCHES))
def test_generated_profiles_on_generated_documents(seed):
    schema = Schema.nitf()
    gen = ProfileGenerator(schema, depth=5, p_star=0.2, p_desc=0.3, n_preds=(0, 2),
                           n_nested=seed % 2, rich=0.9, seed=seed)
    profiles = {str(i): p for i, p in enumerate(gen.batch(GENERATED_PROFILES))}
    engine = Engine()
    for pid, text in profiles.items():
        engine.add(pid, text)
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=100 + seed)
    matched = 0
    for _ in range(GENERATED_DOCS):
        xml = docs.generate()
        assert disagreements(engine, profiles, xml) == []
        matched += len(engine.match(xml))
    assert matched > GENERATED_DOCS * 50  # the test is not vacuous


def _corpus():
    if not CORPUS_DIR.is_dir():
        return []
    return sorted(CORPUS_DIR.glob("*.xml"))


@pytest.mark.skipif(not _corpus(), reason=f"corpus not found at {CORPUS_DIR}")
@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_corpus_document_with_profiles_from_its_vocabulary(path: Path):
    xml = path.read_bytes()
    schema = Schema.from_documents([etree.fromstring(xml)])
    gen = ProfileGenerator(schema, depth=4, p_star=0.15, p_desc=0.3, n_preds=(0, 2),
                           n_nested=1, rich=0.7, distinct=False, seed=len(xml))
    profiles = {str(i): p for i, p in enumerate(gen.batch(CORPUS_PROFILES))}
    engine = Engine(namespaces=schema.namespaces)
    for pid, text in profiles.items():
        engine.add(pid, text)
    assert disagreements(engine, profiles, xml, schema.namespaces) == []


# -- hypothesis: tiny vocabularies, so that everything collides ------------------

NS = {"n": "urn:n"}
_TAGS = ["a", "b", "c", "n:a"]
_VALUES = ["1", "2", "a", " 1 ", "1e1", "", "1.0", "-1", "ab"]


@st.composite
def documents(draw, depth=0):
    tag = draw(st.sampled_from(_TAGS))
    attrs = draw(st.dictionaries(st.sampled_from(["x", "y", "n:x"]),
                                 st.sampled_from(_VALUES), max_size=2))
    attr_text = "".join(f' {k}="{v}"' for k, v in attrs.items())
    parts = []
    n_children = draw(st.integers(0, 3 if depth < 3 else 0))
    for _ in range(n_children + 1):
        kind = draw(st.sampled_from(["text", "text", "none", "comment", "cdata"]))
        if kind == "text":
            parts.append(draw(st.sampled_from(_VALUES[:-1] + ["x y"])))
        elif kind == "comment":
            parts.append("<!--c-->")
        elif kind == "cdata":
            parts.append("<![CDATA[1]]>")
        if len(parts) < 2 * n_children + 1 and n_children:
            parts.append(draw(documents(depth + 1)))
        n_children -= 1
    body = "".join(p for p in parts if p is not None)
    if depth == 0:
        return f'<{tag} xmlns:n="urn:n"{attr_text}>{body}</{tag}>'
    return f"<{tag}{attr_text}>{body}</{tag}>"


_LIT = st.sampled_from(["'1'", "'a'", "1", "2", "'1.0'", "' 1 '", "-1", "'1e1'", "''", "10"])
_OP = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
_REL = st.sampled_from([".", "text()", "@x", "@y", "@n:x", "b", "b/@x", ".//c", "*/text()",
                        "b[1]", "*[2]/@x", "a[@x]", "n:a", ".//*[@y]/@x", "c[b]"])
_NAME = st.sampled_from(["a", "b", "c", "*", "n:a"])


def _preds():
    base = st.one_of(
        st.builds(lambda r, o, lit: f"{r} {o} {lit}", _REL, _OP, _LIT),
        st.builds(lambda lit, o, r: f"{lit} {o} {r}", _LIT, _OP, _REL),
        _REL,
        st.integers(1, 3).map(str),
        st.builds(lambda o, n: f"position() {o} {n}", _OP, st.integers(0, 3)),
        st.builds(lambda f, r, lit: f"{f}({r}, {lit})",
                  st.sampled_from(["contains", "starts-with"]),
                  st.sampled_from([".", "text()", "@x", "b", "b/@x"]),
                  st.sampled_from(["'1'", "'a'", "''", "' '"])),
    )
    return st.recursive(base, lambda p: st.one_of(
        p.map(lambda x: f"not({x})" if not x.isdigit() else f"not(position() = {x})"),
        st.builds(lambda a, b: f"({a}) and ({b})", p, p),
        st.builds(lambda a, b: f"({a}) or ({b})", p, p),
    ).map(lambda x: x.replace("(1)", "(position() = 1)").replace("(2)", "(position() = 2)")
          .replace("(3)", "(position() = 3)")), max_leaves=3)


_STEP = st.builds(lambda axis, name, preds: axis + name + "".join(f"[{p}]" for p in preds),
                  st.sampled_from(["/", "//"]), _NAME, st.lists(_preds(), max_size=2))
PROFILES = st.builds(lambda steps, tail: "".join(steps) + tail,
                     st.lists(_STEP, min_size=1, max_size=3),
                     st.sampled_from(["", "", "", "/@x", "/text()"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), profiles=st.lists(PROFILES, min_size=8, max_size=8))
def test_hypothesis_profiles_on_hypothesis_documents(doc, profiles):
    engine = Engine(namespaces=NS)
    named = {str(i): p for i, p in enumerate(profiles)}
    for pid, text in named.items():
        engine.add(pid, text)
    assert disagreements(engine, named, doc.encode(), NS) == []
