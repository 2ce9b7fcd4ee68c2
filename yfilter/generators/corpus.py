"""Seeded generator of the profiles people write, from the vocabulary of real documents.

The vocabulary is read from the documents given (XML text or lxml elements): every
root-to-element path that occurs, with the attribute values, the text values and the
positions among same-name siblings seen at it. Each profile is one *construct*:

=============  ==============================================================
``path``       a path only: ``/ns0:newsItem//ns0:subject``
``value``      one value predicate: ``[@a = 'v']``, ``[text() = 'v']``,
               ``[child = 'v']``, numeric ``[@a > 3]``
``nested``     a nested path predicate: ``[.//a[@b = 'v']]``, ``[a/b]``
``contains``   ``contains(x, 's')`` / ``starts-with(x, 's')`` on an attribute,
               ``.``, ``text()`` or a child, with a substring of a real value
``not``        ``not(...)`` of a value, existence or child test
``position``   ``step[n]``, ``[position() = n]``, ``p[@x = 'v'][n]``
``or``         two or three value tests joined by ``or``
``tail``       a trailing ``/@a`` or ``/text()`` (with or without a predicate)
=============  ==============================================================

``mix`` gives the proportions of the constructs (:data:`MIXED`, roughly what a
subscriber population writes, is the default; ``{"or": 1}`` gives one construct).
Paths start at the root, and with ``p_desc`` a ``//`` skips a run of steps; with
``p_star`` an inner name test is ``*``. Values come from the whole vocabulary at the
path, so a profile matches the documents that hold its value and not the others;
with ``p_miss`` a value is taken from another element instead (a profile that
rarely matches). ``distinct`` retries a repeated profile up to 50 times and then
keeps it (small vocabularies have fewer distinct profiles than asked for; the count
of repeats is ``duplicates``). Names are written with :attr:`namespaces`' prefixes
(pass the same to :class:`yfilter.Engine` and to lxml).

>>> g = CorpusProfileGenerator([b"<a x='1'><b>hi there</b><b>x</b></a>"], seed=1)
>>> ps = g.batch(20); len(ps), all(p.startswith("/") for p in ps)
(20, True)
>>> g.generate("or").count(" or ") >= 1
True
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lxml import etree

from yfilter.ast import quote

CONSTRUCTS = ("path", "value", "nested", "contains", "not", "position", "or", "tail")

# Mixed workload: mostly paths and simple values, the rest of the language in the
# smaller shares seen in subscription languages.
MIXED = {"path": 0.25, "value": 0.25, "nested": 0.08, "contains": 0.1, "not": 0.06,
         "position": 0.06, "or": 0.1, "tail": 0.1}

XML_NS = "http://www.w3.org/XML/1998/namespace"
MAX_TEXT = 60  # longest text compared whole; longer ones give words to contains()


@dataclass
class _Node:
    """What occurs at one root-to-element path (names as Clark names)."""

    path: tuple[str, ...]
    attrs: dict[str, list[str]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)  # short whole text nodes
    words: list[str] = field(default_factory=list)  # pieces of long ones
    children: list[str] = field(default_factory=list)  # child names (with a path here)
    max_pos: int = 1  # most same-name siblings seen
    count: int = 0  # occurrences over the documents


def _literal_ok(s: str) -> bool:
    return not ("'" in s and '"' in s)


class CorpusProfileGenerator:
    """Generates profile texts from the documents' vocabulary (see the module)."""

    def __init__(self, documents: Iterable[bytes | str | etree._Element], *,
                 mix: Mapping[str, float] | None = None, p_desc: float = 0.25,
                 p_star: float = 0.08, p_miss: float = 0.15, distinct: bool = True,
                 seed: int = 0) -> None:
        mix = dict(MIXED if mix is None else mix)
        bad = set(mix) - set(CONSTRUCTS)
        if bad:
            raise ValueError(f"unknown constructs {sorted(bad)}; known: {CONSTRUCTS}")
        self.constructs = [c for c in CONSTRUCTS if mix.get(c, 0) > 0]
        if not self.constructs:
            raise ValueError("mix gives no construct a positive share")
        self.weights = [mix[c] for c in self.constructs]
        self.p_desc, self.p_star, self.p_miss = p_desc, p_star, p_miss
        self.distinct = distinct
        self.duplicates = 0
        self.rnd = random.Random(seed)
        self._seen: set[str] = set()
        self.namespaces: dict[str, str] = {}
        self.nodes: dict[tuple[str, ...], _Node] = {}
        for d in documents:
            root = d if isinstance(d, etree._Element) else etree.fromstring(
                d.encode() if isinstance(d, str) else d,
                etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False))
            self._read(root)
        if not self.nodes:
            raise ValueError("no elements in the documents")
        self._paths = sorted(self.nodes)
        # Value pools by kind, for values that miss.
        self._all_texts = sorted({t for n in self.nodes.values() for t in n.texts})
        self._all_words = sorted({w for n in self.nodes.values() for w in n.words})
        self._by_kind = {
            "attr": [p for p in self._paths if self.nodes[p].attrs],
            "text": [p for p in self._paths if self.nodes[p].texts],
            "words": [p for p in self._paths if self.nodes[p].words or self.nodes[p].texts],
            "child": [p for p in self._paths if self._child_texts(p)],
            "nested": [p for p in self._paths if self._descendants(p, valued=False)],
            "pos": [p for p in self._paths if self.nodes[p].max_pos > 1],
        }

    # -- vocabulary ------------------------------------------------------------------
    def _read(self, root: etree._Element) -> None:
        def visit(el, path):
            node = self.nodes.get(path)
            if node is None:
                node = self.nodes[path] = _Node(path)
            node.count += 1
            for name in (el.tag, *el.attrib):
                self._prefix(name)
            for a, v in el.attrib.items():
                vals = node.attrs.setdefault(a, [])
                if v not in vals and _literal_ok(v) and len(vals) < 50:
                    vals.append(v)
            for t in [el.text, *(c.tail for c in el)]:
                if not t or not t.strip() or not _literal_ok(t):
                    continue
                if len(t) <= MAX_TEXT and t not in node.texts and len(node.texts) < 50:
                    node.texts.append(t)
                for w in t.split():
                    if len(w) >= 3 and w not in node.words and len(node.words) < 100:
                        node.words.append(w)
            counts: dict[str, int] = {}
            for c in el.iterchildren(etree.Element):
                counts[c.tag] = counts.get(c.tag, 0) + 1
                cpath = (*path, c.tag)
                visit(c, cpath)
                cn = self.nodes[cpath]
                cn.max_pos = max(cn.max_pos, counts[c.tag])
                if c.tag not in node.children:
                    node.children.append(c.tag)

        visit(root, (root.tag,))

    def _prefix(self, clark: str) -> None:
        if clark.startswith("{"):
            uri = clark[1:].split("}", 1)[0]
            if uri != XML_NS and uri not in self.namespaces.values():
                self.namespaces[f"ns{len(self.namespaces)}"] = uri

    def qname(self, clark: str) -> str:
        if not clark.startswith("{"):
            return clark
        uri, local = clark[1:].split("}", 1)
        if uri == XML_NS:
            return "xml:" + local
        for p, u in self.namespaces.items():
            if u == uri:
                return f"{p}:{local}"
        raise KeyError(uri)

    def _child_texts(self, path):
        return [(c, self.nodes[(*path, c)].texts) for c in self.nodes[path].children
                if self.nodes[(*path, c)].texts]

    def _descendants(self, path, valued: bool):
        """Paths below ``path`` (up to 3 levels), with attributes when ``valued``."""
        out = []
        stack = [(path, 0)]
        while stack:
            p, d = stack.pop()
            for c in self.nodes[p].children:
                cp = (*p, c)
                if not valued or self.nodes[cp].attrs:
                    out.append(cp)
                if d < 2:
                    stack.append((cp, d + 1))
        return out

    # -- generation ------------------------------------------------------------------
    def generate(self, construct: str | None = None) -> str:
        """One profile of ``construct`` (default: drawn by ``mix``)."""
        for _ in range(50):
            c = construct or self.rnd.choices(self.constructs, self.weights)[0]
            p = getattr(self, "_" + c)()
            if not self.distinct or p not in self._seen:
                break
        else:
            self.duplicates += 1
        self._seen.add(p)
        return p

    def batch(self, n: int, construct: str | None = None) -> list[str]:
        return [self.generate(construct) for _ in range(n)]

    def _pick_path(self, kind: str | None = None) -> tuple[str, ...]:
        pool = self._by_kind[kind] if kind else self._paths
        if not pool:
            pool = self._paths
        return self.rnd.choice(pool)

    def _steps(self, path: tuple[str, ...], last_pred: str = "", pos_at: int | None = None,
               pos: str = "") -> str:
        """``path`` written as location steps: maybe a ``//`` skipping a run of steps,
        maybe ``*`` for inner names; ``last_pred`` goes on the last step, ``pos`` on
        step ``pos_at`` (kept, never skipped)."""
        rnd = self.rnd
        n = len(path)
        keep = [True] * n
        if n > 2 and rnd.random() < self.p_desc:
            lo = rnd.randrange(1, n - 1)
            hi = rnd.randrange(lo, n - 1)
            if pos_at is None or not lo <= pos_at <= hi:
                for i in range(lo, hi + 1):
                    keep[i] = False
        out = []
        skipped = False
        for i, name in enumerate(path):
            if not keep[i]:
                skipped = True
                continue
            axis = "//" if skipped else "/"
            skipped = False
            test = self.qname(name)
            if 0 < i < n - 1 and i != pos_at and rnd.random() < self.p_star:
                test = "*"
            out.append(axis + test + (pos if i == pos_at else "") +
                       (last_pred if i == n - 1 else ""))
        return "".join(out)

    def _value_of(self, values: list[str], pool: list[str]) -> str:
        if pool and self.rnd.random() < self.p_miss:
            return self.rnd.choice(pool)
        return self.rnd.choice(values)

    def _value_test(self, path) -> str:
        """One value test on the element at ``path`` (attribute, text, or child)."""
        rnd = self.rnd
        node = self.nodes[path]
        kinds = []
        if node.attrs:
            kinds += ["attr"] * 3
        if node.texts:
            kinds += ["text"]
        if self._child_texts(path):
            kinds += ["child"]
        if not kinds:
            return "@" + self.qname(rnd.choice(["id", "type", "qcode"]))
        kind = rnd.choice(kinds)
        if kind == "attr":
            a = rnd.choice(sorted(node.attrs))
            v = self._value_of(node.attrs[a], [])
            op = "="
            try:
                float(v)
                op = rnd.choice(["=", "=", "<", ">", ">=", "!="])
                lit = v if op != "=" else quote(v)
            except ValueError:
                lit = quote(v)
            return f"@{self.qname(a)} {op} {lit}"
        if kind == "text":
            return f"{rnd.choice(['text()', '.'])} = {quote(self._value_of(node.texts, self._all_texts))}"
        c, texts = rnd.choice(self._child_texts(path))
        return f"{self.qname(c)} = {quote(self._value_of(texts, self._all_texts))}"

    def _path(self) -> str:
        return self._steps(self._pick_path())

    def _value(self) -> str:
        path = self._pick_path(self.rnd.choice(["attr", "attr", "text", "child"]))
        return self._steps(path, f"[{self._value_test(path)}]")

    def _nested(self) -> str:
        rnd = self.rnd
        path = self._pick_path("nested")
        below = self._descendants(path, valued=True)
        if below and rnd.random() < 0.7:
            d = rnd.choice(below)
            a = rnd.choice(sorted(self.nodes[d].attrs))
            v = quote(self._value_of(self.nodes[d].attrs[a], []))
            return self._steps(path, f"[.//{self.qname(d[-1])}[@{self.qname(a)} = {v}]]")
        below = self._descendants(path, valued=False) or [(*path, "x")]
        d = rnd.choice(below)
        rel = "/".join(self.qname(n) for n in d[len(path):])
        return self._steps(path, f"[{rel}]")

    def _contains(self) -> str:
        rnd = self.rnd
        path = self._pick_path(rnd.choice(["attr", "words"]))
        node = self.nodes[path]
        fn = rnd.choice(["contains", "contains", "starts-with"])
        if node.attrs and (rnd.random() < 0.5 or not (node.words or node.texts)):
            a = rnd.choice(sorted(node.attrs))
            v = rnd.choice(node.attrs[a])
            arg = f"@{self.qname(a)}"
        else:
            v = rnd.choice(node.words + node.texts)
            arg = rnd.choice([".", "text()"])
            if fn == "starts-with" and v not in node.texts:
                fn = "contains"
        if rnd.random() < self.p_miss and self._all_words:
            v = rnd.choice(self._all_words)
        v = v.strip() or v
        if not v:
            sub = ""  # an empty attribute value: contains(@a, '') holds wherever @a is
        elif fn == "starts-with":
            sub = v[:rnd.randint(1, max(1, min(len(v), 12)))]
        else:
            i = rnd.randrange(len(v))
            sub = v[i:i + rnd.randint(3, 10)]
        return self._steps(path, f"[{fn}({arg}, {quote(sub)})]")

    def _not(self) -> str:
        rnd = self.rnd
        path = self._pick_path()
        node = self.nodes[path]
        r = rnd.random()
        if r < 0.5 and (node.attrs or node.texts or self._child_texts(path)):
            inner = self._value_test(path)
        elif r < 0.75 and node.children:
            inner = self.qname(rnd.choice(node.children))
        else:
            a = rnd.choice(sorted(node.attrs) or ["id"])
            inner = "@" + self.qname(a)
        return self._steps(path, f"[not({inner})]")

    def _position(self) -> str:
        rnd = self.rnd
        path = self._pick_path("pos") if rnd.random() < 0.8 else self._pick_path()
        # the step with siblings (the deepest one), else the last
        at = max((i for i in range(1, len(path)) if self.nodes[path[:i + 1]].max_pos > 1),
                 default=len(path) - 1)
        n = rnd.randint(1, self.nodes[path[:at + 1]].max_pos + 1)
        r = rnd.random()
        if r < 0.6:
            pos = f"[{n}]"
        elif r < 0.8:
            pos = f"[position() = {n}]"
        else:
            pos = f"[{self._value_test(path[:at + 1])}][{n}]"
        return self._steps(path, pos_at=at, pos=pos)

    def _or(self) -> str:
        rnd = self.rnd
        path = self._pick_path(rnd.choice(["attr", "attr", "text", "child"]))
        k = 2 if rnd.random() < 0.8 else 3
        tests = []
        for _ in range(k * 3):
            t = self._value_test(path)
            if t not in tests:
                tests.append(t)
            if len(tests) == k:
                break
        if len(tests) == 1:
            tests.append(f"@{self.qname(rnd.choice(sorted(self.nodes[path].attrs) or ['id']))}")
        return self._steps(path, "[" + " or ".join(tests) + "]")

    def _tail(self) -> str:
        rnd = self.rnd
        path = self._pick_path(rnd.choice(["attr", "text"]))
        node = self.nodes[path]
        pred = f"[{self._value_test(path)}]" if rnd.random() < 0.3 else ""
        if node.attrs and (not node.texts or rnd.random() < 0.6):
            return self._steps(path, pred) + "/@" + self.qname(rnd.choice(sorted(node.attrs)))
        return self._steps(path, pred) + "/text()"
