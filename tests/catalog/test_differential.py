"""Randomized differential test of the whole catalog: random schemas' documents, random rules of
every kind, random inserts, updates and deletes in batches; after every batch every repository
holds exactly what brute force says its rules (plus the strong-reference closure) select from the
backbone's current documents, with the backbone's current content, and nothing else (so the
garbage is collected); local queries agree with brute force on the repository's own data."""

from __future__ import annotations

import random

import pytest

from catalog import Backbone, LocalRepository, RuleError
from catalog.document import parse_document

from tests.catalog.brute import evaluate, strong_closure
from tests.catalog.randomized import Rules, World, random_schema, schema_xml


def run(seed: int, batches: int, urls=lambda name: None, lmrs: int = 2, rules_per_lmr: int = 5) -> dict:
    rnd = random.Random(seed)
    props = random_schema(rnd)
    world = World(rnd, props)
    mdp = Backbone(urls("mdp"), batch_size=10**6)
    mdp.register_schema(schema_xml(props))
    repos = [LocalRepository(f"lmr-{i}", urls(f"lmr{i}"), backbone=mdp) for i in range(lmrs)]
    gen = Rules(rnd, world)
    texts: dict[int, str] = {}      # every subscription ever made (rule(N) may outlive N)
    types: dict[int, str] = {}
    live: dict[str, set[int]] = {r.name: set() for r in repos}
    docs: dict[str, dict] = {}
    stats = {"rules": 0, "refused": 0, "batches": 0, "checks": 0, "held": 0, "shipped_along": 0}

    def subscribe(repo: LocalRepository) -> None:
        text = gen.rule({n: texts[n] for s in live.values() for n in s}, types)
        before = mdp.atomic_rules()
        try:
            sub = repo.subscribe(text)
        except RuleError:
            stats["refused"] += 1
            assert mdp.atomic_rules() == before, f"a refused rule left atomic rules behind: {text}"
            return
        texts[sub] = text
        types[sub] = dict(mdp.rows("Subscriptions", "sub_id", "type"))[sub]
        live[repo.name].add(sub)
        stats["rules"] += 1

    def check() -> None:
        store = {u: r for res in docs.values() for u, r in res.items()}
        for repo in repos:
            matched = set()
            for sub in live[repo.name]:
                matched |= evaluate(texts[sub], store, mdp.schema, texts)
            held = strong_closure(matched, store, mdp.schema)
            want = {u: store[u].as_dict() for u in sorted(held)}
            got = repo.resources()
            stats["held"] += len(want)
            stats["shipped_along"] += len(held - matched)
            assert got == want, (f"seed {seed}: {repo.name} holds {sorted(set(got) - set(want))} too many, "
                                 f"misses {sorted(set(want) - set(got))}, or stale content; rules "
                                 f"{[texts[s] for s in sorted(live[repo.name])]}")
            local = {u: store[u] for u in held}
            probe = gen.rule({n: texts[n] for n in live[repo.name]}, types)
            try:
                answer = repo.query(probe)
            except RuleError:
                continue
            assert answer == evaluate(probe, store, mdp.schema, texts, domain=local), f"seed {seed}: query {probe}"
            stats["checks"] += 1

    for repo in repos:
        for _ in range(rules_per_lmr):
            subscribe(repo)
    for _ in range(batches):
        for _ in range(rnd.randint(1, 4)):
            d = rnd.randrange(world.docs)
            uri = f"d{d}.rdf"
            if uri in docs and rnd.random() < 0.3:
                mdp.delete_document(uri)
                del docs[uri]
            else:
                xml = world.document(d)
                mdp.register_document(uri, xml)
                docs[uri] = parse_document(uri, xml, mdp.schema)
        mdp.flush()
        stats["batches"] += 1
        check()
        if rnd.random() < 0.3:
            repo = rnd.choice(repos)
            if live[repo.name] and rnd.random() < 0.5:
                sub = rnd.choice(sorted(live[repo.name]))
                repo.unsubscribe(sub)
                live[repo.name].discard(sub)
            else:
                subscribe(repo)
            check()
    # with every subscription gone, nothing is held and no atomic rule is left
    for repo in repos:
        for sub in sorted(live[repo.name]):
            repo.unsubscribe(sub)
        assert repo.resources() == {}
    assert mdp.atomic_rules() == [] and mdp.rows("Materialized") == [] and mdp.rows("RuleGroups") == []
    return stats


@pytest.mark.parametrize("seed", range(24))
def test_repositories_hold_what_brute_force_says_after_every_batch(seed):
    stats = run(seed, batches=20, lmrs=3, rules_per_lmr=6)
    assert stats["rules"] >= 10 and stats["checks"] > 0 and stats["held"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 140))
def test_long_random_runs(seed):
    run(seed, batches=60, lmrs=3, rules_per_lmr=10)
