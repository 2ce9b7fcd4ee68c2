"""The examples in the formats docstrings run."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import formats

MODULES = ["formats"] + [f"formats.{m.name}" for m in pkgutil.iter_modules(formats.__path__)]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
