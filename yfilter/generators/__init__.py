"""Deterministic (seeded) generators of documents and profiles, in the spirit of
the YFilter tools: :class:`DocGenerator` (DocDepth, MaxRepeats) and
:class:`ProfileGenerator` (depth, P(*), P(//), value predicates, nested paths,
skew, distinct), both driven by a :class:`Schema` (a NITF-like one ships here), and
:class:`CorpusProfileGenerator`, profiles of every construct from real documents'
vocabulary.
"""

from yfilter.generators.corpus import CorpusProfileGenerator
from yfilter.generators.docs import DocGenerator
from yfilter.generators.profiles import ProfileGenerator
from yfilter.generators.schema import Schema

__all__ = ["CorpusProfileGenerator", "DocGenerator", "ProfileGenerator", "Schema"]
