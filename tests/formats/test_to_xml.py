"""``Message.to_xml`` writes from the columns what lxml writes for ``to_element``, byte for byte."""

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from formats.message import Message
from yfilter.generators import DocGenerator, Schema

NAMES = st.sampled_from(["a", "b", "c-d", "e.f", "g_h", "\u00e9t\u00e9"])
ATTRS = st.sampled_from(["a", "b", "c-d", "{http://www.w3.org/XML/1998/namespace}lang"])
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


def _lxml(m: Message) -> bytes:
    return etree.tostring(m.to_element(), encoding="utf-8")


@st.composite
def messages(draw):
    """Random element tables: names, attributes, texts and tails with any characters."""
    n = draw(st.integers(1, 8))
    depths = [1] + [0] * (n - 1)
    for i in range(1, n):
        depths[i] = draw(st.integers(2, depths[i - 1] + 1))
    attrs = [draw(st.dictionaries(ATTRS, TEXT, max_size=3)) for _ in range(n)]
    texts = [draw(TEXT) for _ in range(n)]
    tails = [""] + [draw(TEXT) for _ in range(n - 1)]
    tags = [draw(NAMES) for _ in range(n)]
    from formats.message import tree_parents

    parents = tree_parents(depths)
    ends = [i + 1 for i in range(n)]
    for i in range(n - 1, 0, -1):
        ends[parents[i]] = max(ends[parents[i]], ends[i])
    return Message(tags, depths, attrs, texts, tails, ends, parents, [{} for _ in range(n)])


@settings(max_examples=400, deadline=None)
@given(messages())
def test_random_tables_serialize_as_lxml_does(m):
    try:
        expected = _lxml(m)
    except Exception:  # lxml refuses a character: so must to_xml
        try:
            m.to_xml()
        except Exception:
            return
        raise AssertionError("to_xml wrote what lxml refuses")
    assert m.to_xml() == expected


def test_corpus_and_generated_messages_serialize_as_lxml_does(corpus_files):
    docs = [p.read_bytes() for p in corpus_files]
    docs += [DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=s).generate() for s in range(100)]
    docs += [b"<a x='1&amp;2' y='&quot;q&quot;' z='a\nb\tc'>t&lt;x&gt;&amp;<b/>tail<c>x</c>\r</a>",
             b"<a>\xc3\xa9<b xml:lang='fr'/></a>", b"<r><!--c-->x<?pi?>y</r>", b"<a xmlns='u'><b/></a>"]
    fast = 0
    for doc in docs:
        m = Message.from_xml(doc)
        fast += m._fast_xml() is not None
        assert m.to_xml() == _lxml(m), doc[:80]
    assert fast > len(docs) * 0.75  # most messages declare no namespace (xml:lang needs none)
