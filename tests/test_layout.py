"""The packages exist, say what they are for, and depend on each other one way."""

import importlib
import subprocess
import sys

import pytest

PACKAGES = ["yfilter", "routing", "partitioning", "formats", "archive", "cache", "catalog", "broker"]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_imports_and_has_a_docstring(name):
    module = importlib.import_module(name)
    doc = (module.__doc__ or "").strip()
    assert len(doc.split()) >= 15, f"{name} needs a one-paragraph docstring saying what lives there"


@pytest.mark.parametrize("name", ["yfilter", "formats", "archive", "cache", "catalog"])
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


BROKER_PARTS = ["metadata", "control", "dataplane", "spark", "registry", "deploy", "local"]
"""The subpackages of ``broker``."""

BROKER_ORDER = ["top", "metadata", "control", "dataplane", "spark", "job", "registry", "deploy", "local", "cli"]
"""Inside ``broker`` a part imports only itself and the parts before it (``broker/__init__.py``):
``top`` is every top-level module but the two job entry points (``job.py``, ``archive_job.py``)
and ``cli.py``."""


@pytest.mark.parametrize("name", [f"broker.{part}" for part in BROKER_PARTS])
def test_broker_subpackage_imports_and_has_a_docstring(name):
    test_package_imports_and_has_a_docstring(name)


def _broker_modules() -> dict[str, "Path"]:
    from pathlib import Path

    import broker

    root = Path(broker.__file__).parent
    return {".".join(("broker",) + p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(root.rglob("*.py"))}


def _part(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 or module in {f"broker.{p}" for p in BROKER_PARTS}:
        return parts[1]
    return {"broker.job": "job", "broker.archive_job": "job", "broker.cli": "cli"}.get(module, "top")


def _broker_imports(path, modules) -> set[str]:
    """Every ``broker`` module ``path`` imports, at its top or inside a function."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "broker"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] == "broker":
            for a in node.names:
                found.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module)
    return found - {"broker"}


def test_broker_imports_go_one_way():
    modules = _broker_modules()
    assert set(BROKER_PARTS) == {_part(m) for m in modules} - {"top", "job", "cli"}, "a new part needs a place in BROKER_ORDER"
    wrong = []
    for module, path in modules.items():
        for target in _broker_imports(path, modules):
            assert target in modules, f"{module} imports {target}, which does not exist"
            if BROKER_ORDER.index(_part(target)) > BROKER_ORDER.index(_part(module)):
                wrong.append(f"{module} -> {target}")
            # The registration service and the Kubernetes rendering need nothing of the broker job
            # (the service is the metadata provider: it has the metadata part).
            if _part(module) in ("registry", "deploy") and _part(target) not in ("top", "metadata", _part(module)):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the order of broker/__init__.py: " + ", ".join(sorted(wrong))


def test_broker_job_loads_no_service_dev_cluster_or_helm():
    code = ("import sys, broker.job\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['broker', 'registry'], ['broker', 'local'], ['broker', 'deploy'], ['broker', 'cli']))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"broker.job pulled in {out}"
