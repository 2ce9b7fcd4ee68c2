"""Extract the Kubernetes JSON schemas that kubeconform validates against.

The schemas come from the ``kubernetes-validate`` package on PyPI, which bundles the
OpenAPI-derived JSON schemas of each Kubernetes minor version. Its
``v1.NN.0-local-strict`` folders (objects reject unknown fields) hold one file per kind,
``{kind}-{group}-{version}.json``, which is the naming of kubeconform's
``{{ .ResourceKind }}{{ .KindSuffix }}.json`` template, plus a shared
``_definitions.json``. Their ``$ref``s are absolute (``/api/_definitions.json#...``) and
each file carries a kubernetes.io ``$id``; both are rewritten so that kubeconform's file
loader resolves the references inside the local folder.

Usage (with the tools venv that has kubernetes-validate installed)::

    python k8s_schemas.py OUT_DIR VERSION...     # writes OUT_DIR/v{VERSION}-local-strict/*.json
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

_ABSOLUTE = "/api/_definitions.json#"


def _relative(node: Any) -> Any:
    """``node`` with absolute ``$ref``s pointing at the sibling ``_definitions.json``."""
    if isinstance(node, dict):
        return {
            k: "_definitions.json#" + v[len(_ABSOLUTE):]
            if k == "$ref" and isinstance(v, str) and v.startswith(_ABSOLUTE)
            else _relative(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_relative(v) for v in node]
    return node


def extract(source: Path, out: Path, versions: list[str]) -> int:
    """Copy the strict schema folders of ``versions`` from ``source`` into ``out``; returns the file count."""
    written = 0
    for version in versions:
        folder = source / f"v{version}-local-strict"
        if not folder.is_dir():
            have = sorted(p.name.split("-")[0] for p in source.glob("v*-local-strict"))
            raise SystemExit(f"error: kubernetes-validate has no schemas for Kubernetes {version}; it has {have}")
        target = out / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(folder.glob("*.json")):
            schema = _relative(json.loads(path.read_text()))
            schema.pop("$id", None)
            (target / path.name).write_text(json.dumps(schema))
            written += 1
    return written


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: k8s_schemas.py OUT_DIR VERSION...", file=sys.stderr)
        return 2
    source = Path(str(resources.files("kubernetes_validate") / "kubernetes-json-schema"))
    count = extract(source, Path(argv[0]), argv[1:])
    print(f"    kubernetes {', '.join(argv[1:])}: {count} schemas (kubernetes-validate)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
