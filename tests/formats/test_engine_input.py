"""The engine on decoded binary payloads: a ``stream`` / ``stream-dict`` message
(whose attribute maps, ends and parents are built on first use) matches exactly the
profiles the same message parsed from text matches (``Message.from_xml``, every
column built at once). That oracle is checked against lxml profile by profile in
tests/yfilter (a message keeps no comments and no empty CDATA text node, so it is
compared with lxml on the message's own XML). Zero disagreements allowed."""

from __future__ import annotations

import pytest

import formats
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

from .conftest import CORPUS, corpus_params

PROFILES = 1500
DOCS = 16


def _engine(schema: Schema, seed: int, n: int) -> Engine:
    gen = ProfileGenerator(schema, depth=5, p_star=0.2, p_desc=0.3, n_preds=(0, 2),
                           n_nested=seed % 2, rich=0.9, seed=seed)
    engine = Engine(namespaces=schema.namespaces)
    for i, text in enumerate(gen.batch(n)):
        engine.add(f"q{i}", text)
    return engine


def _disagreements(engine: Engine, xml: bytes, dictionary: formats.Dictionary) -> list[str]:
    expected = engine.match(formats.Message.from_xml(xml))
    out = []
    for name in ("stream", "stream-dict", "stream-dict+zstd-dict"):
        got = engine.match(formats.decode(name, formats.encode(name, xml, dictionary=dictionary),
                                          dictionary=dictionary))
        if got != expected:
            out.append(f"{name}: missing {sorted(expected - got)[:5]}, extra {sorted(got - expected)[:5]}")
    return out


@pytest.mark.parametrize("seed", range(2))
def test_generated_documents_match_as_their_text(seed) -> None:
    schema = Schema.nitf()
    engine = _engine(schema, seed, PROFILES)
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=200 + seed)
    sample = [docs.generate() for _ in range(DOCS)]
    dictionary = formats.learn_dictionary("nitf", sample[: DOCS // 2])
    matched = 0
    for xml in sample:
        assert _disagreements(engine, xml, dictionary) == []
        matched += len(engine.match(formats.Message.from_xml(xml)))
    assert matched > DOCS  # the comparison is not vacuous


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_documents_match_as_their_text(path, corpus_dictionary) -> None:
    xml = path.read_bytes()
    schema = Schema.from_documents([formats.message.parse_xml(xml)])
    engine = _engine(schema, CORPUS.index(path), 150)
    assert engine.match(formats.Message.from_xml(xml)), "the profiles come from the document's vocabulary: some match"
    assert _disagreements(engine, xml, corpus_dictionary) == []


def test_transformation_results_on_decoded_messages() -> None:
    """``Engine.run`` with transformation profiles (which navigate the table's
    ends and texts) gives the same documents on a decoded ``stream`` message."""
    from yfilter.generators.flwr import FlwrGenerator

    schema = Schema.nitf()
    engine = Engine()
    for i, spec in enumerate(FlwrGenerator(schema, seed=5).specs(300)):
        engine.add(f"t{i}", spec.text())
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=5)
    results = 0
    for _ in range(3):
        xml = docs.generate()
        expected = engine.run(formats.Message.from_xml(xml))
        assert engine.run(formats.decode("stream", formats.encode("stream", xml))) == expected
        results += sum(map(len, expected.values()))
    assert results > 100  # not vacuous


def test_a_repeated_attribute_means_its_last_value_everywhere() -> None:
    """The encoder never repeats an attribute name on an element; a payload that
    does (hand-made here) keeps the last value for matching and for ``to_xml``."""
    import msgpack

    fields = [3, None, None, "a\x00b\x00x", bytes([0, 1, 1]), bytes([1, 2, 2]), "\x00t\x00\x00\x00u",
              bytes([0, 2, 0]), bytes([2, 2]), "1\x002", []]
    m = formats.decode("stream", msgpack.packb(fields))
    engine = Engine()
    engine.add("first", "/a/b[@x='1']")
    engine.add("last", "/a/b[@x='2']")
    engine.add("any", "//b[@x]")
    engine.add("text", "/a/b[text()='t']")
    assert engine.match(m) == {"last", "any", "text"} == engine.match(m.to_xml())
    assert m.attrs[1] == {"x": "2"}
