"""The C matcher (yfilter.native) on its own terms: how it reads lxml's tree, what it
hands back to the Python runtime, and its tables as profiles come and go. Its answers
are checked against lxml by every differential test (tests/yfilter/oracle.py)."""

import pytest
from lxml import etree

from formats import Message
from tests.yfilter.oracle import disagreements, lxml_matches
from yfilter import Engine
from yfilter._matcher import Matcher
from yfilter.compiler import Registry, compile_path
from yfilter.document import parse_xml
from yfilter.native import NativeIndex
from yfilter.nfa import Rarity
from yfilter.parser import parse


def _index(*profiles: str) -> NativeIndex:
    index = NativeIndex(Rarity())
    for i, text in enumerate(profiles):
        index.add(compile_path(parse(text, {"n": "urn:n"}), Registry(), {}), {f"p{i}"})
    return index


def _assert_as_lxml(profile: str, docs: list[bytes]) -> None:
    """The C matcher answers as lxml does for profile on each of docs, read from the
    tree and from the decoded Message's columns."""
    index = _index(profile)
    for xml in docs:
        expected = lxml_matches({"p0": profile}, xml)
        assert index.match(etree.fromstring(xml)) == expected, xml
        assert index.match_message(Message.from_xml(xml)) == expected, xml


@pytest.mark.parametrize("profile, xml, expected", [
    # a comment or processing instruction ends a text node; CDATA joins the text
    ("/a[text() = 'xy']", b"<a>x<!--c-->y</a>", False),
    ("/a[text() = 'y']", b"<a>x<?p q?>y</a>", True),
    ("/a[text() = 'xyz']", b"<a>x<![CDATA[y]]>z</a>", True),
    ("/a[. = 'xyz']", b"<a>x<!--c--><b>y</b>z</a>", True),
    # string-values longer than 255 bytes are looked up too
    ("/a[b = '" + "x" * 300 + "']", b"<a><b>" + b"x" * 100 + b"<c>" + b"x" * 200 + b"</c></b></a>",
     True),
    ("/a[b = '" + "x" * 300 + "']", b"<a><b>" + b"x" * 299 + b"</b></a>", False),
    ("/a[text() = '']", b"<a><![CDATA[]]></a>", True),
    # names as lxml spells them: {uri}local, attributes too
    ("/n:a[@n:x = '1']", b"<a xmlns='urn:n' xmlns:m='urn:n' m:x='1'/>", True),
    ("/n:a[@x = '1']", b"<m:a xmlns:m='urn:n' m:x='1'/>", False),
    # number(): ASCII digits only (libxml2), so an Arabic-Indic three is NaN
    ("/a[@x > 1]", "<a x='\u0663'/>".encode(), False),
    ("/a[@x > 1]", b"<a x=' 3 '/>", True),
])
def test_reads_the_tree_as_xpath_does(profile, xml, expected):
    root = etree.fromstring(xml)
    assert lxml_matches({"p0": profile}, xml, {"n": "urn:n"}) == ({"p0"} if expected else set())
    assert _index(profile).match(root) == ({"p0"} if expected else frozenset())
    python = Engine({"n": "urn:n"}, native=False)  # and the reference runtime agrees
    python.add("p0", profile)
    assert python.match(xml) == ({"p0"} if expected else frozenset())


def test_entity_in_an_attribute_goes_to_the_python_runtime():
    # An internal entity used only in an attribute: lxml expands it there, the C
    # reader does not model entity nodes, so it declines and the engine falls back.
    xml = b"<!DOCTYPE a [<!ENTITY e 'SF'>]><a x='&e;'><b/></a>"
    profiles = {"sf": "/a[@x = 'SF']/b", "other": "/a[@x = 'LA']"}
    assert _index(*profiles.values()).match(parse_xml(xml)) is None
    e = Engine()
    for pid, text in profiles.items():
        e.add(pid, text)
    assert e.match(xml) == {"sf"}
    assert disagreements(e, profiles, xml) == []


def test_native_and_python_runtimes_agree():
    profiles = {"1": "//b[@x = '1'][c]", "2": "/a/b[2]", "3": "/a[contains(b, 'y')]",
                "4": "//*[starts-with(@x, '1')]", "5": "/a/b[not(@x)]", "6": "//c"}
    xml = b"<a><b x='1'><c/></b><b>y</b><b x='12'/></a>"
    results = []
    for native in (True, False):
        e = Engine(native=native)
        for pid, text in profiles.items():
            e.add(pid, text)
        results.append(e.match(xml))
    # contains(b, 'y') reads the first b only, whose string-value is empty
    assert results[0] == results[1] == lxml_matches(profiles, xml) == {"1", "2", "4", "5", "6"}


def test_ids_follow_adds_and_removes():
    xml = b"<a x='1'><b/></a>"
    e = Engine()
    e.add("p", "/a[@x = '1']/b")
    e.add("q", "/a[@x = '1']/b")  # the same profile: one query, two ids
    assert e.match(xml) == {"p", "q"}
    e.remove("p")
    assert e.match(xml) == {"q"}
    e.add("q", "/a[@x = '2']/b")  # replaced
    assert e.match(xml) == frozenset()
    e.add("r", "/a[@x = '1']/b")
    assert e.match(xml) == {"r"}


def test_tables_are_rebuilt_when_most_profiles_went():
    e = Engine()
    for i in range(3000):
        e.add(str(i), f"/a[@x = '{i}']")
    for i in range(2990):
        e.remove(str(i))
    stats = e.stats()
    assert stats["native_queries"] == 10
    assert stats["native_discarded"] < 1024  # rebuilt: most discarded ones are gone
    assert e.match(b"<a x='2995'/>") == {"2995"}
    assert e.match(b"<a x='5'/>") == frozenset()


def test_the_count_of_live_alternatives_follows_adds_and_discards():
    # Kept as a count (a discard at 100k profiles once summed over all of them: 12 ms
    # per routing delta); it must stay what the sum would say, or rebuilds come too late.
    index = _index(*[f"/a[@x = '{i}']/b" for i in range(50)], "/c")
    ids = [ids for _, ids in index._profiles.values()]
    for held in ids[:30]:
        index.discard(held)
    assert index._live == sum(len(alts) for alts, _ in index._profiles.values()) == 21


def test_queries_filed_again_by_what_messages_hold():
    # /a[@x = '1']/b is filed under x=1 (the value the profiles make look rarest);
    # after 64 messages, all with x=1 and none with <b>, the matcher files it under b
    # instead, so the messages stop scanning it, and it still matches and goes.
    e = Engine()
    e.add("p", "/a[@x = '1']/b")
    e.add("q", "/a[@x = '1'][@y = '2']")
    for _ in range(64):
        assert e.match(b"<a x='1' y='2'><c/></a>") == {"q"}
    scanned = e.stats()["native_filed_hits"]
    assert e.match(b"<a x='1' y='2'><c/></a>") == {"q"}
    assert e.stats()["native_filed_hits"] == scanned + 1  # q only: p is under b now
    assert e.match(b"<a x='1'><b/></a>") == {"p"}
    e.remove("p")
    assert e.match(b"<a x='1'><b/></a>") == frozenset()
    e.add("p", "/a[@x = '1']/b")
    assert e.match(b"<a x='1'><b/></a>") == {"p"}


def test_profiles_added_later_are_filed_again_once_a_quarter_changed():
    # After the first filing by what messages hold (message 64), profiles added later
    # sit under the compiler's key until more than a quarter of the profiles have
    # changed; then the next message files them all again, with no rebuild on add.
    e = Engine()
    e.add("q", "/a[@x = '1'][@y = '2']")
    doc = b"<a x='1' y='2'><c/></a>"
    for _ in range(64):
        assert e.match(doc) == {"q"}
    e.add("p1", "/a[@x = '1']/b")
    e.add("p2", "/a[@x = '1']/d")
    scanned = e.stats()["native_filed_hits"]
    assert e.match(doc) == {"q"}
    assert e.stats()["native_filed_hits"] == scanned + 1  # p1, p2 are under b, d now
    assert e.match(b"<a x='1'><b/><d/></a>") == {"p1", "p2"}


def test_removed_profiles_stop_being_scanned_once_a_quarter_changed():
    # A removed profile is dropped from the results at once; once more than a quarter
    # of the profiles have gone, the next message files the rest again without it.
    e = Engine()
    for k in range(8):
        e.add(f"p{k}", f"/a[@x = '1']/c[@n = '{k}']")
    doc = b"<a x='1'>" + b"".join(b"<c n='%d'/>" % k for k in range(8)) + b"</a>"
    for _ in range(64):
        assert e.match(doc) == {f"p{k}" for k in range(8)}
    scanned = e.stats()["native_filed_hits"]
    assert e.match(doc) == {f"p{k}" for k in range(8)}
    assert e.stats()["native_filed_hits"] == scanned + 8
    for k in range(3):
        e.remove(f"p{k}")
    scanned = e.stats()["native_filed_hits"]
    assert e.match(doc) == {f"p{k}" for k in range(3, 8)}
    assert e.stats()["native_filed_hits"] == scanned + 5


def test_reported_ids_are_copies_made_together_and_stay_exact():
    # At the 64th message the matcher swaps every id it reports for an equal string
    # made then, one after another (fewer cache misses when reporting): results stay
    # the same, for profiles registered under several ids and for later changes.
    e = Engine()
    ids = ["".join(("p", str(k))) for k in range(3)]  # built at run time: not interned
    e.add(ids[0], "/a[@x = '1']")
    e.add(ids[1], "/a[@x = '1']")
    e.add(ids[2], "/a[@x = '2']")
    e.add("\u00e94", "/a[@x = '2']")  # not ASCII: copied in its own kind
    doc = b"<a x='1'/>"
    for _ in range(63):
        assert any(i is ids[0] for i in e.match(doc))
    found = e.match(doc)
    assert found == {"p0", "p1"}
    assert not any(i is ids[0] or i is ids[1] for i in found)  # copies now
    e.add("p3", "/a[@x = '1']")
    e.remove("p0")
    assert e.match(doc) == {"p1", "p3"}
    assert e.match(b"<a x='2'/>") == {"p2", "\u00e94"}


def test_blocks_laid_out_again_in_list_order_keep_every_answer():
    # At the 64th message the matcher files the profiles again and copies their
    # blocks in the order of the lists (base values, string-values, unkeyed), dropping
    # removed ones: every answer stays lxml's, before and after, and removing or adding
    # afterwards still takes effect.
    profiles = {f"v{k}": f"/a[@x = '{k % 5}']/b[@y = '{k % 3}']" for k in range(30)}
    profiles |= {f"s{k}": f"//b[. = 'w{k % 4}']" for k in range(8)}
    profiles |= {f"n{k}": f"/*[{'@x' if k % 2 else 'b'}]/*[position() = {k % 3 + 1}]"
                 for k in range(6)}
    e = Engine()
    for pid, text in profiles.items():
        e.add(pid, text)
    for pid in ("v3", "s1", "n2"):
        e.remove(pid)
        del profiles[pid]
    docs = [f"<a x='{i % 5}'><b y='{i % 3}'>w{i % 4}</b><b y='{(i + 1) % 3}'/></a>".encode()
            for i in range(70)]
    for xml in docs:
        assert e.match(xml) == lxml_matches(profiles, xml)
    assert e.stats()["native_messages"] >= 64
    e.remove("v0")
    del profiles["v0"]
    e.add("v0", "/a[@x = '0']/b[@y = '2']")
    profiles["v0"] = "/a[@x = '0']/b[@y = '2']"
    for xml in docs[:15]:
        assert e.match(xml) == lxml_matches(profiles, xml)
    assert any(e.match(xml) for xml in docs)


def test_a_child_step_needs_its_parent_child_pair():
    # a, b and x=1 are all in the message, but no <b> is a child of an <a>: the
    # need test already rules the profile out, its path is never checked.
    e = Engine()
    e.add("p", "/a/b[@x = '1']")
    assert e.match(b"<a><c><b x='1'/></c></a>") == frozenset()
    assert e.stats()["native_need_met"] == 0
    assert e.match(b"<a><b x='1'/></a>") == {"p"}


# Many <a> and <b> elements, few holding each value: block_matches starts from the
# elements holding the value its profile requires on a step (its anchor).
_ANCHOR_DOCS = [
    b"<r x='1'><a><b/></a><a x='1'/><a><b/></a><a>t<c><b/></c></a></r>",
    b"<r><a x='1'><b/></a><a><b/></a><a><b/></a><a>t<b/>u</a></r>",
    b"<r><s x='1'/><a><b x='1'/></a><a><b/></a><a><b/>t</a></r>",
]


@pytest.mark.parametrize("profile", [
    "//a[@x = '1']/*",             # the anchored element needs a child too
    "//a[@x = '1']/b",
    "/r[@x = '1']/a",              # anchored at the root: an inner x=1 is no root
    "/r/a[@x = '1']",
    "//a[text() = 'u']/*",         # the second text node of mixed content
    "//a[text() = 'u']/b",
    "//a[text() = 't']//b",        # a descendant below the anchor
    "//*[@x = '1']/b",
    "//a[not(@x = '1')]/b",        # under not(): no anchor
    "//a[@x = '1' or @x = '2']/b",  # under or: no anchor
    "//r/*[@x = '1'][b]",
    "/r/a[b]/b[@x = '1']",
])
def test_anchored_at_a_value_as_xpath_says(profile):
    _assert_as_lxml(profile, _ANCHOR_DOCS)


_STAR_DOCS = [
    b"<r><a/><a><b/></a></r>",                             # b: one level below a
    b"<r><a><b><c/></b></a><a/></r>",                      # two levels below the first a
    b"<r><a x='1'><b><c><d/></c></b></a><a x='2'><b/></a></r>",
    b"<r><s><a><b/></a></s><a><b><c/></b></a></r>",
]


@pytest.mark.parametrize("profile", [
    # steps after the last named one that are only '*' without predicates: a subtree
    # that many levels high holds them, on either axis
    "//a/*", "//a/*/*", "//a/*/*/*", "//a//*/*", "//a/*//*/*", "/r/a/*/*",
    "/r/*", "/r/*/*/*/*", "/r/*/*/*/*/*",
    "//a[@x = '1']/*/*/*",          # after a value anchor
    "//a[@x = '2']/*/*",
    "//a[@x = '2']/*",
    "//a/*[b]",                     # a guarded '*': not a height test
    "//s/a/*",
])
def test_star_steps_after_the_last_name_as_xpath_says(profile):
    _assert_as_lxml(profile, _STAR_DOCS)


# One or two <a>, more elements holding the value of a '*' step after it: a check
# still starts from those (up to BELOW_ANCHOR_BIAS times as many as the tag's).
_BELOW_DOCS = [
    b"<r><a><b x='1'/><c/></a><b x='1'/><c x='1'><d x='1'/></c></r>",
    b"<r><a><b><c x='1'><e/></c></b></a><a/><c x='1'/><d x='1'/><e x='1'/></r>",
    b"<r><b x='1'/><a>t<b x='2'>t</b></a><c x='1'>t</c><d>t</d><e>t<f/></e></r>",
]


@pytest.mark.parametrize("profile", [
    "//a/*[@x = '1']", "//a//*[@x = '1']", "//a/*/*[@x = '1']", "//a//*[@x = '1']/*",
    "/r/a/*[@x = '1']", "//a/*[@x = '1'][c]", "//a//*[text() = 't']", "//a/*[text() = 't']",
    "//a/*[@x = '1']/*[@x = '1']",
])
def test_anchored_below_the_last_name_as_xpath_says(profile):
    _assert_as_lxml(profile, _BELOW_DOCS)


def test_a_first_step_shared_by_profiles_is_checked_on_each_message_root():
    # first steps on the child axis are checked once per message and shared: each
    # profile still gets its own answer, and each message its own (the first step of
    # p0 and p3 fails on the first root, holds on the second)
    profiles = ["/r[not(@x = '1')]/a", "/r[@x = '1']/b", "/r[@x = '1']/a", "/*[not(b)]/a"]
    index = _index(*profiles)
    ids = {f"p{i}": text for i, text in enumerate(profiles)}
    seen = set()
    for xml in [b"<r x='1'><a/><b/></r>", b"<r x='2'><a/></r>", b"<r x='1'><a/></r>",
                b"<s><a/><b/></s>"]:
        expected = lxml_matches(ids, xml)
        assert index.match(etree.fromstring(xml)) == expected, xml
        seen |= expected
    assert seen == set(ids)


def test_stats_count_the_work_per_message():
    e = Engine()
    e.add("a", "/a[@x = '1']")
    e.add("b", "/a[@x = '2']")
    e.match(b"<a x='1'/>")
    s = e.stats()
    assert (s["native_messages"], s["native_need_met"], s["native_matched"]) == (1, 1, 1)


def test_match_wants_an_lxml_element():
    with pytest.raises(TypeError, match="lxml element"):
        _index("/a[@x = '1']").match("<a/>")


def test_a_query_needing_a_value_never_interned_or_filed_apart_is_refused():
    m = Matcher(etree._Element)
    a = m.intern("a")
    with pytest.raises(ValueError, match="not interned"):
        m.add_query([0, a, -1], [a, a + 7], [], 1, a, ("p",))
    with pytest.raises(ValueError, match="not interned"):
        m.add_query([0, a, -1], [a], [-3], 1, a, ("p",))
    b = m.intern("b")
    with pytest.raises(ValueError, match="not one of the values"):  # filed under b, needs a
        m.add_query([0, a, -1], [a], [], 1, b, ("p",))
    assert m.add_query([0, a, -1], [a], [], 1, a, ("p",)) == 0
    # filed under its second value, which the scan then takes as held: a <b> without
    # an <a> is no candidate (the need test reads the other value)
    assert m.add_query([0, a, -1, 1, b, -1], [a, b], [], 1, b, ("q",)) == 1  # /a//b
    assert m.match(etree.fromstring(b"<b/>")) == frozenset()
    assert m.stats()["need_met"] == 0
    assert m.match(etree.fromstring(b"<a><b/></a>")) == {"p", "q"}
    assert m.stats()["need_met"] == 2


def _predicate_engine(n: int) -> Engine:
    e = Engine()
    for i in range(n):
        e.add(f"p{i}", f"/nitf[@v = '{i}']/head")
    e.add("plain", "/nitf/head")
    return e


@pytest.mark.parametrize("profile, xml, expected", [
    # text nodes: an element's text, then its children's tails
    ("/a[text() = 'z']", b"<a>x<b>y</b>z</a>", True),
    ("/a[text() = 'y']", b"<a>x<b>y</b>z</a>", False),
    ("/a/b[text() = 'y']", b"<a>x<b>y</b>z</a>", True),
    # string-values: text, then each child's string-value and tail
    ("/a[. = 'xyzw']", b"<a>x<b>y<c>z</c></b>w</a>", True),
    ("/a/b[. = 'yz']", b"<a>x<b>y<c>z</c></b>w</a>", True),
    ("/a[contains(., 'yz')]", b"<a>x<b>y<c>z</c></b>w</a>", True),
    ("/a[. = '']", b"<a><b/></a>", True),
    # a comment splits no text in a Message: it keeps none
    ("/a[text() = 'xy']", b"<a>x<!--c-->y</a>", True),
    # names and attributes as Clark names, atoms of name and value
    ("/n:a[@n:x = '1']/n:b", b"<a xmlns='urn:n' xmlns:m='urn:n' m:x='1'><b/></a>", True),
    ("/n:a[@x = '1']", b"<m:a xmlns:m='urn:n' m:x='1'/>", False),
    ("/a[@x = '1'][@y = '2']/b[@x = '2']", b"<a y='2' x='1'><b x='2'/></a>", True),
    ("/a[@x > 1]", b"<a x=' 3 '/>", True),
    # the tree from the depths: children, descendants, siblings' subtrees
    ("/a/b/c", b"<a><b><d/></b><b><c/></b></a>", True),
    ("/a/b[c]/d", b"<a><b><c/></b><b><d/></b></a>", False),
    ("//b[.//c = '1']", b"<a><b><d><c>1</c></d></b><b/></a>", True),
    ("/a/*[2][@x = '2']", b"<a><b x='1'/>t<c x='2'/></a>", True),
])
def test_reads_a_decoded_message_as_xpath_reads_its_xml(profile, xml, expected):
    """A formats.Message is read from its columns (no tree built) with the semantics of
    lxml on the Message's own XML."""
    msg = Message.from_xml(xml)
    want = {"p0"} if expected else set()
    assert lxml_matches({"p0": profile}, msg.to_xml(), {"n": "urn:n"}) == want
    index = _index(profile)
    assert index.match_message(msg) == want == index.match(etree.fromstring(msg.to_xml()))


def test_a_decoded_message_goes_to_the_c_matcher_on_its_columns():
    """What a broker holds is a formats.Message: the C matcher reads its columns, with
    the same answers as on the bytes, however few the profiles with predicates."""
    xml = b"<nitf v='3'><head/></nitf>"
    for n in (1, 100):
        e = _predicate_engine(n)
        before = e.stats()["native_messages"]
        expected = {"p0", "plain"} if n == 1 else {"p3", "plain"}
        assert e.match(Message.from_xml(xml if n > 1 else b"<nitf v='0'><head/></nitf>")) \
            == expected
        assert e.stats()["native_messages"] == before + 1


def test_a_message_xml_cannot_hold_is_still_matched_in_c():
    """A table from a corrupted decode (a control character in a text) could not be
    written as XML; the C matcher reads it all the same (no tree is built)."""
    e = _predicate_engine(8)
    e.add("t", "/nitf/head[text() = 'a\x01b']")
    msg = Message.from_xml(b"<nitf v='5'><head>x</head></nitf>")
    msg.texts[1] = "a\x01b"
    before = e.stats()["native_messages"]
    assert e.match(msg) == {"p5", "plain", "t"}
    assert e.stats()["native_messages"] == before + 1


def _columns(msg: Message) -> list:
    return [msg.tags, msg.depths, msg.texts, msg.tails, msg.attr_counts, msg.attr_names,
            msg.attr_values]


@pytest.mark.parametrize("column, value", [
    (1, [1, 3]),              # depths that make no tree: a jump down two levels
    (1, [1, 1]),              # a second root
    (1, [2, 3]),              # a root below the top
    (0, ["nitf", 7]),         # a name that is no str
    (2, ["\ud800", ""]),      # a lone surrogate: no UTF-8
    (3, [""]),                # columns of different lengths
    (4, [0, 3]),              # more attributes than the columns hold
    (4, [0, 0]),              # fewer
])
def test_columns_that_make_no_message_go_to_the_python_runtime(column, value):
    """match_table declines (None) what the reader does not model; the engine then
    answers with the Python runtime, as it does for such a table."""
    index = _index("/nitf[@v = '5']/head")
    cols = _columns(Message.from_xml(b"<nitf v='5'><head>x</head></nitf>"))
    assert index._m.match_table(*cols) == {"p0"}
    cols[column] = value
    assert index._m.match_table(*cols) is None


def test_a_name_repeated_on_one_element_means_its_last_value():
    """Only a corrupted decode repeats a name on one element; the Message's maps keep
    its last value, and so do the C reader and the Python runtime."""
    e = _predicate_engine(8)
    msg = Message.from_xml(b"<nitf v='5'><head/></nitf>")
    msg.attr_counts, msg.attr_names, msg.attr_values = [2, 0], ["v", "v"], ["6", "5"]
    before = e.stats()["native_messages"]
    assert e.match(msg) == e.match(msg, e.start(msg)) == {"p5", "plain"}
    assert e.stats()["native_messages"] == before + 2  # a session does not change runtime
    python = Engine(runtime="python")
    python.add_many({pid: e.profile(pid) for pid in e.ids()})
    assert python.match(msg) == {"p5", "plain"}


def test_string_values_of_a_message_deeper_than_a_c_stack():
    """A decoded message may nest far deeper than XML parsers allow; its string-values
    are gathered without recursion: the root's is every text, then every tail."""
    n = 200_000
    msg = Message(tags=["a"] * n, depths=list(range(1, n + 1)), texts=["x"] * n,
                  tails=[""] + ["y"] * (n - 1))
    index = _index("/a[starts-with(., 'xxx')]", "/a[contains(., 'xy')]", "/a[contains(., 'yx')]")
    assert index.match_message(msg) == {"p0", "p1"}


def test_run_on_a_message_matches_in_c_and_navigates_only_for_transformations():
    xml = b'<nitf v="7"><head><title>T</title></head></nitf>'
    e = _predicate_engine(8)
    e.add("t", "for $h in $msg/nitf[@v = '7']/head return <r>{$h/title}</r>")
    expected = {"p7": [xml], "plain": [xml], "t": [b"<r><title>T</title></r>"]}
    before = e.stats()["native_messages"]
    assert e.run(Message.from_xml(xml)) == e.run(xml) == expected
    assert e.stats()["native_messages"] == before + 2
