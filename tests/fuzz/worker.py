"""One fuzzing process: ``python -m tests.fuzz.worker TARGET [--self=PATH] [libFuzzer
args...]`` (what :func:`tests.fuzz.run.command` starts). The packages under test and
the targets are imported with atheris' coverage instrumentation, then libFuzzer takes
over. ``--self`` names an executable that starts this same process (libFuzzer's
``-merge=1`` runs its inner passes as ``PATH args...``; the default, this file, is no
executable)."""

from __future__ import annotations

import importlib.util
import os
import sys

import atheris

from tests.fuzz.run import MATCHER_ENV

INSTRUMENTED = ["yfilter", "formats", "tests.fuzz.targets"]
"""Packages whose Python code reports coverage to libFuzzer."""


def main() -> None:
    target, args = sys.argv[1], sys.argv[2:]
    me = sys.argv[0]
    if args and args[0].startswith("--self="):
        me, args = args[0].removeprefix("--self="), args[1:]
    matcher = os.environ.get(MATCHER_ENV)
    if matcher:  # another build of the C matcher (run.asan_environment): it is the one imported
        spec = importlib.util.spec_from_file_location("yfilter._matcher", matcher)
        sys.modules["yfilter._matcher"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    with atheris.instrument_imports(include=INSTRUMENTED):
        from tests.fuzz.targets import TARGETS
    if matcher:
        from yfilter import native

        assert native.Matcher is module.Matcher, "the C matcher was imported before the worker chose it"
    atheris.Setup([me, *args], TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
