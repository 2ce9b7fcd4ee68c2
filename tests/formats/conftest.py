"""Shared data for the formats tests: the news corpus (skipped when absent) and
dictionaries learned from it and from generated documents."""

from __future__ import annotations

import pytest
import formats
from broker import config

from . import docgen

CORPUS = sorted(config.CORPUS_DIR.glob("*.xml")) if config.CORPUS_DIR.is_dir() else []

def corpus_params() -> list:
    """One pytest param per corpus file, or one skipped param when the corpus is absent."""
    if not CORPUS:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no corpus at {config.CORPUS_DIR}"))]
    return [pytest.param(path, id=path.name) for path in CORPUS]


@pytest.fixture(scope="session")
def corpus_dictionary() -> formats.Dictionary:
    """A dictionary (names and zstd) learned from half of the corpus, so the other
    half exercises names the dictionary lacks."""
    if not CORPUS:
        pytest.skip(f"no corpus at {config.CORPUS_DIR}")
    return formats.learn_dictionary("news", [p.read_bytes() for p in CORPUS[::2]])


@pytest.fixture(scope="session")
def small_dictionary() -> formats.Dictionary:
    """:func:`docgen.small_dictionary`, learned once per session."""
    return docgen.small_dictionary()
