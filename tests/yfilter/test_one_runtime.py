"""One runtime per engine: each distinct profile compiled and filed once, in the
structure of the runtime the engine was made with, and no call changes runtime.

The structures counted: the NFA's accepting states (reached by walking it), its
guards and nested paths (the registry), its final check nodes filed by key
(yfilter.keyed), and the C matcher's profiles and the alternatives it files them as.
"""

from __future__ import annotations

import pytest

from formats import Message
from tests.yfilter.oracle import lxml_matches
from yfilter import Engine

PLAIN = {"p1": "/a/b", "p2": "//c", "p2bis": "//c", "p3": "/a/*/d"}
GUARDED = {"g1": "/a[@x = '1']/b", "g2": "//c[not(@y)]", "g3": "/a/b[2]",
           "g4": "/a/b[@x = '1' or @y = '2' or c]", "g5": "//c[contains(., 'hi')]",
           "g5bis": "//c[contains(., 'hi')]", "g6": "/a/b/@x", "g7": "/a[.//d[@z = 'v']]",
           "t1": "for $b in $msg/a/b where $b/@x = '1' return <r>{$b/c}</r>"}
DOC = b"<a x='1'><b x='1'><c>hi</c></b><b y='2'/><e><d z='v'/></e><c y='3'/></a>"


def _accepting(engine: Engine) -> int:
    seen, stack, n = set(), [engine._nfa.root], 0
    while stack:
        s = stack.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        n += s.accept is not None
        stack += list((s.edges or {}).values()) + ([s.eps] if s.eps is not None else [])
    return n


def _engine(runtime: str) -> Engine:
    e = Engine(runtime=runtime)
    e.add_many({**PLAIN, **GUARDED})
    return e


def test_native_files_each_profile_once():
    e = _engine("native")
    st = e.stats()
    # plain profiles: an accepting NFA state each (distinct ones), nothing in C
    assert _accepting(e) == 3 == st["distinct_profiles"] - st["native_profiles"]
    # profiles with predicates: the C matcher only; no guard, nested path or check
    # node on the Python side
    assert st["native_profiles"] == 8
    assert st["guards"] == st["nested_paths"] == st["keyed_nodes"] == 0
    assert st["native_alternatives"] == 8 - 1 + 3  # g4's or is filed as its 3 branches
    for q in e._queries.values():
        assert (q.state is None) == (id(q.ids) in e._native._profiles)
    assert e.match(DOC) == lxml_matches({**PLAIN, **{k: v for k, v in GUARDED.items()
                                                     if k != "t1"}}, DOC) | {"t1"}


def test_python_runtime_files_everything_in_the_nfa():
    e = _engine("python")
    st = e.stats()
    assert e._native is None and "native_profiles" not in st
    assert _accepting(e) == st["distinct_profiles"] == 11
    assert st["guards"] > 0 and st["keyed_nodes"] > 0
    assert e.match(DOC) == _engine("native").match(DOC)


def test_a_session_never_changes_runtime():
    e = _engine("native")
    for message in (DOC, Message.from_xml(DOC)):
        before = e.stats()["native_messages"]
        alone = e.match(message)
        with_session = e.match(message, e.start(message))
        ran = e.run(message, e.start(message))
        assert alone == with_session == set(ran)
        assert e.stats()["native_messages"] == before + 3  # every call went to C
    assert set(ran["t1"]) == {b"<r><c>hi</c></r>"}


def test_runtime_is_chosen_explicitly():
    assert Engine().runtime == "native" and Engine(native=False).runtime == "python"
    with pytest.raises(ValueError, match="runtime"):
        Engine(runtime="auto")
