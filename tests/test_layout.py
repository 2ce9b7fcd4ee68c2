"""The packages exist, say what they are for, and depend on each other one way."""

import importlib
import subprocess
import sys

import pytest

PACKAGES = ["yfilter", "routing", "partitioning", "formats", "archive", "broker"]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_imports_and_has_a_docstring(name):
    module = importlib.import_module(name)
    doc = (module.__doc__ or "").strip()
    assert len(doc.split()) >= 15, f"{name} needs a one-paragraph docstring saying what lives there"


@pytest.mark.parametrize("name", ["yfilter", "formats", "archive"])
def test_engine_layers_never_import_spark_or_kafka(name):
    code = (
        f"import sys, pkgutil, importlib, {name}\n"
        f"for m in pkgutil.walk_packages({name}.__path__, '{name}.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'kafka', 'py4j', 'broker'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{name} pulled in {out}"
