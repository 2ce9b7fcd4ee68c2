"""The fuzz targets in the default suite: every committed corpus input replayed in
process (the inputs that once crashed among them), and a short, seeded atheris run
of each target over its corpus (``make fuzz`` runs the long ones)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.fuzz import run
from tests.fuzz.targets import TARGETS

SEEDED_RUNS = {"profile": 4000, "message": 3000, "payload": 20000, "header": 10000, "schema": 10000}
"""Inputs per target in the seeded run, the corpus replay included: a few seconds each
on a shared 2-core machine."""
SEED = 20240601


def test_every_target_has_a_corpus_and_a_name_the_runner_knows() -> None:
    assert set(TARGETS) == set(run.TARGET_NAMES)
    for name in TARGETS:
        assert any((run.CORPUS / name).iterdir()), f"no corpus for {name}"


def test_the_committed_corpus_stays_small() -> None:
    files = [f for f in run.CORPUS.rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 400_000
    assert all(f.stat().st_size <= run.MAX_LEN for f in files)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_corpus_replays_cleanly(name: str) -> None:
    target = TARGETS[name]
    for path in sorted((run.CORPUS / name).iterdir()):
        try:
            target(path.read_bytes())
        except Exception as exc:  # name the input: it is the reproducer
            raise AssertionError(f"{path.relative_to(run.REPO)}: {exc!r}") from exc


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeded_fuzz_run_finds_nothing(name: str, tmp_path: Path) -> None:
    """libFuzzer with a fixed seed and number of runs, from the committed corpus (read
    only: new inputs go to tmp_path); a crash, disallowed exception, hang or memory
    blow-up makes it exit non-zero with the input in its output."""
    args = run.libfuzzer_args(name, runs=SEEDED_RUNS[name], seed=SEED, artifacts=tmp_path)
    (tmp_path / "new").mkdir()
    proc = subprocess.run(run.command(name, [*args, str(tmp_path / "new"), str(run.CORPUS / name)]),
                          cwd=run.REPO, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    done = re.search(r"Done (\d+) runs", log)
    # libFuzzer may end a couple of units past -runs (seen: 10,002 of 10,000); fewer
    # would mean the run was cut short.
    assert done and int(done.group(1)) >= SEEDED_RUNS[name], log[-2000:]


@pytest.mark.slow
def test_corpus_replays_under_the_sanitizers(tmp_path: Path) -> None:
    """The corpora that reach the C matcher, replayed in one process each with the
    matcher built with AddressSanitizer and UBSan (``run.asan_environment``; about
    half a minute, mostly the build). It found qsort_r called on an empty list (a
    NULL base: undefined behaviour) once the matcher re-filed its profiles after 64
    messages."""
    env = run.asan_environment(tmp_path / "asan")
    for name in ("message", "payload"):
        files = sorted(str(p) for p in (run.CORPUS / name).iterdir())
        args = run.libfuzzer_args(name, artifacts=tmp_path)
        proc = subprocess.run(run.command(name, [*args, *files]), cwd=run.REPO, env=env,
                              capture_output=True, text=True, timeout=600)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "runtime error" not in log and "AddressSanitizer" not in log, log[-6000:]
