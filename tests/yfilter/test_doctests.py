"""The examples in the engine's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["yfilter", "yfilter.engine", "yfilter.flwr", "yfilter.generators.corpus", "yfilter.generators.flwr",
           "yfilter.native", "yfilter.nfa", "yfilter.operators", "yfilter.steps",
           "yfilter.values", "yfilter.validation"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
