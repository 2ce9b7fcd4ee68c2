"""One fuzzing process: ``python -m tests.fuzz.worker TARGET [libFuzzer args...]``
(what :func:`tests.fuzz.run.command` starts). The packages under test and the targets
are imported with atheris' coverage instrumentation, then libFuzzer takes over."""

from __future__ import annotations

import sys

import atheris

INSTRUMENTED = ["yfilter", "formats", "tests.fuzz.targets"]
"""Packages whose Python code reports coverage to libFuzzer."""


def main() -> None:
    target, args = sys.argv[1], sys.argv[2:]
    with atheris.instrument_imports(include=INSTRUMENTED):
        from tests.fuzz.targets import TARGETS
    atheris.Setup([sys.argv[0], *args], TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
