"""The examples in the archive's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["archive.keys", "archive.codec", "archive.pages", "archive.split", "archive.bptree", "archive.blobs",
           "archive.triples", "archive.partition", "archive.replay", "archive.profiles", "archive.directory",
           "archive.conditions", "archive.mvbt", "archive.ritree", "archive.ritree_sql", "archive.intervals"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
