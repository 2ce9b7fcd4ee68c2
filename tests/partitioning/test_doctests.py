"""The examples in the partitioning modules' docstrings run."""

import doctest
import importlib
import pkgutil

import pytest

import partitioning

MODULES = ["partitioning"] + [m.name for m in pkgutil.iter_modules(partitioning.__path__, "partitioning.")]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
