"""The profile parser: what it accepts (canonical forms) and how it refuses."""

import pytest

from yfilter import Engine, ProfileError
from yfilter.parser import parse


@pytest.mark.parametrize("text, canonical", [
    ("$msg/nitf", "/nitf"),
    ("$msg//hl1", "//hl1"),
    ("/nitf [ head / pubdata / @edition.area = 'SF' ]",
     "/nitf[head/pubdata/@edition.area = 'SF']"),
    ("/a/child::b", "/a/b"),
    ("//p[@x='a'][2]", "//p[@x = 'a'][2]"),
    ("/a[./b]", "/a[b]"),
    ("/a[.//b and not(c) or @d]", "/a[.//b and not(c) or @d]"),
    ('/a[@x = "it\'s"]', '/a[@x = "it\'s"]'),
    ("/a[contains(., 'v')][starts-with(@x, 'w')]", "/a[contains(., 'v')][starts-with(@x, 'w')]"),
    ("/a/b/@c", "/a/b/@c"),
    ("/a/text()", "/a/text()"),
    ("/a[position() = 2]", "/a[position() = 2]"),
    ("/a[-1.50 < @x]", "/a[-1.5 < @x]"),
])
def test_accepts(text, canonical):
    assert str(parse(text)) == canonical


@pytest.mark.parametrize("text, message", [
    ("/nitf/head/parent::x", "unsupported axis 'parent::' at column 12"),
    ("/a/ancestor::b", "unsupported axis 'ancestor::' at column 4"),
    ("/a/..", "unsupported step '..' inside a path at column 4"),
    ("/a[..]", "unsupported step '..' (parent axis) at column 4"),
    ("/a[", "expected an expression, found end of profile at column 4"),
    ("/a[@x='1'", "expected ']' closing the predicate, found end of profile at column 10"),
    ("/a[@x='1]", "unterminated string literal at column 7"),
    ("/a[last()]", "unsupported function 'last()' at column 4"),
    ("/a[count(b) = 1]", "unsupported function 'count()' at column 4"),
    ("/a/node()", "unsupported node test 'node()' at column 4"),
    ("/a | /b", "unsupported operator '|' (union) at column 4"),
    ("/a[@x + 1 = 2]", "unsupported operator '+' at column 7"),
    ("/a[2 and @x]", "a number is only a condition as a whole predicate ([n]) at column 4"),
    ("/a[@x = @y]", "comparing two paths (or position()) is not supported at column 4"),
    ("/a['v']", "a string literal is not a condition at column 4"),
    ("/a[position()]", "position() alone is not a condition (compare it) at column 4"),
    ("//@x", "unsupported step '//@' (use //*/@a or //*/text()) at column 1"),
    ("/a[/b]", "absolute paths are not allowed inside predicates at column 4"),
    ("a/b", "a profile is an absolute path starting with '/', '//' or '$msg', found 'a' "
            "at column 1"),
    ("$x/a", "unknown variable '$x' (only $msg) at column 1"),
    ("/p:a", "undeclared namespace prefix 'p' at column 2"),
    ("/a[@*]", "unsupported attribute wildcard '@*' at column 5"),
    ("/a[1e3]", "malformed number '1e3' at column 4"),
    ("/a#", "unexpected character '#' at column 3"),
    ("", "empty profile at column 1"),
    ("for $n in $msg/nitf return <x/>",
     "a transformation profile (for ... return) is not a path: parse it with "
     "yfilter.flwr.parse_flwr at column 1"),
])
def test_refuses_with_position_and_construct(text, message):
    with pytest.raises(ProfileError) as info:
        parse(text)
    assert str(info.value) == message
    assert info.value.column is not None


def test_profile_error_is_a_value_error_and_engine_stays_clean():
    e = Engine()
    with pytest.raises(ValueError):
        e.add("q", "/a[b[@x = ]]")
    assert len(e) == 0 and e.stats()["nfa_states"] == 0 and e.stats()["guards"] == 0


def test_identical_profiles_share_everything():
    e = Engine()
    e.add("a", "/nitf[ head/pubdata/@edition.area='SF' ]//hl1")
    one = e.stats()
    e.add("b", "$msg/nitf[head/pubdata/@edition.area = \"SF\"]//hl1")
    e.add("c", "/nitf['SF' = head/pubdata/@edition.area]//hl1")
    assert e.stats() | {"profiles": 1} == one
    assert e.stats()["distinct_profiles"] == 1
