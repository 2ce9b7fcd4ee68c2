"""add / remove while matching: a removed profile never matches again, an added
one matches from the next message on, and the shared automaton shrinks back."""

import random

from formats import Message
from tests.yfilter.oracle import lxml_matches
import pytest

from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema


def test_interleaved_add_remove_match_agrees_with_lxml():
    schema = Schema.nitf()
    pool = ProfileGenerator(schema, depth=4, n_preds=(0, 1), n_nested=1, rich=0.5,
                            seed=11).batch(400)
    docs = DocGenerator(schema, doc_depth=6, max_repeats=2, seed=12)
    rnd = random.Random(13)
    engine = Engine()
    live: dict[str, str] = {}
    for step in range(60):
        for _ in range(rnd.randint(0, 15)):  # add some (new ids or replacements)
            pid = f"p{rnd.randrange(300)}"
            text = rnd.choice(pool)
            engine.add(pid, text)
            live[pid] = text
        for pid in rnd.sample(sorted(live), min(len(live), rnd.randint(0, 10))):
            engine.remove(pid)
            del live[pid]
        xml = docs.generate()
        msg = xml if step % 2 else Message.from_xml(xml)
        assert engine.match(msg) == lxml_matches(live, xml), f"step {step}"
    assert set(engine.ids()) == set(live)


def test_removed_profile_never_matches_again():
    engine = Engine()
    doc = b"<nitf><head><title>x</title></head></nitf>"
    engine.add("a", "/nitf/head/title")
    engine.add("b", "/nitf/head/title")  # same profile, shared
    assert engine.match(doc) == {"a", "b"}
    engine.remove("a")
    for _ in range(3):
        assert engine.match(doc) == {"b"}
    engine.remove("b")
    assert engine.match(doc) == frozenset()


def test_added_profile_matches_from_next_message_with_warm_cache():
    engine = Engine()
    engine.add("x", "//title")
    doc = b"<nitf><head><title a='1'>x</title></head></nitf>"
    for _ in range(3):  # warm the DFA cache
        assert engine.match(doc) == {"x"}
    engine.add("y", "/nitf/head/title[@a = '1']")
    engine.add("z", "/nitf[head/title = 'x']")
    assert engine.match(doc) == {"x", "y", "z"}
    engine.remove("x")
    assert engine.match(doc) == {"y", "z"}


@pytest.mark.parametrize("runtime", ["python", "native"])
def test_automaton_shrinks_back_to_empty(runtime):
    engine = Engine(runtime=runtime)
    empty = engine.stats()
    profiles = ProfileGenerator(Schema.nitf(), n_preds=(0, 2), n_nested=1, rich=0.8,
                                seed=5).batch(300)
    for i, p in enumerate(profiles):
        engine.add(str(i), p)
    engine.match(DocGenerator(Schema.nitf(), seed=1).generate())
    if runtime == "python":
        assert engine.stats()["nfa_states"] > 300
        assert engine.stats()["keyed_nodes"] > 0
    else:  # the guarded ones are in the C matcher only
        assert engine.stats()["native_profiles"] > 250
        assert engine.stats()["keyed_nodes"] == engine.stats()["guards"] == 0
    for i in range(len(profiles)):
        engine.remove(str(i))
    after = engine.stats()
    keys = ["profiles", "distinct_profiles", "nfa_states", "nfa_states_total", "guards",
            "nested_paths", "keyed_nodes"]
    if runtime == "native":
        keys += ["native_profiles", "native_alternatives"]
    for key in keys:
        assert after[key] == empty[key] == 0, key
