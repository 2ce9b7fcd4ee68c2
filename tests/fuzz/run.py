"""Run the fuzz targets under atheris (libFuzzer), one process per target.

    python -m tests.fuzz                          # every target, 5 minutes each (make fuzz)
    python -m tests.fuzz message --max-time 60    # one target, a minute
    python -m tests.fuzz --runs 300 --seed 1      # bounded and seeded (what make test runs)
    python -m tests.fuzz --write-seeds            # (re)write the starter inputs of the corpus

Each target starts from its committed corpus, ``tests/fuzz/corpus/<target>/``, which
it only reads: inputs that reach new code go to a work folder (``.run/fuzz/<target>/``
by default), and with ``--grow`` those that add coverage to the committed corpus are
merged into it afterwards (libFuzzer's ``-merge=1``; commit them). A crash, an
exception the target does not allow, a hang (``--timeout`` seconds on one input) or
memory beyond ``--rss-limit-mb`` stops the target's run; libFuzzer writes the input
as ``crash-...``, ``timeout-...`` or ``oom-...`` in the artifacts folder and the
command exits non-zero. Replay one with ``python -m tests.fuzz TARGET FILE``. The
``schema`` and ``profile`` targets also hold each input's parse to a CPU time limit
(``--cpu-limit-ms``, 100 by default; see :mod:`tests.fuzz.limit`): a slower input is a
crash (``SlowInput``), saved as ``crash-...`` the same way.

Python code of ``yfilter``, ``formats`` and the targets is instrumented for coverage;
the C matcher (``yfilter/_matcher``) and lxml run uninstrumented inside the same
process, so a segfault or abort there is caught by libFuzzer as a crash. With
``--asan`` the C matcher is rebuilt with AddressSanitizer and UBSan (gcc, into
``.run/fuzz/asan/``) and loaded instead of the regular build, so an out-of-bounds
read or write, a use after free or undefined behaviour there is a crash too, even
where it would not segfault (``make fuzz FUZZ_ASAN=1``). The sanitizer runtime is
preloaded (Python is not built with it) and then answers libFuzzer's coverage
callbacks itself, so in this mode the fuzzer gets no coverage: it replays the
corpus and mutates it blindly. Run it after a normal run has grown the corpus.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.fuzz.limit import LIMIT_ENV

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
DICTS = HERE / "dicts"
REPO = HERE.parents[1]
WORK = REPO / ".run" / "fuzz"
TARGET_NAMES = ("profile", "message", "payload", "header", "schema")
"""The names of :data:`tests.fuzz.targets.TARGETS`, known without importing them."""
MAX_LEN = 4096
"""Longest input libFuzzer makes up (bytes): the corpus stays small, and every bug
found so far needed far less."""


def libfuzzer_args(target: str, *, runs: int | None = None, seed: int | None = None,
                   max_time: int | None = None, timeout: int = 30, rss_limit_mb: int = 2048,
                   artifacts: Path) -> list[str]:
    """libFuzzer's options for one run of ``target`` (corpus folders not included)."""
    args = [f"-timeout={timeout}", f"-rss_limit_mb={rss_limit_mb}", f"-max_len={MAX_LEN}",
            f"-artifact_prefix={artifacts}/{target}-", "-print_final_stats=1"]
    if (DICTS / f"{target}.dict").is_file():
        args.append(f"-dict={DICTS / f'{target}.dict'}")
    if runs is not None:
        args.append(f"-runs={runs}")
    if seed is not None:
        args.append(f"-seed={seed}")
    if max_time is not None:
        args.append(f"-max_total_time={max_time}")
    return args


ASAN_FLAGS = "-fsanitize=address,undefined -fno-omit-frame-pointer -g"
MATCHER_ENV = "ONYX_FUZZ_MATCHER"
"""Names the build of ``yfilter._matcher`` a worker loads instead of the regular one."""


def asan_environment(build: Path) -> dict[str, str]:
    """Build the C matcher with AddressSanitizer and UBSan into ``build`` and return
    the environment that runs a worker with it: the sanitizer runtimes preloaded
    (Python itself is not built with them), leak checking off (the interpreter keeps
    its memory until exit), undefined behaviour fatal."""
    env = {**os.environ, "CFLAGS": ASAN_FLAGS, "LDFLAGS": ASAN_FLAGS}
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--force", "--build-lib", str(build),
                    "--build-temp", str(build / "tmp")], cwd=REPO, env=env, check=True)
    (matcher,) = (build / "yfilter").glob("_matcher*.so")
    runtimes = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True,
                               check=True).stdout.strip() for lib in ("libasan.so", "libubsan.so")]
    return {**os.environ, MATCHER_ENV: str(matcher), "LD_PRELOAD": " ".join(runtimes),
            "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def command(target: str, args: Sequence[str]) -> list[str]:
    """The command that fuzzes (or, given files, replays) ``target`` in a process of
    its own with libFuzzer's ``args`` (options, then corpus folders or input files)."""
    return [sys.executable, "-m", "tests.fuzz.worker", target, *args]


def fuzz(target: str, *, work: Path, artifacts: Path, grow: bool = False,
         env: dict[str, str] | None = None, **options: object) -> int:
    """Fuzz ``target`` from its committed corpus (read only; new inputs go to
    ``work``), then with ``grow`` merge what adds coverage into the committed corpus;
    ``env``: the workers' environment (see :func:`asan_environment`). Returns the
    exit status (0: no crash, hang or leak found)."""
    corpus = CORPUS / target
    corpus.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    args = libfuzzer_args(target, artifacts=artifacts, **options)  # type: ignore[arg-type]
    status = subprocess.run(command(target, [*args, str(work), str(corpus)]), cwd=REPO, env=env).returncode
    if status == 0 and grow:
        # libFuzzer's merge runs its passes as "argv[0] args": a script that starts
        # the worker again (with the same Python and environment).
        me = work.parent / f"worker-{target}.sh"
        me.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tests.fuzz.worker {target} "$@"\n')
        me.chmod(0o755)
        merge = libfuzzer_args(target, artifacts=artifacts)
        status = subprocess.run(command(target, [f"--self={me}", *merge, "-merge=1", str(corpus), str(work)]),
                                cwd=REPO, env=env).returncode
    return status


def write_seeds() -> None:
    """Write the starter inputs of each target into its corpus folder."""
    from tests.fuzz.seeds import starter_inputs

    for target, inputs in starter_inputs().items():
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in inputs.items():
            (folder / f"seed-{name}").write_bytes(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help=f"targets to fuzz (default: all of {', '.join(TARGET_NAMES)}); "
                             "one target followed by files replays those inputs")
    parser.add_argument("--max-time", type=int, default=None,
                        help="seconds per target (default 300 unless --runs is given)")
    parser.add_argument("--runs", type=int, default=None, help="inputs to run per target")
    parser.add_argument("--seed", type=int, default=None, help="libFuzzer's random seed")
    parser.add_argument("--timeout", type=int, default=30, help="seconds one input may take")
    parser.add_argument("--rss-limit-mb", type=int, default=2048, help="memory a run may use")
    parser.add_argument("--cpu-limit-ms", type=int, default=None,
                        help="CPU ms one input's parse may take in the schema and profile targets (default 100)")
    parser.add_argument("--work", type=Path, default=WORK, help="where new inputs and crashes go")
    parser.add_argument("--grow", action="store_true",
                        help="merge inputs that add coverage into the committed corpus")
    parser.add_argument("--asan", action="store_true",
                        help="run the C matcher built with AddressSanitizer and UBSan")
    parser.add_argument("--write-seeds", action="store_true", help="write the corpus' starter inputs")
    opts = parser.parse_args(argv)
    if opts.write_seeds:
        write_seeds()
        return 0
    if opts.cpu_limit_ms is not None:  # the workers inherit it
        os.environ[LIMIT_ENV] = str(opts.cpu_limit_ms)
    env = asan_environment(opts.work / "asan") if opts.asan else None
    names = opts.targets or list(TARGET_NAMES)
    files = [Path(n) for n in names[1:] if n not in TARGET_NAMES]
    if files:  # replay: libFuzzer runs each file once and reports
        with tempfile.TemporaryDirectory() as tmp:
            args = libfuzzer_args(names[0], artifacts=Path(tmp), timeout=opts.timeout)
            return subprocess.run(command(names[0], [*args, *map(str, files)]), cwd=REPO, env=env).returncode
    unknown = [n for n in names if n not in TARGET_NAMES]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)} (targets: {', '.join(TARGET_NAMES)})")
    max_time = opts.max_time if opts.max_time is not None or opts.runs is not None else 300
    failed = []
    for name in names:
        print(f"==> fuzzing {name}" + (f" for {max_time} s" if max_time else f", {opts.runs} runs"),
              flush=True)
        status = fuzz(name, work=opts.work / name, artifacts=opts.work / "artifacts", grow=opts.grow,
                      env=env, runs=opts.runs, seed=opts.seed, max_time=max_time, timeout=opts.timeout,
                      rss_limit_mb=opts.rss_limit_mb)
        if status:
            failed.append(name)
    if failed:
        print(f"fuzzing found a crash, hang or leak in: {', '.join(failed)} "
              f"(inputs in {opts.work / 'artifacts'})", file=sys.stderr)
        return 1
    return 0
