"""Pattern discovery over real profile texts, and what an occurrence model says."""

import math

import pytest

from partitioning.discovery import discover
from partitioning.errors import PartitioningError
from partitioning.occurrence import Combined, MessageStats, SchemaOccurrence, tier
from partitioning.predicates import Pattern, equalities
from yfilter.generators import DocGenerator, ProfileGenerator, Schema


@pytest.fixture(scope="module")
def population():
    gen = ProfileGenerator(Schema.nitf(), depth=5, p_star=0.1, p_desc=0.1, n_preds=(0, 2), n_nested=1, seed=3,
                           distinct=False)
    return {f"p{i}": equalities(gen.generate()) for i in range(3000)}


def test_discovery_from_generated_nitf_profiles_covers_every_profile_it_can(population):
    occ = SchemaOccurrence.from_schema(Schema.nitf())
    d = discover(population, occ)
    candidates = {s.pattern for s in d.candidates}
    chosen = {s.pattern for s in d.chosen}
    for pid, eqs in population.items():
        involved = {e.pattern for e in eqs}
        if involved & candidates:
            assert involved & chosen, pid  # every profile with a usable pattern involves a chosen one
        else:
            assert pid in d.dont_care
    assert set(d.dont_care) == {pid for pid, eqs in population.items() if not {e.pattern for e in eqs} & chosen}
    assert 0 < len(d.dont_care) < len(population)  # profiles without equalities exist in this workload
    assert all(s.distinct >= 2 for s in d.candidates)
    assert [s.coverage for s in d.candidates] == sorted((s.coverage for s in d.candidates), reverse=True)
    # At-most-once patterns are chosen before the others.
    tiers = [s.tier for s in d.chosen]
    assert tiers == sorted(tiers) and tiers[0] == 0


def test_greedy_takes_the_pattern_covering_most_uncovered_profiles():
    pop = {"a": equalities("/m[x/@v = 1][y/@v = 1]"), "b": equalities("/m[x/@v = 2][y/@v = 2]"),
           "c": equalities("/m[y/@v = 3][z/@v = 1]"), "d": equalities("/m[z/@v = 2]")}
    d = discover(pop)
    assert [str(s.pattern) for s in d.chosen] == ["/m/y/@v", "/m/z/@v"]
    assert d.dont_care == []


def test_a_single_valued_pattern_is_no_exclusiveness_pattern():
    pop = {f"p{i}": equalities("/m[x/@v = 'same']") for i in range(5)}
    d = discover(pop)
    assert d.chosen == [] and len(d.dont_care) == 5


def test_repeating_patterns_come_after_at_most_once_ones():
    occ = SchemaOccurrence.from_dtd("<!ELEMENT m (x*, y?)> <!ELEMENT x EMPTY> <!ELEMENT y EMPTY>")
    pop = {f"p{i}": equalities(f"/m[x/@v = {i}][y/@v = {i % 3}]") for i in range(30)}
    pop.update({f"q{i}": equalities(f"/m[x/@v = {i}]") for i in range(40)})
    d = discover(pop, occ)
    assert [(str(s.pattern), s.tier) for s in d.chosen] == [("/m/y/@v", 0), ("/m/x/@v", 2)]


def test_dtd_content_models():
    occ = SchemaOccurrence.from_dtd("""
        <!ELEMENT m (a?, (b | c), (b, d)?, e*, f+, g)> <!ELEMENT a EMPTY> <!ELEMENT b EMPTY>
        <!ELEMENT c (#PCDATA)> <!ELEMENT d (#PCDATA | a)*> <!ELEMENT e EMPTY> <!ELEMENT f EMPTY>
        <!ELEMENT g ANY>""")
    once = lambda p, t="@k": occ.at_most_once(Pattern(p, t))  # noqa: E731
    assert occ.children["m"]["b"] == 2 and math.isinf(occ.children["m"]["e"])
    assert once("/m/a") and once("/m/c", "text()") and once("/m/g") and once("/m")
    assert once("/m/b") is False and once("/m/e") is False and once("/m/f") is False
    assert once("/m/d", "text()") is False and once("/m/d") is True  # mixed content: several text nodes
    assert once("/m/g/x") is None and once("/m//a") is None and once("/*/a") is None
    assert once("/m/zz") is True  # not allowed there: never occurs
    with pytest.raises(PartitioningError, match="DTD"):
        SchemaOccurrence.from_dtd("<!ELEMENT m (a")


def test_message_statistics_count_occurrences_and_back_the_schema_up():
    docs = [DocGenerator(Schema.nitf(), seed=i, max_repeats=3).generate() for i in range(20)]
    stats = MessageStats(docs)
    assert stats.most(Pattern("/nitf/head/docdata", ".")) == 1
    assert stats.most(Pattern("/nitf//p", ".")) > 1
    assert stats.at_most_once(Pattern("/nitf//p", "text()")) is False
    assert MessageStats([]).at_most_once(Pattern("/nitf", ".")) is None
    ns = MessageStats([b"<a xmlns='urn:x'><b k='1'/><b k='2'/></a>"], {"p": "urn:x"})
    assert ns.most(Pattern("/{urn:x}a/{urn:x}b", "@k")) == 2
    both = Combined(SchemaOccurrence.from_schema(Schema.nitf()), stats)
    assert tier(both, Pattern("/nitf/head/docdata", "@x")) == 0  # from the schema
    assert tier(both, Pattern("/nitf//p", ".")) == 2  # the schema cannot tell; the messages can
    assert tier(None, Pattern("/nitf", ".")) == 1
