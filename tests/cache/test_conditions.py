"""Condition.parse: what the cache reasons about, what it refuses (naming the construct
and the column), and XPath's semantics where they differ from the thesis' relational ones."""

from __future__ import annotations

import pytest
from lxml import etree

from cache import CacheError, Condition, match_type
from cache.errors import ConditionError, ConditionSyntaxError, ConditionTooComplexError, UnsupportedConstructError


def test_the_contract_example():
    q = Condition.parse("@year >= 1700 and @year <= 1900 and contains(@artist, 'Gogh')")
    c = Condition.parse("@year <= 1800")
    assert match_type(q, c) == "overlapping"
    assert match_type(c, c) == "exact"
    assert match_type("@year <= 1750", c) == "containing"
    assert match_type("@year <= 1900", c) == "contained"
    assert match_type("@year > 1800", c) == "disjoint"


@pytest.mark.parametrize("text, construct, column", [
    ("@a = 1 and position() = 2", "position()", 12),
    ("2", "a position [n]", 1),
    ("starts-with(@title, 'Gogh')", "starts-with()", 1),
    ("@a = 1 or head[@x = 'y']/@z = 2", "a predicate inside a path", 15),
    ("@a = 1 or .//hl1 = 'x'", "the descendant axis '//'", 12),
    ("*/@x = 'y'", "the wildcard '*'", 1),
    ("xml:lang = 'de'", "a namespaced name", 1),
    ("@a = '[x]' and contains('abc', @b)", "contains() of a literal", 16),
    ("contains(@a, @b)", "contains() with a path as its second argument", 1),
])
def test_refused_constructs_name_the_construct_and_the_column(text, construct, column):
    with pytest.raises(UnsupportedConstructError) as err:
        Condition.parse(text)
    assert err.value.construct == construct and err.value.column == column
    assert construct in str(err.value) and f"column {column}" in str(err.value)
    assert isinstance(err.value, CacheError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("text, column", [("@a = ", 6), ("@a = 1 and", 11), ("@a = 'x", 6), ("", 1),
                                          ("@a = 1] | /b[@c", 9), ("@a = 1][@b = 2", 7), ("@a = 1]/b[@c", 7)])
def test_syntax_errors_name_the_column_in_the_condition(text, column):
    with pytest.raises(ConditionSyntaxError) as err:
        Condition.parse(text)
    assert err.value.column == column and isinstance(err.value, ConditionError)


def test_too_complex_is_refused():
    text = " and ".join(f"(@a{i} = 1 or @b{i} = 1)" for i in range(10))
    with pytest.raises(ConditionTooComplexError):
        Condition.parse(text)


def holds(condition: str, xml: str) -> bool:
    return bool(etree.fromstring(xml).xpath(f"boolean(/x[{condition}])"))


@pytest.mark.parametrize("condition, xml", [
    ("not(@a = 'v')", "<x/>"),                       # absent: not(=) holds, != does not
    ("@a != 5", "<x a='abc'/>"),                     # NaN != 5 is true
    ("not(@a < 5)", "<x a='abc'/>"),                 # NaN: not(<) holds, >= does not
    ("@a = 5", "<x a=' 5.0 '/>"),                    # numbers compare by value
    ("hl1 = 'a' and hl1 = 'b'", "<x><hl1>a</hl1><hl1>b</hl1></x>"),    # existential, two values
    ("hl1 != 'a' and hl1 = 'a'", "<x><hl1>a</hl1><hl1>b</hl1></x>"),
    ("not(contains(hl1, 'b')) and hl1 = 'b'", "<x><hl1>a</hl1><hl1>b</hl1></x>"),  # contains reads the first only
    ("contains(@a, '')", "<x/>"),
])
def test_xpath_semantics_the_cache_keeps(condition, xml):
    assert holds(condition, xml)
    assert Condition.parse(condition).dnf != ()          # the cache must not call it unsatisfiable


@pytest.mark.parametrize("condition", ["@a = 'v' and not(@a)", "@a < 'abc'", "not(contains(@a, ''))",
                                       "@a = 'x' and @a = 5", "@a = 'v' and @a != 'v'", "not(.)"])
def test_unsatisfiable_conditions_have_no_conjunction(condition):
    assert Condition.parse(condition).dnf == ()
    assert str(Condition.parse(condition)) == "not(.)"


def test_text_round_trips_and_is_canonical():
    c = Condition.parse("1700 <= @year and @year <= 1900 and @year <= 2000")
    assert str(c) == "@year >= 1700 and @year <= 1900"
    assert Condition.parse(str(c)) == c
    assert str(Condition.parse(".")) == "."
    assert str(Condition.parse("@a = 1 or @b = 2")) == "@a = 1 or @b = 2"


def test_parts_are_disjoint_conjunctions():
    c = Condition.parse("@a = 1 or @b = 2")
    assert [" and ".join(lit.text() for lit in p) for p in c.parts] == ["@a = 1", "@b = 2 and not(@a = 1)"]


def test_not_a_string():
    with pytest.raises(ConditionSyntaxError):
        Condition.parse(3)
