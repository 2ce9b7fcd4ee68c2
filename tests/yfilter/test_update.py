"""XQuery Update's copy/modify in transformation profiles (yfilter.flwr, yfilter.steps).

Differential: random modify lists over the NITF schema's generated documents and over
each corpus document's own vocabulary, ``Engine.run`` against two lxml references, on
the XML text and on the decoded Message:

* *in order*: a ``copy.deepcopy`` of each binding, each update applied in turn to the
  result of the one before, targets selected by lxml's XPath (Onyx's semantics);
* *at once*: every target selected on the unchanged copy, then applied as XQuery
  Update's ``upd:applyUpdates`` does (renames and attribute values, then element
  contents, then deletions). For the modify lists the parser accepts, the two must
  agree (that is what :func:`yfilter.steps.independent` is for), except where XQuery
  Update raises an error (one node renamed or replaced twice, an attribute name given
  twice), which the reference reports and the comparison skips.

Zero disagreements. Then: every refusal with its column, the canonical keys, and
``Engine.run(done=...)``.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from lxml import etree

from broker.config import CORPUS_DIR
from formats import Message
from routing.incremental import need
from tests.yfilter.flwr_oracle import c14n, remove
from yfilter import Engine
from yfilter.errors import ProfileError
from yfilter.flwr import Projection, binding_steps, parse_flwr
from yfilter.generators import DocGenerator, Schema
from yfilter.generators.flwr import xq, xq_string
from yfilter.parser import _Parser
from yfilter.steps import Delete, RenameNode, ReplaceValue, independent

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
_VALUES = ["", "v", "a & b", "1", "it's \"q\""]


# -- random modify lists -------------------------------------------------------------

class UpdateGen:
    """Random updates (as (kind, XPath from '.', argument)) below elements of ``schema``."""

    def __init__(self, schema: Schema, seed: int) -> None:
        self.s, self.rnd = schema, random.Random(seed)
        self.children = {n: [c.name for c in e.children] for n, e in schema.elements.items()}
        self._below: dict[str, list[str]] = {}
        plain = [n for n in schema.elements if not n.startswith("{")]
        self.new_names = ["x", "list", "li"] + self.rnd.sample(plain, min(4, len(plain)))

    def below(self, el: str) -> list[str]:
        if el not in self._below:
            seen: set[str] = set()
            todo = list(self.children.get(el, []))
            while todo:
                n = todo.pop()
                if n not in seen:
                    seen.add(n)
                    todo.extend(self.children.get(n, []))
            self._below[el] = sorted(seen)
        return self._below[el]

    def q(self, clark: str) -> str:
        return self.s.qname(clark)

    def attrs(self, el: str) -> list[str]:
        spec = self.s.elements.get(el)
        return sorted(spec.attrs) if spec is not None else []

    def predicate(self, el: str) -> str:
        r = self.rnd
        attrs, kids, below = self.attrs(el), self.children.get(el, []), self.below(el)
        options = ["[1]", "[2]", "[position() = 2]"]
        if attrs:
            a = r.choice(attrs)
            vals = self.s.elements[el].attrs[a] or ["v"]
            options += [f"[@{self.q(a)}]", f"[@{self.q(a)} = '{r.choice(vals)}']",
                        f"[not(@{self.q(a)})]"]
        if kids:
            k = r.choice(kids)
            options += [f"[{self.q(k)}]", f"[not({self.q(k)})]"]
            texts = self.s.elements.get(k).text if k in self.s.elements else []
            if texts:
                options.append(f"[{self.q(k)} = '{r.choice(texts)}']")
        if below:
            options.append(f"[.//{self.q(r.choice(below))}]")
        options.append("[. = 'v']")
        return r.choice(options)

    def target(self, el: str, allow_self: bool) -> str:
        """An XPath from '.' to elements or attributes below ``el`` (or ``el`` itself)."""
        r = self.rnd
        if (allow_self and r.random() < 0.1) or not self.below(el):
            path, cur = ".", el
        else:
            path, cur = ".", el
            for _ in range(r.choice([1, 1, 2, 3])):
                kids, below = self.children.get(cur, []), self.below(cur)
                if not below:
                    break
                if kids and r.random() < 0.5:
                    axis, nxt = "/", r.choice(kids)
                else:
                    axis, nxt = "//", r.choice(below)
                test = self.q(nxt)
                if r.random() < 0.08:
                    test = "*"
                path += axis + test
                if r.random() < 0.3:
                    path += self.predicate(nxt)
                cur = nxt
                if test == "*":
                    break
        attrs = self.attrs(cur)
        if attrs and r.random() < 0.3:
            path += "/@" + self.q(r.choice(attrs))
        return path

    def update(self, el: str) -> tuple[str, str, str | None]:
        r = self.rnd
        kind = r.choice(["delete", "rename", "replace"])
        t = self.target(el, allow_self=kind != "delete")
        if t == ".":
            if kind == "delete":
                kind = "rename"
        if kind == "delete":
            return kind, t, None
        if kind == "rename":
            return kind, t, r.choice(self.new_names)
        return kind, t, r.choice(_VALUES)

    def updates(self, el: str) -> list:
        return [self.update(el) for _ in range(self.rnd.choice([1, 1, 2, 2, 3, 4]))]


def written(u: tuple[str, str, str | None], var: str = "$c") -> str:
    kind, t, arg = u
    path = var if t == "." else var + xq(t[1:])
    if kind == "delete":
        return f"delete {'nodes' if t.startswith('.//') else 'node'} {path}"
    if kind == "rename":
        return f"rename node {path} as {xq_string(arg)}"
    return f"replace value of node {path} with {xq_string(arg)}"


def profile(for_path: str, updates: list, enclosed: str | None = None, var: str = "$c") -> str:
    mods = "(" + ", ".join(written(u, var) for u in updates) + ")"
    if enclosed is None:
        return f"for $n in $msg{for_path} return copy {var} := $n modify {mods} return {var}"
    return (f"for $n in $msg{for_path} return <r>{{copy {var} := $n{enclosed} modify {mods} "
            f"return {var}}}</r>")


# -- the two references --------------------------------------------------------------

def _element_update(kind, x, arg) -> None:
    if kind == "delete":
        remove(x)
    elif kind == "rename":
        x.tag = arg
    else:
        for c in list(x):
            x.remove(c)
        x.text = arg or None


def _attribute_update(kind, el, name, arg) -> None:
    if kind == "delete":
        del el.attrib[name]
    elif kind == "rename":
        v = el.attrib.pop(name)
        el.set(arg, v)
    else:
        el.set(name, arg)


def in_order(el, updates, ns) -> None:
    """Onyx: each update selects on the result of the one before."""
    for kind, t, arg in updates:
        for r in el.xpath(t, namespaces=ns):
            if isinstance(r, etree._Element):
                _element_update(kind, r, arg)
            else:
                _attribute_update(kind, r.getparent(), r.attrname, arg)


class Undefined(Exception):
    """XQuery Update raises a dynamic error here."""


def at_once(el, updates, ns) -> None:
    """XQuery Update: targets selected on the snapshot, then upd:applyUpdates' order."""
    pending = [(kind, arg, r if isinstance(r, etree._Element) else (r.getparent(), r.attrname))
               for kind, t, arg in updates for r in el.xpath(t, namespaces=ns)]
    seen: dict[tuple, int] = {}
    for kind, _, node in pending:
        if kind != "delete":
            key = (kind, node if isinstance(node, tuple) else id(node))
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                raise Undefined("XUDY0015/0016/0017: one node updated twice")
    attrs = [(k, a, n) for k, a, n in pending if isinstance(n, tuple)]
    renamed: dict[tuple, str] = {}
    for kind, arg, (owner, name) in attrs:  # values, then names
        if kind == "replace":
            owner.set(name, arg)
    for kind, arg, (owner, name) in attrs:
        if kind == "rename":
            renamed[(owner, name)] = arg
    by_owner: dict = {}
    for (owner, name), new in renamed.items():
        by_owner.setdefault(owner, []).append((name, new))
    for owner, pairs in by_owner.items():
        old = {n for n, _ in pairs}
        names = [n for n in owner.attrib if n not in old] + [new for _, new in pairs]
        if len(set(names)) != len(names):
            raise Undefined("XUDY0021: an attribute name twice")
        values = {new: owner.attrib[name] for name, new in pairs}
        for name, _ in pairs:
            del owner.attrib[name]
        for new, v in values.items():
            owner.set(new, v)
    for kind, arg, node in pending:
        if kind == "rename" and not isinstance(node, tuple):
            node.tag = arg
    for kind, arg, node in pending:
        if kind == "replace" and not isinstance(node, tuple):
            _element_update(kind, node, arg)
    for kind, arg, node in pending:
        if kind == "delete":
            if isinstance(node, tuple):
                owner, name = node
                name = renamed.get(node, name)
                if name in owner.attrib:
                    del owner.attrib[name]
            else:
                remove(node)


def reference(xml: bytes, for_path: str, updates, ns, enclosed: str | None, apply) -> list[str]:
    root = etree.fromstring(xml, _PARSER)
    out = []
    for b in root.xpath(for_path if for_path.startswith("/") else "/" + for_path,
                        namespaces=ns):
        if enclosed is None:
            c = copy.deepcopy(b)
            c.tail = None
            apply(c, updates, ns)
            res = c
        else:
            res = etree.Element("r")
            for x in b.xpath("." + enclosed, namespaces=ns):
                c = copy.deepcopy(x)
                c.tail = None
                apply(c, updates, ns)
                res.append(c)
        etree.cleanup_namespaces(res)
        out.append(c14n(etree.tostring(res, encoding="utf-8")))
    return out


def check(xml: bytes, schema: Schema, seed: int, n: int) -> tuple[int, int, int]:
    """``n`` random profiles on ``xml``: (accepted, refused as dependent, results)."""
    ns = schema.namespaces
    gen = UpdateGen(schema, seed)
    rnd = random.Random(seed)
    root = etree.fromstring(xml, _PARSER)
    els = sorted({e.tag for e in root.iter(etree.Element)})
    engine = Engine(namespaces=ns)
    cases = {}
    refused = 0
    for i in range(n):
        el = rnd.choice(els)
        var = rnd.choice(["$c", "$copy"])
        if rnd.random() < 0.3 and gen.below(root.tag):
            target_el = rnd.choice([e for e in gen.below(root.tag) if e in els] or [root.tag])
            for_path, enclosed = "/" + gen.q(root.tag), "//" + gen.q(target_el)
            el = target_el
        else:
            for_path, enclosed = "//" + gen.q(el), None
        updates = gen.updates(el)
        text = profile(for_path, updates, enclosed, var)
        try:
            engine.add(str(i), text)
        except ProfileError as e:
            assert "could select or read other nodes" in str(e), (text, e)
            refused += 1
            continue
        cases[str(i)] = (for_path, updates, enclosed, text)
    msg = Message.from_xml(xml)
    results = 0
    for given, ref_xml in ((xml, xml), (msg, msg.to_xml())):
        got = engine.run(given)
        for pid, (for_path, updates, enclosed, text) in cases.items():
            have = [c14n(r) for r in got.get(pid, [])]
            want = reference(ref_xml, for_path, updates, ns, enclosed, in_order)
            assert have == want, (text, want, have)
            try:
                snapshot = reference(ref_xml, for_path, updates, ns, enclosed, at_once)
            except Undefined:
                continue
            assert have == snapshot, (text, snapshot, have)
            results += len(have)
    return len(cases), refused, results


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_modify_lists_on_generated_documents(seed):
    schema = Schema.nitf()
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=seed)
    accepted = refused = results = 0
    for k in range(3):
        xml = docs.generate()
        xml = xml if isinstance(xml, bytes) else xml.encode()
        a, r, n = check(xml, schema, seed * 100 + k, 150)
        accepted, refused, results = accepted + a, refused + r, results + n
    assert accepted > 250 and refused > 10 and results > 300  # not vacuous


def _corpus():
    return sorted(CORPUS_DIR.glob("*.xml")) if CORPUS_DIR.is_dir() else []


@pytest.mark.skipif(not _corpus(), reason=f"corpus not found at {CORPUS_DIR}")
@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_random_modify_lists_on_corpus_documents(path: Path):
    xml = path.read_bytes()
    schema = Schema.from_documents([etree.fromstring(xml, _PARSER)])
    accepted, _, _ = check(xml, schema, len(xml), 20)
    assert accepted > 0


# -- the references agree with each other where the parser accepts ---------------------

def test_independence_is_what_makes_order_irrelevant():
    """A list the parser refuses can differ between the two semantics: the refusal
    is not vacuous."""
    xml = b"<a><t><p>1</p></t><list/></a>"
    ups = [("rename", ".//t", "list"), ("delete", ".//list", None)]
    assert reference(xml, "/a", ups, {}, None, in_order) != reference(xml, "/a", ups, {}, None,
                                                                      at_once)
    with pytest.raises(ProfileError):
        parse_flwr(profile("/a", ups))


# -- syntax, keys, refusals ---------------------------------------------------------

def test_enclosed_copy_is_a_projection_with_steps():
    q = parse_flwr('for $n in $msg/nitf return <r>{copy $c := $n/body modify (delete node '
                   '$c//media, rename node $c//table as "list") return $c}</r>')
    (p,) = q.ret.content[0].items
    assert isinstance(p, Projection) and str(p.path) == "body" and p.kind == "element"
    assert [s.key for s in p.steps] == ['delete node .//media', 'rename node .//table as "list"']
    assert isinstance(p.steps[0], Delete) and isinstance(p.steps[1], RenameNode)
    assert binding_steps(q) == ()


def test_top_level_copy_is_the_return():
    q = parse_flwr("for $n in $msg/nitf where $n/head return copy $d := $n modify "
                   "replace value of node $d/head/title with 'x' return $d")
    assert isinstance(q.ret, Projection) and q.ret.path.steps == ()
    (s,) = binding_steps(q)
    assert isinstance(s, ReplaceValue) and s.key == 'replace value of node ./head/title with "x"'
    assert str(s.target) == "head/title"


def test_keys_do_not_depend_on_the_variable_or_spelling():
    a = parse_flwr("for $n in $msg/nitf return copy $c := $n modify (delete nodes $c//media, "
                   "rename node $c/@id as 'k', replace value of node $c/p[@x = 'a&amp;b'] "
                   "with 'it''s') return $c")
    b = parse_flwr('for $m in $msg/nitf return copy $other := $m modify (delete node '
                   '$other//media, rename node $other/@id as "k", replace value of node '
                   '$other/p[@x="a&amp;b"] with "it\'s") return $other')
    assert [s.key for s in binding_steps(a)] == [s.key for s in binding_steps(b)] == [
        "delete node .//media", 'rename node ./@id as "k"',
        "replace value of node ./p[@x = 'a&b'] with \"it's\""]


def test_namespaced_targets_have_clark_keys():
    q = parse_flwr("for $n in $msg/x:a return copy $c := $n modify delete node $c/x:b return $c",
                   {"x": "urn:x"})
    assert binding_steps(q)[0].key == "delete node ./{urn:x}b"


P = "for $n in $msg/nitf return "


@pytest.mark.parametrize("text, at, message", [
    (P + "copy $c := $n modify (insert node $c/a) return $c", "insert", "'insert' is not supported"),
    (P + "copy $c := $n modify (replace node $c/a with $c/b) return $c", "node $c/a",
     "'replace node' is not supported"),
    (P + "copy $c := $n modify (delete node $c/a, delete node $n/b) return $c", "$n/b",
     "start the path at $c, not $n"),
    (P + "copy $c := $n modify (delete node $x/b) return $c", "$x/b", "start the path at $c"),
    (P + "copy $c := $n modify (delete node /nitf/b) return $c", "/nitf/b", "absolute paths"),
    (P + "copy $c := $n modify (delete node $c/a/..) return $c", "..", "'..'"),
    (P + "copy $c := $n modify (delete node $c) return $c", "$c)", "deleting the copy $c itself"),
    (P + "copy $c := $n modify (delete node $c/a/text()) return $c", "$c/a/text", "text() targets"),
    (P + "copy $c := $n modify (rename node $c/a as $c/b) return $c", "$c/b)",
     "the new name must be a string literal"),
    (P + "copy $c := $n modify (rename node $c/a as 'p:b') return $c", "p:b",
     "unprefixed name"),
    (P + "copy $c := $n modify (rename nodes $c/a as 'b') return $c", "nodes",
     "expected 'node' after rename"),
    (P + "copy $c := $n modify (replace value of node $c/a with $c/b) return $c", "$c/b)",
     "the new value must be a string literal"),
    (P + "copy $c := $n modify (delete node $c/a) return $c/a", "/a", "the copy is returned whole"),
    (P + "copy $c := $n modify (delete node $c/a) return $n", "$n", "write 'return $c'"),
    (P + "copy $c := $n modify (delete node $c/a) return $c <x/>", "<x/>",
     "after the copy expression"),
    (P + "copy $c := $n/body modify (delete node $c/a) return $c", "$n/body",
     "copy takes the binding $n itself"),
    (P + "copy $c := $n/@id modify (delete node $c/a) return $c", "$n/@id",
     "copy copies elements"),
    (P + "copy $n := $n modify (delete node $n/a) return $n", "$n :=",
     "a variable of its own"),
    (P + "copy $c := $n (delete node $c/a) return $c", "(delete", "expected 'modify'"),
    (P + "copy $c := $n modify (transform copy $d := $c) return $c", "transform",
     "'transform' is not supported"),
    (P + "copy $c := $n modify (update $c/a) return $c", "update", "expected an update"),
    (P + "copy $c := $n modify (copy $d := $c) return $c", "copy $d", "'copy' is not supported"),
    (P + "<r id='{copy $c := $n modify delete node $c/a return $c}'/>", "}'", "attribute values"),
    (P + "copy $c := $n modify (rename node $c//table as 'list', delete node $c//list) return $c",
     "delete node $c//list", "could select or read other nodes after 'rename node $c//table"),
    (P + "copy $c := $n modify (delete node $c//media, replace value of node "
         "$c/body[.//caption] with 'x') return $c", "replace value",
     "could select or read other nodes"),
    (P + "<r>{copy $c := $n/body modify (replace value of node $c/@id with 'x', "
         "delete node $c/p[@id = 'x']) return $c}</r>", "delete node $c/p",
     "could select or read other nodes"),
])
def test_refusals_name_their_column(text, at, message):
    with pytest.raises(ProfileError) as exc:
        parse_flwr(text)
    assert message in str(exc.value), str(exc.value)
    assert exc.value.column == text.rindex(at) + 1, (str(exc.value), text.rindex(at) + 1)


def rel(t: str):
    return _Parser(t, {}).relpath()


@pytest.mark.parametrize("step, path, expected", [
    (RenameNode(rel("."), "x"), "a[b = 'c']//d[2]", True),
    (RenameNode(rel("a"), "x"), "*/b", True),
    (RenameNode(rel("a"), "x"), "b[x]", False),
    (RenameNode(rel(".//*"), "x"), "*[2]", True),
    (RenameNode(rel(".//*"), "x"), "*/b", False),
    (Delete(rel(".//media")), "body/p[@a = 'x'][2]", True),
    (Delete(rel(".//media")), "*/p", True),
    (Delete(rel(".//media")), "*[1]/p", False),
    (Delete(rel(".//media")), "p[. = 'x']", False),
    (Delete(rel(".//media")), "p/text()", False),
    (Delete(rel(".//media")), "p[.//q]", False),
    (Delete(rel("a/*")), "@id", True),
    (Delete(rel("a/*")), "b", False),
    (ReplaceValue(rel("."), "t"), "a//b[. = 'x']", True),
    (ReplaceValue(rel("."), "t"), "text()", False),
    (ReplaceValue(rel("a"), "t"), "*/b", True),
    (ReplaceValue(rel("a"), "t"), "*[b]", False),
    (ReplaceValue(rel("a/@x"), "t"), "a[@x]", False),
    (ReplaceValue(rel("a/@x"), "t"), "a[@y]/@z", True),
    (RenameNode(rel("a/@x"), "y"), "b/@y", False),
    (Delete(rel("a/@x")), "a[. = '1']", True),
])
def test_independent(step, path, expected):
    assert independent(step, rel(path)) is expected


# -- done=: steps applied upstream ---------------------------------------------------

def test_done_skips_the_steps_applied_upstream():
    schema = Schema.nitf()
    gen = UpdateGen(schema, 7)
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=7)
    rnd = random.Random(7)
    checked = 0
    for _ in range(4):
        xml = docs.generate()
        xml = xml if isinstance(xml, bytes) else xml.encode()
        root = etree.fromstring(xml, _PARSER)
        kids = sorted({c.tag for c in root})
        for _ in range(40):
            el = rnd.choice(kids)
            for_path = f"/{root.tag}/{el}"
            updates = [u for u in gen.updates(el) if u[1] != "."] + [gen.update(el)]
            text = profile(for_path, updates)
            try:
                q = parse_flwr(text)
            except ProfileError:
                continue
            keys = tuple(s.key for s in binding_steps(q))
            engine = Engine()
            engine.add("q", text)
            engine.add("other", profile(for_path, [("rename", ".", "zz")]))
            want = engine.run(xml).get("q", [])
            for j in range(1, len(updates) + 1):
                if any(u[1] == "." and u[0] == "rename" for u in updates[:j]):
                    continue  # the bindings would no longer be what the for path selects
                upstream = etree.fromstring(xml, _PARSER)
                for b in upstream.xpath(for_path):
                    in_order(b, updates[:j], {})
                moved = etree.tostring(upstream)
                for given in (moved, Message.from_xml(moved)):
                    got = engine.run(given, done=(str(q.path), keys[:j]))
                    assert [c14n(r) for r in got.get("q", [])] == [c14n(r) for r in want], text
                    # the other profile's steps do not start with those keys: it runs as usual
                    assert got.get("other") == engine.run(given).get("other")
                checked += 1
    assert checked > 40


def test_done_leaves_other_bindings_and_constructors_alone():
    e = Engine()
    e.add("top", "for $n in $msg/r/a return copy $c := $n modify delete node $c/b return $c")
    e.add("deep", "for $n in $msg//a return copy $c := $n modify delete node $c/b return $c")
    e.add("ctor", "for $n in $msg/r/a return <x>{copy $c := $n modify delete node $c/b "
                  "return $c}</x>")
    xml = b"<r><a><b/><b/>t</a></r>"
    plain = e.run(xml)
    assert plain["top"] == plain["deep"] == [b"<a>t</a>"]
    got = e.run(xml, done=("/r/a", ("delete node ./b",)))
    assert got["top"] == [b"<a><b/><b/>t</a>"]  # trusted: nothing is applied again
    assert got["deep"] == plain["deep"] and got["ctor"] == plain["ctor"] == [b"<x><a>t</a></x>"]
    assert e.run(xml, done=("/r/a", ("delete node ./c",))) == plain  # keys not a prefix


def test_top_level_copy_is_read_whole_by_early_projection():
    n = need("for $n in $msg/nitf/body where $n/@x = '1' return copy $c := $n modify "
             "delete node $c//media return $c")
    assert ((("/", "nitf"), ("/", "body")), True) in n.keeps
