"""Final nodes without an anchor, filed by key (yfilter.keyed): the ones decided at
the root, keys re-chosen as profiles come, and the table emptied by removal."""

from tests.yfilter.oracle import disagreements
from yfilter import Engine
from yfilter.keyed import rooted

ROOTED = {
    "r1": "/a[@x = '1']//b",
    "r2": "/a[@x = '1']/c//b",
    "r3": "/a[@x = '2']//b",
    "r4": "/a[c/@y = 'v']/*/b",
    "r5": "/*[@x = '1'][c]//d",
}
DOCS = [
    b"<a x='1'><c><b/></c></a>",
    b"<a x='1'><b/><c/></a>",
    b"<a x='2'><c y='v'><b/></c></a>",
    b"<a x='1'><e><c y='v'/><b/></e><c><d/></c></a>",
    b"<z x='1'><c/><d/></z>",
    b"<a><c x='1'><b/></c></a>",  # the value below the root does not count
]


def test_nodes_decided_at_the_root_agree_with_lxml():
    e = Engine(runtime="python")  # Keyed is the Python runtime's
    for pid, p in ROOTED.items():
        e.add(pid, p)
    nodes = list(e._nfa.keyed._filed)
    assert sum(rooted(n) for n in nodes) == 5  # every profile here is decided at the root
    for d in DOCS:
        assert disagreements(e, ROOTED, d) == [], d


def test_not_rooted_when_the_prior_is_deeper_or_the_last_step_guarded():
    e = Engine(runtime="python")  # Keyed is the Python runtime's
    e.add("deep", "/a/c[@x = '1']//b")
    e.add("own", "/a[@x = '1']//b[c]")
    assert not any(rooted(n) for n in e._nfa.keyed._filed)


def test_keys_rechosen_and_table_emptied():
    # Early profiles get keys while few values are known; filing again as the table
    # doubles keeps results exact, and removing everything leaves nothing filed.
    profiles = {f"p{i}": f"/a[@x = '{i % 7}'][c]/*[@y = '{i}']//b" for i in range(300)}
    e = Engine(runtime="python")  # Keyed is the Python runtime's
    for pid, p in profiles.items():
        e.add(pid, p)
    assert e.stats()["keyed_nodes"] == 300
    doc = b"<a x='3'><c/><e y='3'><b/></e><e y='10'><f><b/></f></e><e y='17'/></a>"
    assert disagreements(e, profiles, doc) == []
    assert e.match(doc) == {"p3", "p10"}
    for pid in profiles:
        e.remove(pid)
    assert e.stats()["keyed_nodes"] == 0
    k = e._nfa.keyed
    assert not (k._base or k._selves or k._always or k._shapes)
