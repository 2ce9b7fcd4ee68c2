"""Properties of match-type and of condition texts, checked with hypothesis against lxml
over a fixed pool of random items: whatever match-type answers is true of the items, and
the text of a parsed condition (and of each of its disjoint parts) selects exactly what
the original text selects."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from cache import Condition, match_type
from cache.conjunct import text
from tests.cache.test_differential import OPS, SUBS, WORDS, random_item

POOL = [etree.fromstring(random_item(random.Random(n))) for n in range(400)]

atoms = st.one_of(
    st.builds(lambda n, op, v: f"@{n} {op} {v}", st.sampled_from("ab"), st.sampled_from(OPS), st.integers(-2, 4)),
    st.builds(lambda n, op, w: f"@{n} {op} '{w}'", st.sampled_from("st"), st.sampled_from(["=", "!="]),
              st.sampled_from(WORDS)),
    st.builds(lambda n, w: f"contains(@{n}, '{w}')", st.sampled_from("st"), st.sampled_from(SUBS)),
    st.builds(lambda n: f"@{n}", st.sampled_from("abst")),
    st.builds(lambda op, v: f"c {op} {v}", st.sampled_from(OPS), st.integers(0, 3)),
    st.builds(lambda w: f"contains(c, '{w}')", st.sampled_from(SUBS)),
)
conditions = st.recursive(atoms, lambda inner: st.one_of(
    st.builds(lambda x: f"not({x})", inner),
    st.builds(lambda x, y: f"({x} and {y})", inner, inner),
    st.builds(lambda x, y: f"({x} or {y})", inner, inner)), max_leaves=6)


def selected(condition: str) -> frozenset[int]:
    xpath = etree.XPath(f"boolean(/item[{condition}])")
    return frozenset(i for i, root in enumerate(POOL) if xpath(root))


@settings(max_examples=300, deadline=None)
@given(conditions, conditions)
def test_match_type_is_true_of_the_items(q, c):
    kind = match_type(q, c)
    sq, sc = selected(q), selected(c)
    if kind == "disjoint":
        assert not sq & sc
    elif kind == "exact":
        assert sq == sc
    elif kind == "containing":
        assert sq <= sc
    elif kind == "contained":
        assert sc <= sq
    else:
        assert kind == "overlapping"


@settings(max_examples=300, deadline=None)
@given(conditions)
def test_a_parsed_condition_selects_what_its_text_selects(c):
    parsed = Condition.parse(c)
    assert selected(str(parsed)) == selected(c)
    parts = [selected(text(p)) for p in parsed.parts]
    assert frozenset().union(*parts) == selected(c)
    assert sum(len(p) for p in parts) == len(selected(c))        # pairwise disjoint
