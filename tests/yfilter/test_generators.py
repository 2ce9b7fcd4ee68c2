"""The seeded generators."""

from lxml import etree

from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.parser import parse


def _depth(el, d=1):
    return max([d] + [_depth(c, d + 1) for c in el])


def test_documents_are_deterministic_and_respect_depth_and_repeats():
    s = Schema.nitf()
    a = [DocGenerator(s, doc_depth=5, max_repeats=2, seed=9).generate() for _ in range(2)]
    g = DocGenerator(s, doc_depth=5, max_repeats=2, seed=9)
    assert a[0] == a[1] == g.generate() and g.generate() != a[0]
    for _ in range(20):
        root = etree.fromstring(g.generate())
        assert _depth(root) <= 5
        for el in root.iter():
            tags = [c.tag for c in el]
            assert all(tags.count(t) <= 2 for t in tags)


def test_deeper_documents_with_doc_depth():
    s = Schema.nitf()
    deep = DocGenerator(s, doc_depth=10, max_repeats=3, p_optional=1.0, seed=1).generate()
    assert _depth(etree.fromstring(deep)) > 7


def test_profiles_parse_and_follow_parameters():
    s = Schema.nitf()
    g = ProfileGenerator(s, depth=6, p_star=0.0, p_desc=0.0, seed=2)
    paths = g.batch(40)
    assert len(set(paths)) == 40  # distinct
    for p in paths:
        steps = parse(p).steps
        assert len(steps) <= 6 and all(st.axis == "/" and st.test != "*" for st in steps)
    g = ProfileGenerator(s, depth=6, p_star=1.0, p_desc=1.0, distinct=False, seed=2)
    for p in g.batch(50):
        assert all(st.axis == "//" and st.test == "*" for st in parse(p).steps)
    g = ProfileGenerator(s, n_preds=2, n_nested=1, nested_values=1.0, seed=3)
    for p in g.batch(50):
        preds = [pr for st in parse(p).steps for pr in st.preds]
        assert len(preds) >= 2


def test_skew_concentrates_choices():
    s = Schema.nitf()
    flat = ProfileGenerator(s, depth=5, p_star=0, p_desc=0, distinct=False, seed=4)
    skewed = ProfileGenerator(s, depth=5, p_star=0, p_desc=0, skew=3.0, distinct=False,
                              seed=4)

    def top_share(profiles):
        return max(profiles.count(p) for p in profiles) / len(profiles)

    assert top_share(skewed.batch(300)) > 2 * top_share(flat.batch(300))


def test_schema_from_documents_names_namespaces():
    root = etree.fromstring(b"<a xmlns='urn:x' xmlns:p='urn:p'><b p:k='1'>t</b></a>")
    s = Schema.from_documents([root])
    assert s.root == "{urn:x}a"
    assert s.qname("{urn:x}b").endswith(":b") and s.qname("{urn:p}k").endswith(":k")
    g = ProfileGenerator(s, depth=2, n_preds=1, distinct=False, seed=1)
    for p in g.batch(10):
        parse(p, s.namespaces)
