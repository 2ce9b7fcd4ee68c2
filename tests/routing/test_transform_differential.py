"""Randomized differential test of incremental transformation (routing.incremental through
routing.node, run by the simulator): transformation profiles sharing and not sharing for
paths, where conjuncts and leading binding steps, some filters, placed at random on
overlays of 8-20 brokers; messages from the news corpus and the NITF generator, alone and
batched in ``<batched-nitf>``. Every host's results equal the centralized engine's on the
whole message, for every (profile, message) pair."""

import random
from pathlib import Path

import pytest
from lxml import etree

import routing.incremental
from routing.simulate import Config, Simulation
from yfilter import validate
from yfilter.generators import DocGenerator, Schema

NEWS = Path("/work/shared/corpus/news")

FORS = ["$msg/batched-nitf/nitf", "$msg/nitf", "$msg/batched-nitf/nitf", "$msg/nitf[head/title]"]
CONJUNCTS = ["$n/head/title", "$n/body/body.head/hedline", "$n/head/docdata/doc-id",
             'contains($n/head/title, "a")', '$n/head/tobject/tobject.subject/@tobject.subject.type = "Finance"',
             '$n//tobject.subject/@tobject.subject.type = "Sport"', "$n//p", "not($n/body/body.end)",
             '$n/head/meta/@name = "source"', "$n/body/body.content/p"]
STEPS = ["delete node $c//media", "delete node $c/head/docdata", 'rename node $c//p as "para"',
         'replace value of node $c/head/title with "x"', "delete node $c//byline",
         'rename node $c//hedline as "hl"', "delete node $c/body/body.head/dateline"]
RETURNS = ["<r>{$n/head/title}</r>", "<r>{$n/body/body.content/p}{$n/head/docdata/doc-id/@id-string}</r>",
           "<r><h>{$n/body/body.head/hedline/text()}</h></r>", "<r>{$n/body}</r>"]
FILTERS = ["/nitf/head/title", "//tobject.subject[@tobject.subject.type = 'Finance']", "/batched-nitf/nitf/body",
           "/nitf[body/body.content/p]"]


SAFE_STEPS = ["delete node $c//media", "delete node $c//byline", 'rename node $c//p as "para"',
              "delete node $c/body/body.head/dateline"]
SAFE_WHERE = ['$n/head/meta/@name = "source"', '$n/head/tobject/tobject.subject/@tobject.subject.type = "Finance"',
              "$n/head/title", "$n/head/docdata/doc-id"]


class Profiles:
    """What the simulator's subscribers register (in place of its ``Interests``).
    Subscribers near each other (one home broker) mostly share a for path, a where
    conjunct and, for those that return the binding updated, the first steps, so that
    links below them have a transformation query that drops bindings and runs steps;
    some draw theirs at random, and a few register filters."""

    def __init__(self, seed: int) -> None:
        self.rng, self.seed = random.Random(seed), seed

    def generate(self, home: str) -> str:
        rng = self.rng
        local = random.Random(f"{self.seed}:{home}")
        home_for = local.choice(FORS)
        home_where = local.choice(SAFE_WHERE)
        home_steps = local.sample(SAFE_STEPS, local.randrange(1, 3))
        copies = local.random() < 0.6
        while True:
            if rng.random() < 0.02:
                return rng.choice(FILTERS)
            path = home_for if rng.random() < 0.97 else rng.choice(FORS)
            where = [home_where] if rng.random() < 0.9 else []
            where += rng.sample(CONJUNCTS, rng.randrange(2)) if rng.random() < 0.4 else []
            where_text = f" where {' and '.join(dict.fromkeys(where))}" if where else ""
            if copies and rng.random() < 0.9:
                steps = list(home_steps) if rng.random() < 0.9 else []
                steps += [s for s in rng.sample(STEPS, rng.randrange(3)) if s not in steps]
                if not steps:
                    continue
                ret = f"copy $c := $n modify ({', '.join(steps)}) return $c"
            else:
                ret = rng.choice(RETURNS)
            text = f"for $n in {path}{where_text} return {ret}"
            try:
                validate(text)
            except ValueError:  # updates that depend on each other are refused: draw again
                continue
            return text


def _nitf_corpus() -> list[bytes]:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True,
                             remove_pis=True)
    out = []
    for f in sorted(NEWS.glob("*.xml")):
        root = etree.fromstring(f.read_bytes(), parser)
        if root.tag == "nitf":
            out.append(etree.tostring(root))
    return out


class Messages:
    """Corpus and generated NITF articles, alone or several in ``<batched-nitf>``."""

    def __init__(self, seed: int, corpus: list[bytes]) -> None:
        self.rng, self.corpus, self.seed = random.Random(seed), corpus, seed
        self.schema = Schema.nitf()

    def _article(self, i: int) -> bytes:
        if self.corpus and self.rng.random() < 0.6:
            return self.rng.choice(self.corpus)
        return DocGenerator(self.schema, doc_depth=5, max_repeats=2, seed=self.seed * 7919 + i).generate()

    def __iter__(self):
        i = 0
        while True:
            i += 1
            if self.rng.random() < 0.5:
                yield self._article(i)
            else:
                yield b"<batched-nitf>" + b"".join(self._article(i * 10 + k)
                                                    for k in range(self.rng.randrange(2, 5))) + b"</batched-nitf>"


RUNS = [(1, 8, "geometric"), (2, 14, "tree"), (3, 20, "geometric"), (4, 10, "transit-stub"),
        (5, 16, "tree"), (6, 12, "ring"), (7, 18, "geometric"), (8, 9, "tree")]


@pytest.mark.parametrize("seed, brokers, overlay", RUNS)
def test_every_delivered_result_equals_the_centralized_engines(seed, brokers, overlay, monkeypatch):
    rewritten = []
    real = routing.incremental._rewrite
    monkeypatch.setattr(routing.incremental, "_rewrite", lambda m, b, steps: rewritten.append(len(steps))
                        or real(m, b, steps))
    corpus = _nitf_corpus()
    cfg = Config(brokers=brokers, profiles=150, messages=120, churn=0.2, seed=seed, overlay=overlay, sources=2,
                 transform=1.0, bandwidth=1e5, replay=0.2)
    sim = Simulation(cfg)
    sim.interests = Profiles(seed)
    sim.messages = Messages(seed, corpus)
    r = sim.run()
    pairs = r["profiles"]["live"] * cfg.messages
    assert pairs >= 10_000  # each run: over 10,000 (profile, message) pairs
    assert r["expected_deliveries"] > 0 and r["results_compared"] > 0
    assert r["false_negatives"] == 0
    assert r["delivery_mismatches"] == 0  # every profile delivered exactly on the messages it matches
    assert r["result_mismatches"] == 0  # with exactly the centralized engine's results
    assert r["table_mismatches"] == 0
    assert r["transformed_link_messages"] > 0
    TOTALS.update(pairs=pairs, rewritten=len(rewritten), transformed=r["transformed_link_messages"])


TOTALS = __import__("collections").Counter()


def test_the_runs_covered_enough():
    """After the runs above (same module, in order): over 10,000 pairs each, and some
    links ran binding steps upstream."""
    if len(RUNS) * 10_000 > TOTALS["pairs"]:
        pytest.skip("run with the differential runs")
    assert TOTALS["rewritten"] > 0 and TOTALS["transformed"] > 0
    print(dict(TOTALS))
