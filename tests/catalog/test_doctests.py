"""The examples in the catalog's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["catalog.values", "catalog.names", "catalog.errors", "catalog.schema", "catalog.document",
           "catalog.syntax", "catalog.parser", "catalog.normalize", "catalog.decompose", "catalog.tables",
           "catalog.sqlops", "catalog.db", "catalog.delta", "catalog.gc", "catalog.backbone", "catalog.lmr",
           "catalog.filter", "catalog.rulebase", "catalog.shipping", "catalog.query", "catalog.local_tables"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_module_is_listed() -> None:
    import pkgutil

    import catalog

    mods = {m.name for m in pkgutil.iter_modules(catalog.__path__, "catalog.")}
    without = {"catalog.defaults"}   # values and their reasons only
    assert mods - without == set(MODULES), "a new module needs a doctest example (or a reason to be without)"
