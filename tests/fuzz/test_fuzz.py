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

SEEDED_RUNS = {"profile": 1500, "message": 600, "payload": 3000, "header": 3000}
"""Inputs per target in the seeded run: a few seconds each on a shared 2-core machine
(the corpus replay comes first and is not counted)."""
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
    assert done and int(done.group(1)) == SEEDED_RUNS[name], log[-2000:]
