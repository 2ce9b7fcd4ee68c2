"""Seeded document generator driven by a :class:`Schema` (the YFilter tools' XML
generator, with its parameters DocDepth and MaxRepeats).

>>> g = DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=1)
>>> doc = g.generate()
>>> doc[:6], doc == DocGenerator(Schema.nitf(), doc_depth=6, max_repeats=3, seed=1).generate()
(b'<nitf', True)
"""

from __future__ import annotations

import random

from lxml import etree

from yfilter.generators.schema import Schema


class DocGenerator:
    """Documents no deeper than ``doc_depth`` whose repeated children appear at most
    ``max_repeats`` times; optional children appear with probability ``p_optional``,
    attributes with ``p_attr``, text with ``p_text``."""

    def __init__(self, schema: Schema, *, doc_depth: int = 6, max_repeats: int = 3,
                 p_optional: float = 0.6, p_attr: float = 0.7, p_text: float = 0.8,
                 seed: int = 0) -> None:
        if doc_depth < 1 or max_repeats < 1:
            raise ValueError("doc_depth and max_repeats must be at least 1")
        self.schema = schema
        self.doc_depth, self.max_repeats = doc_depth, max_repeats
        self.p_optional, self.p_attr, self.p_text = p_optional, p_attr, p_text
        self.rnd = random.Random(seed)

    def generate(self) -> bytes:
        """One document as UTF-8 XML text."""
        root = self._element(self.schema.root, 1)
        return etree.tostring(root, encoding="utf-8")

    def _element(self, name: str, depth: int) -> etree._Element:
        rnd = self.rnd
        spec = self.schema.elements[name]
        el = etree.Element(name)
        for a, values in spec.attrs.items():
            if rnd.random() < self.p_attr:
                el.set(a, rnd.choice(values))
        if spec.text and rnd.random() < self.p_text:
            el.text = " ".join(rnd.choice(spec.text) for _ in range(rnd.randint(1, 3)))
        if depth >= self.doc_depth:
            return el
        for child in spec.children:
            hi = self.max_repeats if child.max is None else min(child.max, self.max_repeats)
            lo = min(child.min, hi)
            n = rnd.randint(lo, hi) if hi > lo else lo
            if lo == 0 and n and rnd.random() > self.p_optional * child.weight:
                n = 0
            for _ in range(n):
                c = self._element(child.name, depth + 1)
                if spec.text and rnd.random() < self.p_text / 2:
                    c.tail = " " + rnd.choice(spec.text)  # mixed content
                el.append(c)
        return el
