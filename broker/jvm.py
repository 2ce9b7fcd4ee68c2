"""Java and the jars ``make jvm`` fetched, for the local Kafka broker and for Spark, and
the tie of a started JVM to its parent.

Both the Kafka dev cluster (:mod:`broker.local.devcluster`) and the SparkSession
(:mod:`broker.spark.session`) start a JVM: they find it, and the jars it needs, here.
The local clusters' JVMs and a broker application's driver end with the process that
started them (:func:`die_with_parent`).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import shutil
import subprocess
import sys
from pathlib import Path

from broker import config
from broker.errors import SetupError

MIN_JAVA = 17


def find_java() -> str:
    """Path of the ``java`` launcher (``$JAVA_HOME/bin/java`` first); checks the version."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not java:
        raise SetupError(f"Java not found: install a JDK {MIN_JAVA} or newer, or set JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise SetupError(f"cannot tell the Java version of {java}: {out.strip()[:200]}")
    major = int(match.group(1))
    if major == 1:  # "1.8.0" style
        major = int(match.group(2) or 0)
    if major < MIN_JAVA:
        raise SetupError(f"{java} is Java {major}; Kafka and Spark need Java {MIN_JAVA} or newer")
    return java


def jar_dir(name: str) -> Path:
    """A folder of fetched jars (``kafka`` or ``spark-kafka``), checked to be non-empty."""
    folder = config.JVM_LIB_DIR / name
    if not any(folder.glob("*.jar")):
        raise SetupError(f"no jars in {folder}: run `make jvm` to fetch them from Maven Central")
    return folder


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent goes away, so no JVM or
    driver outlives a crashed run (a ``preexec_fn`` between fork and exec, or a process's
    own first call)."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_processes(procs: list[subprocess.Popen], timeout: float) -> None:
    """SIGTERM to every process of ``procs`` at once, then wait for each; one still running
    after ``timeout`` seconds gets SIGKILL."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_process(proc)


def kill_process(proc: subprocess.Popen | None) -> None:
    """End ``proc`` with SIGKILL, as a crash would, and reap it (nothing if it is gone)."""
    if proc is not None and proc.poll() is None:
        proc.kill()
    if proc is not None:
        proc.wait()
