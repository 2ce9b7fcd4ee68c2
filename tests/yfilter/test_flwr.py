"""Transformation profiles (FLWR): the parser, the semantics on hand-checked cases,
ONYX's Q3 on the fishing NITF sample, and registration in the engine."""

from pathlib import Path

import pytest

from broker.config import CORPUS_DIR
from formats import Message
from tests.yfilter.flwr_oracle import c14n, lxml_results
from yfilter import Engine, ProfileError
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.generators.flwr import Elem, FlwrSpec, Proj

FISHING = CORPUS_DIR / "nitf-fishing.xml"
DATA = Path(__file__).parent / "data"

# ONYX's Q3, as the paper writes it (and tests/routing/test_figure6.py maps it): the
# articles of the "Tide Forecasts" series, as their title and body content.
Q3 = ('for $n in $msg/nitf where $n/head/docdata/series/@series.name = "Tide Forecasts" '
      "return <tides> {$n/head/title} {$n/body/body.content} </tides>")
Q3_SPEC = FlwrSpec(
    "$n", "/nitf", ("atom", "{p} = 'Tide Forecasts'", "head/docdata/series/@series.name"),
    Elem("tides", [], [[Proj("head/title", "element")],
                       [Proj("body/body.content", "element")]]))

# The same selection reshaped with the rest of the language: an attribute projection,
# a nested constructor over a text projection, and only the body's own paragraphs.
Q3_RESHAPED = """for $n in $msg/nitf
where $n/head/docdata/series/@series.name = "Tide Forecasts"
return <tide_forecast>
         {$n/head/docdata/evloc/@city}
         <title>{$n/body/body.head/hedline/hl1/text()}</title>
         {$n/body/body.content/p}
       </tide_forecast>"""
Q3_RESHAPED_RESULT = (
    b'<tide_forecast city="Norfolk"><title>Weather and Tide Updates for Norfolk</title>'
    b'<p xml:lang="en-US">The weather was superb today in Norfolk, Virginia. Made me want '
    b'to take\n\t\tout my boat, manufactured by the <org value="acm" idsrc="iptc.org">Acme '
    b'Boat Company</org>.</p>'
    b"<p>Tides in Norfolk are running normal today. This weeks article highlights many of"
    b"\n\t\tthis week's fishing issues, and also presents a reference table of tide times.</p>"
    b"<p>As can be seen from the table below, the shores of Oceanview again present the\n\t\t"
    b"brightest spots for fishermen and sandcastle-builders alike.</p>"
    b"<p>Based on these tide tables, I believe you can see that this weekend stands to be\n\t\t"
    b"an excellent one for small- or large-scale fishing exhibitions.</p>"
    b"<p>Happy fishing everybody!</p></tide_forecast>")


@pytest.mark.skipif(not FISHING.is_file(), reason=f"corpus not found at {CORPUS_DIR}")
@pytest.mark.parametrize("as_message", [False, True])
def test_onyx_q3_tide_forecasts_on_the_fishing_sample(as_message):
    """The exact output (data/onyx_q3_tides.xml, checked by hand against the sample:
    the title, then body.content copied whole; the spaces around the enclosed
    expressions are boundary whitespace and go)."""
    xml = FISHING.read_bytes()
    expected = (DATA / "onyx_q3_tides.xml").read_bytes()
    e = Engine()
    e.add("q3", Q3)
    e.add("other-series", Q3.replace("Tide Forecasts", "Stock Reports"))
    e.add("reshaped", Q3_RESHAPED)
    given = Message.from_xml(xml) if as_message else xml
    assert e.match(given) == frozenset({"q3", "reshaped"})
    assert e.run(given) == {"q3": [expected], "reshaped": [Q3_RESHAPED_RESULT]}
    assert [c14n(r) for r in lxml_results(Q3_SPEC, xml, {})] == [c14n(expected)]


DOC = (b"<nitf><head><pubdata edition.area='SF'/><title>T</title></head><body>"
       b"<p n='1'>one <em>a</em> two</p><p n='2'><p n='3'>in<!--c-->ner</p>tail</p>"
       b"<table><tr><td>x</td><td>y</td></tr></table></body></nitf>")


def run1(text: str, doc: bytes = DOC) -> list[bytes]:
    e = Engine()
    e.add("t", text)
    return e.run(doc).get("t", [])


@pytest.mark.parametrize("text, results", [
    # one result per binding, in document order (nested bindings both count)
    ("for $p in $msg//p return <x>{$p/@n}</x>",
     [b'<x n="1"/>', b'<x n="2"/>', b'<x n="3"/>']),
    # where filters bindings
    ("for $p in $msg//p where $p/@n > 1 and not($p/p) return <x>{$p/@n}</x>", [b'<x n="3"/>']),
    ("for $p in $msg//p where $p = 'one a two' return <x/>", [b"<x/>"]),
    # the for path's own predicates come before where (p[2] is among p siblings)
    ("for $p in $msg/nitf/body/p[2] where $p/p return <x>{$p/@n}</x>", [b'<x n="2"/>']),
    # boundary whitespace goes, other text stays; escapes and references
    ("for $h in $msg/nitf/head return <x>\n  {$h/title/text()}  <y> a&amp;b {{}} &#32;</y>\n</x>",
     [b"<x>T<y> a&amp;b {}  </y></x>"]),  # the space before &#32; is not boundary
    # text nodes of nested elements interleave in document order
    ("for $b in $msg/nitf/body return <x>{$b/p/text(), $b//p/text()}</x>",
     [b"<x>one  twotailone  twoinnertail</x>"]),
    # attribute value templates: values joined by single spaces
    ("for $b in $msg/nitf/body return <x all=\"[{$b//p/@n}] {$b/table//td}\"/>",
     [b'<x all="[1 2 3] x y"/>']),
    # several attributes of one name from one path: the first is kept
    ("for $b in $msg/nitf/body return <x>{$b//p/@n}</x>", [b'<x n="1"/>']),
    # elements are copied whole, comments included; nested constructors
    ("for $p in $msg//p[@n = '3'] return <x><y>{$p}</y></x>",
     [b'<x><y><p n="3">in<!--c-->ner</p></y></x>']),
    # XQuery string literals: doubled quotes and references
    ("for $p in $msg//p where $p/@n != 'it''s &amp;' return <x/>", [b"<x/>"] * 3),
    # no binding satisfies where: no result
    ("for $p in $msg//p where $p/@n = '9' return <x/>", []),
])
def test_semantics(text, results):
    assert run1(text) == results
    e = Engine()
    e.add("t", text)
    assert e.run(Message.from_xml(DOC)).get("t", []) == [
        r.replace(b"<!--c-->", b"") for r in results]  # a Message keeps no comments


def test_steps_in_a_projection():
    out = run1('for $b in $msg/nitf/body return <x>{$b => drop("p") => table_to_list()}</x>')
    assert out == [b"<x><body><ul><li>x | y</li></ul></body></x>"]


@pytest.mark.parametrize("text, message", [
    ("for $n in $msg/nitf", "expected 'return' after the for/where clauses at column 20"),
    ("for $n in $msg/nitf where return <r/>",
     "expected a condition after 'where', found 'return' at column 27"),
    ("for $n in $msg/nitf/@a return <r/>",
     "for binds elements: a trailing /@a or /text() is not allowed at column 11"),
    ("for $n in $msg/nitf, $m in $msg/x return <r/>",
     "only one for clause (one variable) is supported at column 20"),
    ("for $n in $msg/nitf let $x := 1 return <r/>", "unsupported clause 'let' at column 21"),
    ("for $n in $msg/nitf order by $n return <r/>", "unsupported clause 'order' at column 21"),
    ("for $n in $msg/nitf where head return <r/>",
     "a path here starts at $n (e.g. $n/head) at column 27"),
    ("for $n in $msg/nitf where $msg/nitf return <r/>",
     "absolute paths ($msg) are not allowed here; start the path at $n at column 27"),
    ("for $n in $msg/nitf where $m/head return <r/>",
     "unknown variable '$m' (the for clause binds $n) at column 27"),
    ("for $n in $msg/nitf where position() = 1 return <r/>",
     "position() has no context here (use it in a step predicate) at column 27"),
    ("for $n in $msg/nitf where $n/a = $n/b return <r/>",
     "comparing two paths (or position()) is not supported at column 27"),
    ("for $n in $msg/nitf where $n/a[$n/b] return <r/>",
     "variable '$n' is not allowed inside a predicate at column 32"),
    ("for $n in $msg/nitf return $n/body", "return builds one element: write an element "
     "constructor such as <r>{$n/...}</r> at column 28"),
    ("for $n in $msg/nitf return <r>{$n/body}</s>", "end tag </s> does not match <r> at column 40"),
    ("for $n in $msg/nitf return <r>{$n/body}", "element <r> is not closed at column 28"),
    ("for $n in $msg/nitf return <r>{/nitf/body}</r>",
     "absolute paths are not allowed inside return; start the path at $n at column 32"),
    ("for $n in $msg/nitf return <r>}</r>", "unmatched '}' (write '}}' for a brace) at column 31"),
    ("for $n in $msg/nitf return <r>{$n/x}{$n/@a}</r>", "in <r>, the attribute projection "
     "$n/@a comes after other content (attributes come first) at column 28"),
    ("for $n in $msg/nitf return <r a='1'>{$n/@a}</r>",
     "in <r>, attribute 'a' could be set twice at column 28"),
    ("for $n in $msg/nitf return <p:r/>",
     "namespace prefixes are not supported in constructors at column 29"),
    ("for $n in $msg/nitf return <r>&nbsp;</r>", "unknown entity '&nbsp;' (only the "
     "predefined entities and character references) at column 31"),
    ("for $n in $msg/nitf return <r>{$n/body => shout()}</r>", "unknown transformation step "
     "'shout()' (drop, rename, table_to_list, project) at column 43"),
    ("for $n in $msg/nitf return <r>{$n/@a => drop('x')}</r>",
     "transformation steps apply to elements, not to '@a' at column 32"),
    ("for $n in $msg/nitf return <r>{$n/body => project('/a')}</r>",
     "project() paths are relative to the projected element at column 52"),
    ("for $n in $msg/nitf (: c :) return <r/>",
     "XQuery comments '(: :)' are not supported at column 21"),
    ("for $n in $msg/nitf where $n/a = 'x&y' return <r/>", "'&' starts a reference (&amp; "
     "&lt; &gt; &quot; &apos; &#n;) and needs a ';' at column 36"),
])
def test_refuses_with_position_and_construct(text, message):
    with pytest.raises(ProfileError) as info:
        parse_flwr(text)
    assert str(info.value) == message


def test_where_becomes_the_last_predicate_of_the_for_path():
    q = parse_flwr("for $x in $msg//p[2] where $x/@a = 'v' or $x//em return <r/>")
    assert str(q.filter_path()) == "//p[2][@a = 'v' or .//em]"
    assert is_flwr("  for $x in /a return <r/>") and not is_flwr("/for")


def test_for_and_where_share_the_automaton_with_filters():
    e = Engine()
    e.add("f", "/nitf[head/pubdata/@edition.area = 'SF']")
    before = e.stats()
    e.add("t", "for $n in $msg/nitf where $n/head/pubdata/@edition.area = 'SF' "
               "return <r>{$n/head/title}</r>")
    after = e.stats()
    assert after["distinct_profiles"] == 1 and after["nfa_states"] == before["nfa_states"]
    assert e.match(DOC) == frozenset({"f", "t"})
    assert e.run(DOC) == {"f": [DOC], "t": [b"<r><title>T</title></r>"]}


def test_replace_remove_and_errors_leave_nothing_behind():
    e = Engine()
    base = e.stats()
    e.add("t", "for $n in $msg/nitf return <r>{$n/body/p[@n = '2']}</r>")
    e.add("t", "for $n in $msg/nitf return <r>{$n/head/title => project('.')}</r>")
    assert e.run(DOC) == {"t": [b"<r><title>T</title></r>"]}
    with pytest.raises(ProfileError):
        e.add("t", "for $n in $msg/nitf return <r>{$n/x}</q>")
    assert e.run(DOC) == {"t": [b"<r><title>T</title></r>"]}  # unchanged
    e.add("t", "/nitf/head")  # a transformation profile replaced by a filter
    assert e.run(DOC) == {"t": [DOC]}
    e.remove("t")
    assert e.stats() | {"dfa_flushes": 0, "rel_dfa_flushes": 0} == \
        base | {"dfa_flushes": 0, "rel_dfa_flushes": 0}


def test_return_paths_with_nested_predicates_register_their_joins():
    e = Engine()
    e.add("t", "for $b in $msg/nitf/body return <r>{$b/p[em]/@n}{$b/p[p/@n = '3']}</r>")
    assert e.stats()["nested_paths"] == 2
    assert e.run(DOC)["t"] == [b'<r n="1"><p n="2"><p n="3">in<!--c-->ner</p>tail</p></r>']
    e.remove("t")
    assert e.stats()["nested_paths"] == 0


def test_message_copies_keep_the_prefixes_of_the_text():
    """Regression (corpus, dpa.xml): an element in a default namespace whose ancestor
    also binds a prefix to that namespace kept its default declaration from text but
    took the prefix when copied from a decoded Message."""
    xml = (b'<m xmlns="urn:d" xmlns:h="urn:x"><e><s xmlns="urn:x"><b>t</b></s></e></m>')
    e = Engine({"d": "urn:d"})
    e.add("t", "for $e in $msg/d:m/d:e return <r>{$e}</r>")
    assert e.run(xml) == e.run(Message.from_xml(xml)) == {
        "t": [b'<r><e xmlns="urn:d"><s xmlns="urn:x"><b>t</b></s></e></r>']}


@pytest.mark.parametrize("text, path", [
    ("for $n in $msg/nitf return <r/>", "$msg/nitf "),
    ("for $n in $msg//a[b = 'where'] where $n/c return <r/>", "$msg//a[b = 'where'] "),
    ("for $n in\t$msg/a[@x='return']return <r/>", "$msg/a[@x='return']"),
])
def test_the_for_path_span_covers_exactly_the_binding_path(text, path):
    start, end = parse_flwr(text).span
    assert text[start:end] == path
