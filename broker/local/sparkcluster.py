"""A Spark standalone cluster on loopback: one master and some workers, started from the
jars and scripts the ``pyspark`` package ships (``bin/spark-class``), for ``onyx up
--distributed``, its tests and the benchmark.

Each daemon is a JVM under ``<run_dir>/spark-<name>/`` (its log, the worker's work folder
with its executors' logs) on free ports of 127.0.0.1, tied to the Python process that
started it (``PR_SET_PDEATHSIG``). A worker offers more cores than the machine has
(:data:`~broker.config.DIST_WORKER_CORES`): every broker is a Spark application of its
own and one worker must take all their executors when the other is lost.
:meth:`SparkStandalone.kill_worker` ends a worker with SIGKILL (its executors follow it:
they watch their worker) and :meth:`SparkStandalone.start_worker` starts it again.

>>> with SparkStandalone("demo") as spark:        # doctest: +SKIP
...     spark.master_url
'spark://127.0.0.1:41234'
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from broker import config
from broker.errors import SetupError, SparkClusterError
from broker.jvm import die_with_parent, find_java, kill_process, stop_processes
from broker.local.devcluster import free_port


def spark_home() -> Path:
    """The ``pyspark`` package folder: Spark's ``bin/`` scripts and ``jars/`` are in it."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise SetupError(f"{home} has no bin/spark-class: reinstall pyspark (`make setup`)")
    return home


def spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of Spark's scripts and of what they start (executors, Python
    workers): this Spark, this Java, this interpreter, this checkout on PYTHONPATH,
    everything on loopback."""
    java = find_java()
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "SPARK_HOME": str(spark_home()),
            "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(java).resolve().parent.parent),
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(p for p in (str(config.REPO_ROOT), path) if p),
            "SPARK_DAEMON_MEMORY": config.DIST_DAEMON_MEMORY, **(extra or {})}


@dataclass
class Daemon:
    """A master or worker JVM: its role, folder, ports and process."""

    name: str
    dir: Path
    port: int
    ui_port: int
    proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class SparkStandalone:
    """A master and ``workers`` workers; start with :meth:`start` or a ``with`` block."""

    def __init__(self, name: str = "dist", run_dir: Path | None = None, workers: int | None = None,
                 cores: int | None = None, memory: str | None = None) -> None:
        self.dir = (run_dir or config.RUN_DIR) / f"spark-{name}"
        self.cores = cores or config.DIST_WORKER_CORES
        self.memory = memory or config.DIST_WORKER_MEMORY
        n = workers or config.DIST_SPARK_WORKERS
        self.master = Daemon("master", self.dir / "master", free_port(), free_port())
        self.workers = [Daemon(f"worker-{i}", self.dir / f"worker-{i}", free_port(), free_port())
                        for i in range(1, n + 1)]

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master.ui_port}"

    def _launch(self, daemon: Daemon, main: str, *args: str) -> None:
        daemon.dir.mkdir(parents=True, exist_ok=True)
        with open(daemon.dir / "daemon.log", "ab") as log:
            # spark-class execs the JVM: the process we hold is the daemon itself.
            daemon.proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), main, "--host", "127.0.0.1", "--port", str(daemon.port),
                 "--webui-port", str(daemon.ui_port), *args],
                env=spark_env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent, start_new_session=True)

    def start(self, timeout: float | None = None) -> "SparkStandalone":
        """Start the master and every worker; wait until the master counts them alive."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self._launch(self.master, "org.apache.spark.deploy.master.Master")
        atexit.register(self.stop)
        for worker in self.workers:
            self.start_worker(worker, wait=False)
        self.wait_workers(len(self.workers), timeout)
        return self

    def start_worker(self, worker: Daemon | int, wait: bool = True, timeout: float | None = None) -> None:
        """Start a worker (a :class:`Daemon` or its 1-based number) with its cores and memory;
        from a thread that outlives it (the parent-death signal follows the starting thread)."""
        w = worker if isinstance(worker, Daemon) else self.workers[worker - 1]
        if w.running:
            return
        self._launch(w, "org.apache.spark.deploy.worker.Worker", "--cores", str(self.cores),
                     "--memory", self.memory, "--work-dir", str(w.dir / "work"), self.master_url)
        if wait:
            self.wait_workers(sum(x.running for x in self.workers), timeout)

    def kill_worker(self, number: int) -> None:
        """End worker ``number`` (1-based) with SIGKILL, as a lost machine would."""
        w = self.workers[number - 1]
        proc, w.proc = w.proc, None
        kill_process(proc)

    def state(self) -> dict:
        """The master's JSON view: workers, applications and their state."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as r:
            return json.load(r)

    def wait_workers(self, n: int, timeout: float | None = None) -> None:
        """Wait until the master counts ``n`` workers alive."""
        deadline = time.monotonic() + (timeout or config.DIST_START_TIMEOUT_S)
        last: object = None
        while time.monotonic() < deadline:
            for d in [self.master, *self.workers]:
                if d.proc is not None and d.proc.poll() is not None:
                    raise SparkClusterError(f"the Spark {d.name} exited with code {d.proc.returncode} while "
                                            f"starting; its log: {d.dir / 'daemon.log'}")
            try:
                alive = sum(w["state"] == "ALIVE" for w in self.state()["workers"])
                if alive >= n:
                    return
                last = f"{alive} of {n} workers alive"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = exc
            time.sleep(0.5)
        raise SparkClusterError(f"the Spark standalone cluster was not ready within "
                                f"{timeout or config.DIST_START_TIMEOUT_S:.0f}s ({last}); logs in {self.dir}")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers (their executors follow), then the master."""
        for group in (self.workers, [self.master]):
            procs = [d.proc for d in group if d.running]
            for d in group:
                d.proc = None
            stop_processes(procs, timeout)

    def __enter__(self) -> "SparkStandalone":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
