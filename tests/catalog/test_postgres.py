"""The catalog, and the archive's SQL RI-tree, on a real PostgreSQL server (the session's)."""

from __future__ import annotations

import itertools

import pytest

from archive import RITree
from catalog import Backbone, LocalRepository
from catalog.document import FIGURE_1
from catalog.schema import FIGURE_1_SCHEMA

from tests.catalog.test_differential import run
from tests.catalog.test_worked_example import FIGURE_7_RULES, RULE_331

pytestmark = pytest.mark.postgres

_names = itertools.count()


@pytest.fixture
def database(postgres):
    return lambda role: postgres.create_database(f"t{next(_names)}_{role}")


def test_worked_example_on_postgres(database):
    mdp = Backbone(database("mdp"))
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("lmr-1", database("lmr"), backbone=mdp)
    lmr.subscribe(RULE_331.replace("c.serverHost contains 'uni-passau.de' and ", "") +
                  " and c.serverHost contains 'uni-passau.de'")
    assert mdp.atomic_rules() == [(k, t, g) for k, (t, g) in FIGURE_7_RULES.items()]
    mdp.register_document("doc.rdf", FIGURE_1)
    assert sorted((it, uri, rule) for _, it, uri, rule, _ in mdp.rows("ResultObjects")) == [
        (0, "doc.rdf#host", 3), (0, "doc.rdf#info", 1), (0, "doc.rdf#info", 2), (1, "doc.rdf#info", 4),
        (2, "doc.rdf#host", 5)]
    assert sorted(lmr.resources()) == ["doc.rdf#host", "doc.rdf#info"]
    assert lmr.query("search CycleProvider c register c where c.serverHost contains 'passau'") == {"doc.rdf#host"}
    mdp.register_document("doc.rdf", FIGURE_1.replace('cpu="600"', 'cpu="400"'))
    assert lmr.resources() == {}


def test_a_persistent_backbone_reopens_with_its_schema_rules_and_documents(database):
    url = database("mdp")
    mdp = Backbone(url)
    mdp.register_schema(FIGURE_1_SCHEMA)
    lmr = LocalRepository("lmr-1", backbone=mdp)
    lmr.subscribe("search CycleProvider c register c where c.serverInformation.cpu > 500")
    mdp.register_document("doc.rdf", FIGURE_1)
    mdp.engine.dispose()
    again = Backbone(url)
    assert again.atomic_rules() == mdp.atomic_rules() and again.schema.strong == {"serverInformation"}
    assert len(again.rows("FilterData")) == 7


@pytest.mark.parametrize("seed", range(3))
def test_randomized_differential_on_postgres(database, seed):
    stats = run(1000 + seed, batches=6, urls=lambda role: database(role), lmrs=2, rules_per_lmr=4)
    assert stats["checks"] > 0


def test_archive_ritree_on_postgres(postgres):
    r = RITree(url=postgres.create_database("ritree"))
    stored = []
    for i in range(60):
        lo = (i * 37) % 500
        hi = None if i % 13 == 0 else lo + 1 + (i * 11) % 90
        r.insert(lo, hi, f"p{i}")
        stored.append((lo, hi, f"p{i}"))
    r.delete(*stored.pop(5))
    for lo, hi in ((0, 10), (100, 250), (480, None), (37, 38)):
        want = {i for a, b, i in stored if (hi is None or a < hi) and (b is None or lo < b)}
        assert r.intersecting(lo, hi) == want
    assert r.check() == sum(1 for _, b, _ in stored if b is not None)
