"""The examples in the cache's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["cache", "cache.defaults", "cache.errors", "cache.strings", "cache.numbers", "cache.values", "cache.atoms",
           "cache.conjunct", "cache.match", "cache.parse", "cache.condition", "cache.window", "cache.concept",
           "cache.evaluate", "cache.regions", "cache.lookup", "cache.semantic_cache", "cache.archive_source",
           "cache.query_text"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_module_is_listed() -> None:
    import pkgutil

    import cache

    assert {m.name for m in pkgutil.iter_modules(cache.__path__, "cache.")} | {"cache"} == set(MODULES)
