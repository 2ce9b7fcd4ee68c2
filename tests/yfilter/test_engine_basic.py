"""The Engine contract (DESIGN.md section 4) on small, hand-checked cases."""

import gc

import pytest

from formats import Message
from yfilter import Engine, MessageError, ProfileError
from yfilter import engine as engine_module

DOC = (b"<nitf><head><pubdata edition.area='SF'/><title>Hi</title></head>"
       b"<body><p n='1'>a</p><p n='2'>b<em>x</em></p></body></nitf>")


@pytest.fixture
def engine():
    e = Engine()
    e.add("q1", "/nitf[head/pubdata/@edition.area='SF']")
    e.add("q2", "//p[2]/em")
    e.add("q3", "/nitf/body/p[@n = 3]")
    return e


@pytest.mark.parametrize("as_message", [False, True])
def test_match_bytes_and_message(engine, as_message):
    msg = Message.from_xml(DOC) if as_message else DOC
    assert engine.match(msg) == frozenset({"q1", "q2"})


def test_remove_and_replace(engine):
    engine.remove("q1")
    assert engine.match(DOC) == frozenset({"q2"})
    engine.add("q2", "/nitf/body/p[@n = 3]")  # replace: same text as q3
    assert engine.match(DOC) == frozenset()
    with pytest.raises(KeyError):
        engine.remove("nope")


def test_run_gives_the_message_to_filters(engine):
    out = engine.run(DOC)
    assert set(out) == {"q1", "q2"} and out["q1"] == [DOC]


def test_bad_profile_leaves_nothing(engine):
    before = engine.stats()
    with pytest.raises(ProfileError, match=r"unsupported axis 'parent::' at column 12"):
        engine.add("bad", "/nitf/head/parent::x")
    assert "bad" not in engine and engine.stats() == before


def test_bad_profile_keeps_the_old_version(engine):
    with pytest.raises(ProfileError):
        engine.add("q1", "/nitf[")
    assert "q1" in engine.match(DOC)


@pytest.mark.parametrize("bad", [b"<a>", b"", b"<!DOCTYPE a [<!ENTITY e 'x'>]><a>&e;</a>",
                                 b"<a>" * 300 + b"</a>" * 300])
def test_message_errors(engine, bad):
    with pytest.raises(MessageError):
        engine.match(bad)


@pytest.mark.parametrize("as_mapping", [False, True])
def test_add_many_registers_in_turn_with_the_collector_paused(as_mapping):
    profiles = {"a": "//a", "b": "/nitf/body/p[@n = 2]", "c": "//a"}
    seen = []

    def pairs():
        for pid, text in profiles.items():
            seen.append(gc.isenabled())
            yield pid, text

    e = Engine()
    assert gc.isenabled()
    e.add_many(profiles if as_mapping else pairs())
    assert gc.isenabled()  # restored
    if not as_mapping:
        assert seen == [False, False, False]
    assert e.match(DOC) == {"b"} and e.match(b"<a/>") == {"a", "c"}


def test_add_many_stops_at_a_bad_profile_and_names_it():
    e = Engine()
    bad = r"^profile 'bad': unsupported axis 'parent::' at column 12$"
    with pytest.raises(ProfileError, match=bad) as err:
        e.add_many([("q1", "//p"), ("bad", "/nitf/head/parent::x"), ("q3", "//em")])
    assert err.value.column == 12
    assert "q1" in e and "bad" not in e and "q3" not in e
    assert gc.isenabled()
    gc.disable()
    try:
        e.add_many({"q3": "//em"})
        assert not gc.isenabled()  # a collector paused by the caller stays paused
    finally:
        gc.enable()
    assert e.match(DOC) == {"q1", "q3"}


def test_add_many_collects_once_after_a_batch_larger_than_a_quarter_of_the_engine(monkeypatch):
    # The full collection Python would soon start anyway runs once, at the end, when
    # the batch is large and more than a quarter of the profiles already there; a small
    # batch runs none (a full pass costs time in proportion to the whole heap).
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(args))
    monkeypatch.setattr(engine_module, "COLLECT_AFTER", 10)
    e = Engine()
    e.add_many({f"p{k}": f"//a{k}" for k in range(9)})  # fewer than COLLECT_AFTER
    assert collections == []
    e.add_many({f"p{k}": f"//a{k}" for k in range(9, 40)})
    assert collections == [()]
    e.add_many({f"q{k}": f"//b{k}" for k in range(10)})  # 10 of 40: not more than a quarter
    assert collections == [()]
    e.add_many({f"r{k}": f"//c{k}" for k in range(13)})  # 13 of 50
    assert collections == [(), ()]
    gc.disable()
    try:
        e.add_many({f"s{k}": f"//d{k}" for k in range(100)})  # the caller's to manage
    finally:
        gc.enable()
    assert collections == [(), ()] and len(e) == 163
