"""The per-input CPU time limit (tests.fuzz.limit) on a clock the test controls: a
run over the limit is run again and fails only if every run was; and as libFuzzer sees
it, a crash whose input is saved (a limit of 0 ms makes every input too slow)."""

from __future__ import annotations

import doctest
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz import limit, run
from tests.fuzz.limit import SlowInput, within_limit


def clock(*durations: float) -> Iterator[float]:
    """Readings of a clock on which successive runs take ``durations`` seconds."""
    now = 0.0
    for d in durations:
        yield now
        now += d
        yield now


def test_docstring_examples() -> None:
    result = doctest.testmod(limit)
    assert result.attempted > 0 and result.failed == 0


def test_an_input_over_the_limit_once_or_twice_passes() -> None:
    for durations in [(0.5, 0.01), (0.5, 0.5, 0.05)]:
        ticks = clock(*durations)
        resets = []
        assert within_limit(lambda: "ok", reset=lambda: resets.append(1), limit=0.1,
                            clock=lambda: next(ticks)) == "ok"
        assert len(resets) == len(durations)  # caches emptied before every run


def test_an_input_over_the_limit_every_time_is_slow() -> None:
    ticks = clock(0.2, 0.15, 0.3)
    with pytest.raises(SlowInput, match=r"took 200, 150 and 300 ms of CPU \(limit: 100 ms\)"):
        within_limit(lambda: None, limit=0.1, clock=lambda: next(ticks))


def test_an_exception_is_not_retried() -> None:
    calls = []

    def fail() -> None:
        calls.append(1)
        raise ValueError("bug")

    with pytest.raises(ValueError):
        within_limit(fail, limit=0.0)
    assert len(calls) == 1


def test_a_slow_input_fails_the_fuzzing_run_with_its_input_saved(tmp_path: Path) -> None:
    args = run.libfuzzer_args("schema", runs=20, seed=1, artifacts=tmp_path)
    (tmp_path / "new").mkdir()
    proc = subprocess.run(run.command("schema", [*args, str(tmp_path / "new"), str(run.CORPUS / "schema")]),
                          cwd=run.REPO, env={**os.environ, limit.LIMIT_ENV: "0"}, capture_output=True,
                          text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "SlowInput: the input took" in log, log[-3000:]
    assert len(list(tmp_path.glob("schema-crash-*"))) == 1  # the first input run (libFuzzer's empty one)
