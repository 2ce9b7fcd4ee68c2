"""What the simulator subscribes and publishes: interests and messages.

Interests come from :class:`yfilter.generators.ProfileGenerator` runs, one per
*region* of the overlay:

* ``uniform`` — a single region: every subscriber draws from the whole vocabulary;
* ``geo`` — the unit square is cut into ``regions`` cells and each cell gets its own
  view of the schema: a third of every attribute's values and text values, and the
  children of every element in its own order with a Zipf skew, so that subscribers
  near each other (the brokers of one cell) share vocabulary, values and structure.

A subscriber lives near a *home* broker (uniformly at random); its profile is drawn
from the home's region: a filter, or with probability ``transform`` a transformation
profile (:class:`yfilter.generators.flwr.FlwrGenerator`, same region's view) that,
like ONYX's Q3, returns parts of a story: it copies no subtree shallower than
:data:`PART_DEPTH` steps (not the whole ``/nitf`` or ``/nitf/body``). With
``bindings`` N, transformation profiles draw their for path from N shared ones (as
news subscribers might all bind ``$msg/nitf/body/body.content/...`` and differ in
where and return), which is what early restructuring needs; under ``geo`` interests
each region binds one of the N. Messages come
from :class:`yfilter.generators.DocGenerator`
over the full schema, or from real XML files (the schema is then learned from them).

>>> from routing.generators import random_geometric
>>> ov = random_geometric(20, seed=1)
>>> w = Interests.build("geo", ov, Schema.nitf(), seed=1, regions=4)
>>> len(set(w.region.values())) > 1, w.generate("b1").startswith("/")
(True, True)
>>> Interests.build("uniform", ov, Schema.nitf(), seed=1, transform=1.0).generate("b1").startswith("for $")
True
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import networkx as nx
from lxml import etree

from routing.overlay import Overlay
from routing.incremental import WHOLE, need
from yfilter.generators import DocGenerator, ProfileGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator, FlwrSpec

INTERESTS = ("uniform", "geo")

PROFILE_DEFAULTS = {"depth": 6, "p_star": 0.1, "p_desc": 0.1, "n_preds": (3, 5), "n_nested": 2}
"""ProfileGenerator parameters of the simulator's subscribers: paths up to six steps
with three to five value predicates and two nested paths each — selective enough
(about 5 matches in 10,000 profiles per generated message) that thousands of
profiles per broker still leave brokers a message need not reach."""

FLWR_DEFAULTS = {"depth": 5, "p_star": 0.1, "p_desc": 0.2, "n_preds": (1, 3), "rich": 0.1, "p_where": 0.9}
"""FlwrGenerator parameters of transformation profiles: for paths with one to three
value predicates and a where clause most of the time; few position predicates
(``rich``)."""

PART_DEPTH = 3
"""Transformation profiles copy subtrees at least this many steps below the root."""


class WorkloadError(ValueError):
    """Interests or messages that cannot be produced as asked."""


def locations(overlay: Overlay, seed: int) -> dict[str, tuple[float, float]]:
    """Broker positions in the unit square: their ``location`` attribute, or a
    seeded spring layout of the overlay for generators that have none."""
    pos = {b: overlay.attrs(b).get("location") for b in overlay.brokers}
    if all(p is not None for p in pos.values()):
        return {b: (float(p[0]), float(p[1])) for b, p in pos.items()}
    layout = nx.spring_layout(overlay.graph, seed=seed)
    xs = [p[0] for p in layout.values()]
    ys = [p[1] for p in layout.values()]
    span = lambda v, lo, hi: (v - lo) / (hi - lo) if hi > lo else 0.5  # noqa: E731
    return {b: (span(x, min(xs), max(xs)), span(y, min(ys), max(ys))) for b, (x, y) in layout.items()}


def regional_schema(schema: Schema, rng: random.Random) -> Schema:
    """A region's view of ``schema``: a third of each value list, children reordered."""
    def third(values: list[str]) -> list[str]:
        return rng.sample(values, max(1, len(values) // 3)) if values else []

    elements = {}
    for name, spec in schema.elements.items():
        children = list(spec.children)
        rng.shuffle(children)
        elements[name] = replace(spec, children=children,
                                 attrs={a: third(v) for a, v in spec.attrs.items()}, text=third(spec.text))
    return Schema(schema.root, elements, dict(schema.namespaces))


@dataclass
class Interests:
    """One profile generator per region and the region of every broker."""

    kind: str
    region: dict[str, int]
    generators: list[ProfileGenerator] = field(repr=False)
    transformers: list[FlwrGenerator] = field(repr=False)
    transform: float = 0.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    @classmethod
    def build(cls, kind: str, overlay: Overlay, schema: Schema, seed: int, regions: int = 9,
              transform: float = 0.0, bindings: int = 0, **profile_kw) -> "Interests":
        """Interests of ``kind`` over ``overlay``; ``transform`` is the share of
        transformation profiles, ``bindings`` (if not 0) how many for paths they share."""
        if kind not in INTERESTS:
            raise WorkloadError(f"unknown interests {kind!r}; choose from {', '.join(INTERESTS)}")
        if not 0 <= transform <= 1:
            raise WorkloadError(f"the share of transformation profiles is in [0, 1], not {transform}")
        if bindings < 0:
            raise WorkloadError(f"the number of shared bindings cannot be negative ({bindings})")
        kw = {**PROFILE_DEFAULTS, **profile_kw}
        if kind == "uniform":
            region, schemas = dict.fromkeys(overlay.brokers, 0), [schema]
        else:
            side = max(1, round(math.sqrt(regions)))
            pos = locations(overlay, seed)
            region = {b: min(int(x * side), side - 1) * side + min(int(y * side), side - 1)
                      for b, (x, y) in pos.items()}
            rng = random.Random(seed)
            kw.setdefault("skew", 1.0)
            schemas = [regional_schema(schema, rng) for _ in range(side * side)]
        seeds = [seed] if kind == "uniform" else [seed * 7919 + r for r in range(len(schemas))]
        gens = [ProfileGenerator(s, seed=n, distinct=False, **kw) for s, n in zip(schemas, seeds)]
        if bindings:
            shared = BoundFlwrGenerator(schema, [], seed=seed, **FLWR_DEFAULTS).draw_bindings(bindings)
            # Under geo interests a region binds one of them: neighbours read the same part.
            mine = [shared] if kind == "uniform" else [[shared[r % len(shared)]] for r in range(len(schemas))]
            flwr = [BoundFlwrGenerator(s, b, seed=n, **FLWR_DEFAULTS) for s, b, n in zip(schemas, mine, seeds)]
        else:
            flwr = [FlwrGenerator(s, seed=n, **FLWR_DEFAULTS) for s, n in zip(schemas, seeds)]
        return cls(kind, region, gens, flwr, transform, random.Random(seed))

    def generate(self, home: str) -> str:
        """A profile for a subscriber living near broker ``home``."""
        r = self.region[home]
        if self.transform and self.rng.random() < self.transform:
            return _part_profile(self.transformers[r])
        return self.generators[r].generate()


Binding = tuple[str, str]
"""A shared for path (XPath text) and the schema element it binds."""


class BoundFlwrGenerator(FlwrGenerator):
    """Transformation profiles whose for path is one of ``bindings``; where and
    return clauses as :class:`FlwrGenerator` draws them for the bound element."""

    def __init__(self, schema: Schema, bindings: list[Binding], **kw) -> None:
        super().__init__(schema, **kw)
        self.bindings = bindings

    def draw_bindings(self, n: int) -> list[Binding]:
        """``n`` distinct for paths at least :data:`PART_DEPTH` steps deep (so the
        profiles binding them return parts of a story), one in five with a value
        predicate (a binding that is rare in messages leaves little to measure).

        >>> b = BoundFlwrGenerator(Schema.nitf(), [], seed=0).draw_bindings(3)
        >>> len({path for path, _ in b}), all(path.count("/") >= PART_DEPTH for path, _ in b)
        (3, True)
        """
        out: dict[str, str] = {}
        for _ in range(1000 * n):
            if len(out) == n:
                return sorted(out.items())
            steps = self._path(None, self.rnd.randint(PART_DEPTH, max(PART_DEPTH, self.depth)))
            if len(steps) < PART_DEPTH:
                continue
            if self.rnd.random() < 0.2:
                st = self.rnd.choice(steps)
                st[3].append(self._value_pred(st[1]))
            out.setdefault(self._render(steps, absolute=True), steps[-1][1])
        raise WorkloadError(f"the schema has fewer than {n} distinct bindings {PART_DEPTH} or more steps deep")

    def spec(self) -> FlwrSpec:
        rnd = self.rnd
        path, el = rnd.choice(self.bindings)
        where = self._condition(el, 0) if rnd.random() < self.p_where else None
        return FlwrSpec("$s", path, where, self._element(el, 0), layout=rnd.randrange(2))


def _part_profile(gen: FlwrGenerator) -> str:
    """A transformation profile of ``gen`` that returns parts of a message (about
    two in three generated ones are)."""
    while True:
        text = gen.spec().text()
        n = need(text, gen.schema.namespaces)
        if n is not WHOLE and all(len(path) >= PART_DEPTH for path, whole in n.keeps if whole):
            return text


class Messages:
    """Seeded message source: generated documents, or files of a corpus directory."""

    def __init__(self, schema: Schema, seed: int, corpus: list[bytes] | None = None,
                 doc_depth: int = 6, max_repeats: int = 3) -> None:
        self.schema, self.seed, self.corpus = schema, seed, corpus
        self.doc_depth, self.max_repeats = doc_depth, max_repeats
        self._rng = random.Random(seed)

    def __iter__(self) -> Iterator[bytes]:
        i = 0
        while True:
            if self.corpus:
                yield self._rng.choice(self.corpus)
            else:
                yield DocGenerator(self.schema, doc_depth=self.doc_depth, max_repeats=self.max_repeats,
                                   seed=self.seed * 1_000_003 + i).generate()
            i += 1


def load_corpus(path: str | Path) -> tuple[list[bytes], Schema]:
    """The ``*.xml`` files of a directory and a schema learned from those with the
    most common root element (profiles drawn from it can match them; the others
    are published too, and mostly match nothing)."""
    files = sorted(Path(path).glob("*.xml"))
    if not files:
        raise WorkloadError(f"no *.xml files in {path}")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    docs: dict[str, list[tuple[bytes, etree._Element]]] = {}
    for f in files:
        data = f.read_bytes()
        try:
            root = etree.fromstring(data, parser)
        except etree.XMLSyntaxError as exc:
            raise WorkloadError(f"{f}: not well-formed XML: {exc}") from None
        docs.setdefault(root.tag, []).append((data, root))
    tag = max(docs, key=lambda t: (len(docs[t]), t))
    return [d for group in docs.values() for d, _ in group], Schema.from_documents(r for _, r in docs[tag])
