"""The Onyx archive model against brute force: replay over a window returns exactly what
a centralized engine finds among the window's archived messages; retraction, time
slices, profile lifetimes, "who received M" and the backfill seam."""

from __future__ import annotations

import random

import pytest
from lxml import etree

from archive.directory import Archive
from archive.profiles import ProfileHistory
from archive.replay import indexable
from archive.triples import triples
from formats import Message
from yfilter import Engine
from yfilter.generators import DocGenerator, ProfileGenerator, Schema

NAMED = [
    'for $n in $msg/nitf where $n/head/pubdata/@edition.area = "SF" and $n//tobject.subject/@tobject.subject.type'
    ' = "Stock" return <stock_news> {$n/body/body.head/hedline} {$n/body/body.content} </stock_news>',
    'for $n in $msg/nitf where $n/head/docdata/series/@series.name = "Tide Forecasts" return <tides> '
    '{$n/head/title} </tides>',
    "/nitf[head/pubdata/@edition.area = 'SF']",
    "/nitf//tobject.subject[@tobject.subject.type = 'Stock']",
    "/nitf/head/title[text() = 'Tide']",
    "/nitf[.//p]",
]


@pytest.fixture(scope="module")
def corpus():
    gen = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=4)
    docs = [gen.generate() for _ in range(240)]
    docs += [b"<nitf><head><title>Tide</title><pubdata edition.area='SF'/><tobject><tobject.subject "
             b"tobject.subject.type='Stock'/></tobject></head><body><body.content><p>x</p></body.content></body></nitf>",
             b"<nitf><head><docdata><series series.name='Tide Forecasts'/></docdata><title>Tides</title></head></nitf>",
             b"<nitf><unclosed></nitf>"]
    return docs


@pytest.fixture(scope="module")
def archived(corpus, tmp_path_factory):
    rnd = random.Random(8)
    root = tmp_path_factory.mktemp("arc")
    a = Archive(root)
    rows = []   # (source, partition, offset, time, bytes)
    offsets = {}
    t = 1000
    for data in corpus:
        source, partition = rnd.choice([("news", 0), ("news", 1), ("wire", 0)])
        off = offsets[(source, partition)] = offsets.get((source, partition), -1) + 1
        t += rnd.randint(0, 40)
        a.add(source, partition, off, t - rnd.randint(0, 30), data)
        rows.append((source, partition, off, data))
    a.close()
    a = Archive(root)                         # reopened from its files
    return a, rows


def _brute(a: Archive, profile: str, t1: int, t2: int) -> set[str]:
    engine = Engine()
    engine.add("p", profile)
    out = set()
    for part in a.partitions():
        for tick in part.window(t1, t2):
            rec, data = part.read(tick)
            try:
                if "p" in engine.match(data):
                    out.add(rec.message_id)
            except ValueError:
                pass
    return out


def test_triples_hold_what_lxml_sees(corpus):
    for data in corpus[:30]:
        root = etree.fromstring(data)
        got = set(triples(Message.from_xml(data)))
        for el in root.iter():
            path = "/" + "/".join(reversed([e.tag for e in [el, *el.iterancestors()]]))
            for name, value in el.attrib.items():
                assert any(p == f"{path}/@{name}" for p, v in got)


def test_replay_equals_the_centralized_engine(archived):
    a, _ = archived
    gen = ProfileGenerator(Schema.nitf(), n_preds=(1, 2), p_star=0.1, p_desc=0.3, seed=3)
    profiles = NAMED + gen.batch(40)
    rnd = random.Random(2)
    lo, hi = 1000, max(p.meta["time"] for p in a.partitions())
    used_index = 0
    for profile in profiles:
        t1 = rnd.randint(lo, hi)
        t2 = rnd.randint(t1, hi)
        for w1, w2 in ((t1, t2), (lo, hi)):
            got = [r.record.message_id for r in a.replay(profile, w1, w2)]
            assert len(got) == len(set(got))
            assert set(got) == _brute(a, profile, w1, w2), (profile, w1, w2)
        used_index += bool(indexable(profile))
    assert used_index > 20


def test_flwr_results_and_progress(archived):
    a, _ = archived
    seen = []
    got = list(a.replay(NAMED[1], 0, 10**9, progress=lambda d, n: seen.append((d, n))))
    assert [r.results for r in got] == [(b"<tides><title>Tides</title></tides>",)]
    assert seen and seen[-1][0] == seen[-1][1] and seen[-1][1] < 20       # the index left few candidates


def test_time_slices_and_key_time():
    a = Archive(None)
    a.add("s", 0, 0, 100, b"<m><v>1</v></m>")
    a.add("s", 0, 1, 200, b"<m><v>2</v></m>")
    a.add("s", 0, 2, 300, b"<m><v>1</v></m>")
    assert [r.offset for r in a.messages_at(250)] == [0, 1]
    assert [r.offset for r in a.messages_at(1000, "/m/v", 1)] == [0, 2]
    assert [r.offset for r in a.messages_during("/m/v", "1", 0, 150)] == [0]
    assert a.retract("s-0-0", at=400) == 1
    assert [r.offset for r in a.messages_at(350, "/m/v", 1)] == [0, 2]
    assert [r.offset for r in a.messages_at(450, "/m/v", 1)] == [2]
    assert [r.record.offset for r in a.replay("/m[v = 1]", 0, 1000)] == [2]
    assert [r.record.offset for r in a.replay("/m[v = 1]", 0, 1000, as_of=350)] == [0, 2]
    assert a.add("s", 0, 1, 999, b"<m/>") is None                          # an archived offset again


def test_retraction_by_publisher_prefix():
    a = Archive(None)
    for i in range(300):
        a.add("pub", 0, i, 10 * i, b"<m><k>%d</k></m>" % (i % 5), headers=[("onyx-message-id", b"batch%d-%03d" % (i // 100, i))])
    assert a.retract_prefix("pub", "batch1-", at=5000) == 100
    left = [r.record.message_id for r in a.replay("/m[k = 3]", 0, 10**6)]
    assert len(left) == 40 and not any(m.startswith("batch1-") for m in left)
    assert len(list(a.replay("/m[k = 3]", 0, 10**6, as_of=4000))) == 60
    assert a.retract_prefix("pub", "", at=6000) == 200 and list(a.replay("/m", 0, 10**6)) == []


def test_profile_lifetimes_and_who_received(tmp_path):
    h = ProfileHistory(tmp_path / "profiles")
    h.register("sf", "/nitf[head/pubdata/@edition.area = 'SF']", 100)
    h.register("all", "/nitf", 150)
    h.update("sf", "/nitf[head/pubdata/@edition.area = 'NY']", 300)
    h.delete("all", 400)
    assert set(h.active(120)) == {"sf"} and set(h.active(200)) == {"sf", "all"} and set(h.active(500)) == {"sf"}
    assert [(s, e) for s, e, _ in h.history("sf")] == [(100, 300), (300, None)]
    h.close()
    h = ProfileHistory(tmp_path / "profiles")
    a = Archive(None)
    a.add("n", 0, 0, 200, b"<nitf><head><pubdata edition.area='SF'/></head></nitf>")
    a.add("n", 0, 1, 350, b"<nitf><head><pubdata edition.area='SF'/></head></nitf>")
    assert a.received("n-0-0", h) == {"sf", "all"}
    assert a.received("n-0-1", h) == {"all"}


def test_backfill_meets_live_deliveries_without_gap_or_duplicate():
    a = Archive(None)
    rnd = random.Random(1)
    log = {("n", p): [] for p in range(3)}
    for i in range(200):
        p = rnd.randrange(3)
        off = len(log[("n", p)])
        data = b"<m><k>%d</k></m>" % rnd.randrange(4)
        log[("n", p)].append(data)
        a.add("n", p, off, 1000 + i, data)
    profile = "/m[k = 2]"
    seam = {key: rnd.randrange(len(v) + 1) for key, v in log.items()}    # where live delivery starts
    back = a.backfill(profile, 0, seam)
    engine = Engine()
    engine.add("p", profile)
    live = {f"n-{p}-{o}" for (s, p), msgs in log.items() for o, d in enumerate(msgs)
            if o >= seam[(s, p)] and engine.match(d)}
    every = {f"n-{p}-{o}" for (s, p), msgs in log.items() for o, d in enumerate(msgs) if engine.match(d)}
    got = [r.record.message_id for r in back]
    assert len(got) == len(set(got)) and not set(got) & live and set(got) | live == every
