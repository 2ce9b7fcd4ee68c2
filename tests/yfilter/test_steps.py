"""Transformation steps: each step on hand-checked trees, their errors, composition and
the sharing of a common prefix of steps across profiles within one message."""

import pytest
from lxml import etree

from yfilter import Engine, ProfileError
from yfilter.steps import common_prefix, make_step

NS = {"n": "urn:n"}


def apply(name: str, args: list[str], xml: str, engine: Engine | None = None) -> list[bytes]:
    """The step on a copy of ``xml``'s root, through a transformation profile (so that
    ``project`` runs on the engine's operators)."""
    e = engine or Engine(NS)
    quoted = ('"' + a.replace('"', '""') + '"' for a in args)
    call = f"{name}({', '.join(quoted)})"
    e.add("t", f"for $r in $msg/* return <out>{{$r => {call}}}</out>")
    out = e.run(xml.encode()).get("t", [])
    return [r[len(b"<out>"):-len(b"</out>")] for r in out]


@pytest.mark.parametrize("name, args, xml, result", [
    ("drop", ["media", "comment()"], "<b>x<media>m</media>y<!--c--><p>z</p>w</b>",
     b"<b>xy<p>z</p>w</b>"),
    ("drop", ["p"], "<b><p>1</p><q><p>2</p>t</q></b>", b"<b><q>t</q></b>"),
    ("drop", ["b"], "<b><p/></b>", b""),  # the projected element itself goes
    ("drop", ["n:p", "processing-instruction()"], "<b xmlns:n='urn:n'><n:p/><?pi x?><p/></b>",
     b"<b><p/></b>"),  # a declaration nothing uses any more goes too
    ("rename", ["hl1", "title"], "<b><hl1 a='1'>h</hl1><x><hl1/></x></b>",
     b'<b><title a="1">h</title><x><title/></x></b>'),
    ("rename", ["b", "c"], "<b>t</b>", b"<c>t</c>"),
    ("table_to_list", [], "<b>pre<table border='1'><caption>c</caption><thead><tr><th>h1</th>"
     "<th>h2</th></tr></thead><tr><td>a<em>!</em></td><td>b</td></tr></table>post</b>",
     b"<b>pre<ul><li>h1 | h2</li><li>a<em>!</em> | b</li></ul>post</b>"),
    ("table_to_list", [], "<table><tr><td><table><tr><td>in</td></tr></table></td></tr></table>",
     b"<ul><li><ul><li>in</li></ul></li></ul>"),
    ("project", ["head/title", ".//em"],
     "<b a='1'>t<head x='2'>u<title>T</title><meta/></head><p>v<em>e</em></p></b>",
     b'<b a="1"><head x="2"><title>T</title></head><p><em>e</em></p></b>'),
    ("project", ["p[@k = '2']"], "<b><p k='1'>1</p><p k='2'>2</p></b>", b'<b><p k="2">2</p></b>'),
    ("project", ["nothing"], "<b>t<p/></b>", b"<b/>"),
    ("project", ["."], "<b>t<p/></b>", b"<b>t<p/></b>"),
])
def test_step(name, args, xml, result):
    assert apply(name, args, xml) == [result]


def test_project_paths_with_nested_predicates_use_the_engine_joins():
    assert apply("project", ["p[em/@x = '1']"], "<b><p><em x='2'/></p><p><em x='1'/>k</p></b>") \
        == [b'<b><p><em x="1"/>k</p></b>']


@pytest.mark.parametrize("name, args, message", [
    ("drop", [], "drop() needs at least one name at column 1"),
    ("drop", [("a b", 7)], "'a b' is not an element name at column 7"),
    ("drop", [("q:a", 7)], "undeclared namespace prefix 'q' at column 7"),
    ("rename", [("a", 8)], 'rename() takes two names: rename("old", "new") at column 1'),
    ("rename", [("a", 8), ("n:b", 13)],
     "rename(): the new name must be an unprefixed name, not 'n:b' at column 13"),
    ("table_to_list", [("x", 15)], "table_to_list() takes no arguments at column 1"),
    ("project", [], "project() needs at least one path at column 1"),
    ("project", [("a/@b", 9)],
     "project() keeps elements: a trailing /@a or /text() is not allowed at column 9"),
    ("project", [("a[", 9)], "expected an expression, found end of profile at column 11"),
    ("project", [("a#", 9)], "unexpected character '#' at column 10"),
    ("upper", [], "unknown transformation step 'upper()' (drop, rename, table_to_list, "
                  "project) at column 1"),
])
def test_bad_steps(name, args, message):
    with pytest.raises(ProfileError) as info:
        make_step(name, args, NS, 1)
    assert str(info.value) == message


def test_keys_and_common_prefix():
    project = make_step("project", [("p", 1), ('q[@a = "x"]', 1)], {}, 1)
    assert project.key == 'project("p", "q[@a = ""x""]")'
    a = [make_step("drop", [("media", 1)], {}, 1), make_step("table_to_list", [], {}, 1)]
    b = [make_step("drop", [("media", 1)], {}, 1), make_step("rename", [("a", 1), ("b", 1)],
                                                               {}, 1)]
    assert [s.key for s in common_prefix([a, b])] == ['drop("media")']
    assert common_prefix([a, b[1:]]) == () and common_prefix([]) == ()


def test_steps_compose_in_order():
    xml = "<b><table><tr><td>x</td></tr></table><hl1>h</hl1></b>"
    e = Engine()
    e.add("t", 'for $r in $msg/b return <o>{$r => table_to_list() => rename("li", "item") '
               '=> project("ul")}</o>')
    assert e.run(xml.encode()) == {"t": [b"<o><b><ul><item>x</item></ul></b></o>"]}


def test_a_common_prefix_of_steps_runs_once_per_element_and_message():
    doc = b"<b><media/><table><tr><td>x</td></tr></table><hl1>h</hl1></b>"
    e = Engine()
    e.add("one", 'for $r in $msg/b return <o>{$r => drop("media") => table_to_list()}</o>')
    e.add("two", 'for $r in $msg/b return <o>{$r => drop("media") => rename("hl1", "t")}</o>')
    session = e.start(doc)
    out = e.run(doc, session)
    assert out == {"one": [b"<o><b><ul><li>x</li></ul><hl1>h</hl1></b></o>"],
                   "two": [b"<o><b><table><tr><td>x</td></tr></table><t>h</t></b></o>"]}
    assert sorted(k for _, k in session.frags) == [
        'drop("media")', 'drop("media") => rename("hl1", "t")',
        'drop("media") => table_to_list()']  # the shared first step ran once


def test_steps_leave_the_message_alone():
    doc = b"<b><media/><p>x</p></b>"
    e = Engine()
    e.add("t", 'for $r in $msg/b return <o>{$r => drop("media")}{$r}</o>')
    assert e.run(doc) == {"t": [b"<o><b><p>x</p></b><b><media/><p>x</p></b></o>"]}


def test_a_step_applies_to_detached_elements_directly():
    el = etree.XML("<b><hl1/></b>")
    assert [etree.tostring(x) for x in make_step("rename", [("hl1", 1), ("t", 1)], {}, 1)
            .apply([el], None)] == [b"<b><t/></b>"]


def test_two_profiles_of_one_text_keep_their_project_step_when_one_goes():
    """Regression: ``project()`` compiled its paths into the engine on the step object that
    every profile parsed from the same text shares; removing one profile released them
    for the other, whose results then lost what ``project()`` keeps."""
    from yfilter import Engine

    text = 'for $n in $msg/r return <r>{$n/a => project("b")}</r>'
    e = Engine()
    e.add("1", text)
    e.add("2", text)
    e.remove("1")
    assert e.run(b"<r><a><b/><c/></a></r>") == {"2": [b"<r><a><b/></a></r>"]}
