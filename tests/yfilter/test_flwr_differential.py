"""Differential tests for transformation profiles: ``Engine.run`` against lxml (XPath
per clause, see ``flwr_oracle``), results compared after canonicalisation, on the XML
text and on the decoded Message. Zero disagreements allowed; any found becomes a
named case in test_flwr.py.

This is the suite's slice: 2 x 400 generated profiles on generated NITF documents and
6 profiles from each corpus document's vocabulary on that document (about 1,100
profiles). The full run, 5,560 profiles, is a command::

    python -m tests.yfilter.flwr_oracle
"""

from pathlib import Path

import pytest
from lxml import etree

from broker.config import CORPUS_DIR
from tests.yfilter.flwr_oracle import disagreements
from yfilter import Engine
from yfilter.generators import DocGenerator, Schema
from yfilter.generators.flwr import FlwrGenerator


@pytest.mark.parametrize("seed", [11, 12])
def test_generated_profiles_on_generated_documents(seed):
    schema = Schema.nitf()
    specs = {str(i): s for i, s in enumerate(FlwrGenerator(schema, seed=seed).specs(400))}
    engine = Engine()
    for pid, s in specs.items():
        engine.add(pid, s.text())
    docs = DocGenerator(schema, doc_depth=7, max_repeats=3, seed=seed)
    results = 0
    for _ in range(3):
        xml = docs.generate()
        assert disagreements(engine, specs, xml) == []
        results += sum(len(r) for r in engine.run(xml).values())
    assert results > 300  # not vacuous: many profiles bind, often more than once


def _corpus():
    return sorted(CORPUS_DIR.glob("*.xml")) if CORPUS_DIR.is_dir() else []


@pytest.mark.skipif(not _corpus(), reason=f"corpus not found at {CORPUS_DIR}")
@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_corpus_document_with_profiles_from_its_vocabulary(path: Path):
    xml = path.read_bytes()
    schema = Schema.from_documents([etree.fromstring(xml)])
    specs = {str(i): s for i, s in enumerate(FlwrGenerator(schema, seed=len(xml)).specs(6))}
    engine = Engine(namespaces=schema.namespaces)
    for pid, s in specs.items():
        engine.add(pid, s.text())
    assert disagreements(engine, specs, xml, schema.namespaces) == []
