"""Every broker of an overlay as a Spark application of its own, submitted to a standalone
cluster (:mod:`broker.local.sparkcluster`) with ``spark-submit``, running the entry point
the Helm chart runs (``broker/job.py``); the driver's side of ``onyx up --distributed``.

:class:`BrokerApps` answers what :class:`~broker.job.BrokerJob` answers for the brokers of
one application (``status``, ``offsets``, ``poll``, ``revive``, ``close``), so the local
overlay, ``onyx status``, the demo and the benchmark watch either the same way: each
application writes its status to a JSON file every second (``--status-file``) and this
reads them. A driver can be killed (:meth:`BrokerApps.kill_driver`, SIGKILL to its
spark-submit JVM and its Python process) and submitted again (:meth:`BrokerApps.submit`):
it resumes from its checkpoint, and its broker's state from its state log.

>>> apps = BrokerApps(spark_cluster, overlay, "127.0.0.1:9092", Path(".run/x"))   # doctest: +SKIP
>>> apps.start(); apps.wait_running()                                                # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker import config, topics
from broker.errors import SparkClusterError
from broker.job import COUNTERS
from broker.jvm import die_with_parent
from broker.kafka_auth import Credentials, environment
from broker.local.sparkcluster import SparkStandalone, spark_env, spark_home
from broker.spark.session import LOG4J2_FILE, connector_jars
from routing.overlay import Overlay


class BrokerApps:
    """One Spark application per broker of ``overlay`` on ``cluster``; files under ``dir``
    (``overlay.yaml``, ``brokers/<id>/`` checkpoints, ``status/<id>.json``, ``logs/<id>.log``)."""

    def __init__(self, cluster: SparkStandalone, overlay: Overlay, bootstrap_servers: str, dir: Path,
                 link_format: str = "stream", trigger: str = config.BROKER_TRIGGER,
                 credentials: dict[str, Credentials | None] | None = None) -> None:
        self.cluster = cluster
        self.overlay = overlay
        self.bootstrap_servers = bootstrap_servers
        self.dir = dir
        self.link_format = link_format
        self.trigger = trigger
        self.credentials = credentials or {}  # each broker's Kafka user (missing or None: the process's)
        self.procs: dict[str, subprocess.Popen] = {}

    def status_file(self, broker: str) -> Path:
        return self.dir / "status" / f"{broker}.json"

    def log_file(self, broker: str) -> Path:
        return self.dir / "logs" / f"{broker}.log"

    def command(self, broker: str) -> list[str]:
        """The ``spark-submit`` command line of ``broker``'s application: one executor core,
        small driver and executor, the Kafka connector jars, this interpreter and checkout on
        the executors."""
        conf = {"spark.cores.max": config.DIST_APP_CORES, "spark.executor.cores": config.DIST_APP_CORES,
                "spark.executor.memory": config.DIST_EXECUTOR_MEMORY,
                "spark.executorEnv.PYTHONPATH": config.REPO_ROOT, "spark.pyspark.python": sys.executable,
                "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_FILE}"}
        return [str(spark_home() / "bin" / "spark-submit"), "--master", self.cluster.master_url,
                "--deploy-mode", "client", "--name", f"onyx-broker-{broker}",
                "--jars", ",".join(connector_jars()), "--driver-memory", config.DIST_DRIVER_MEMORY,
                "--driver-java-options", f"-Dlog4j2.configurationFile=file:{LOG4J2_FILE}",
                *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
                str(config.REPO_ROOT / "broker" / "job.py"),
                "--broker", broker, "--overlay", str(self.dir / "overlay.yaml"),
                "--bootstrap-servers", self.bootstrap_servers, "--checkpoint", str(self.dir / "brokers" / broker),
                "--link-format", self.link_format, "--trigger", self.trigger,
                "--status-file", str(self.status_file(broker)), "--die-with-parent"]

    def start(self) -> None:
        """Submit every broker's application (they start side by side)."""
        for sub in ("status", "logs", "brokers"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.overlay.dump(self.dir / "overlay.yaml")
        for broker in self.overlay.brokers:
            self.submit(broker)

    def submit(self, broker: str) -> None:
        """Submit ``broker``'s application (again, after a crash: it resumes from its checkpoint)."""
        self.status_file(broker).unlink(missing_ok=True)
        user = self.credentials.get(broker)
        # The driver logs in as the broker's user (its environment, as a deployed one's) and hands
        # the same settings to its executors' clients.
        env = spark_env({"ONYX_SPARK_MASTER": self.cluster.master_url,
                         "ONYX_SPARK_DRIVER_MEMORY": config.DIST_DRIVER_MEMORY,
                         "ONYX_BROKER_TASKS": str(config.DIST_APP_CORES), "PYTHONUNBUFFERED": "1",
                         **(environment(user) if user else {})})
        with open(self.log_file(broker), "ab") as log:
            self.procs[broker] = subprocess.Popen(self.command(broker), env=env, stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
                                                  start_new_session=True)

    def kill_driver(self, broker: str) -> None:
        """SIGKILL ``broker``'s driver (the spark-submit JVM and its Python process, one
        process group), as a crash of its machine would."""
        proc = self.procs[broker]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _read(self, broker: str) -> dict | None:
        try:
            return json.loads(self.status_file(broker).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def reporting(self) -> list[str]:
        """The brokers whose application runs and has written its status lately."""
        out = []
        for b in self.overlay.brokers:
            data, proc = self._read(b), self.procs.get(b)
            if (data is not None and proc is not None and proc.poll() is None
                    and time.time() - data["time"] < 30 * config.DIST_STATUS_EVERY_S
                    and all(s["running"] for s in data["status"])):
                out.append(b)
        return out

    def wait_running(self, timeout: float | None = None) -> float:
        """Wait until every application runs its streaming query; returns seconds waited."""
        start = time.monotonic()
        timeout = timeout or config.DIST_START_TIMEOUT_S
        while time.monotonic() - start < timeout:
            self.poll()
            if len(self.reporting()) == len(self.overlay.brokers):
                return time.monotonic() - start
            time.sleep(1)
        missing = sorted(set(self.overlay.brokers) - set(self.reporting()))
        raise SparkClusterError(f"broker application(s) {', '.join(missing)} not running within {timeout:.0f}s; "
                                f"logs: {self.dir / 'logs'}")

    def offsets(self) -> dict[str, dict[str, int]]:
        """Per broker, how far into each topic it reads its application has read (a broker
        not reporting yet: 0 into its inbound topic and the sources it is the root of)."""
        out = {}
        for b in self.overlay.brokers:
            data = self._read(b)
            if data is not None and b in data["offsets"]:
                out[b] = data["offsets"][b]
            else:
                out[b] = {t: 0 for t in [topics.broker_topic(b)] + [topics.source_topic(s) for s, r in
                                                                     self.overlay.sources.items() if r == b]}
        return out

    def status(self) -> list[dict]:
        """Per broker, what its application last reported (``running`` False when it does
        not run or has not reported yet)."""
        live = set(self.reporting())
        out = []
        for b in self.overlay.brokers:
            data = self._read(b)
            mine = next((s for s in (data or {}).get("status", []) if s["broker"] == b), None)
            if mine is None:
                mine = {"broker": b, **{n: 0 for n in COUNTERS}, "profiles": 0, "routing": {}, "budget": None,
                        "false_positives": {}, "seconds": {}, "offsets": {}}
            out.append({**mine, "running": b in live, "pid": self.procs[b].pid if b in self.procs else None})
        return out

    def poll(self) -> None:
        """Raise :class:`SparkClusterError` if an application has ended."""
        for b, proc in self.procs.items():
            if proc.poll() is not None:
                raise SparkClusterError(f"broker {b}'s application ended (exit code {proc.returncode}); "
                                        f"its log: {self.log_file(b)}")

    def revive(self) -> str | None:
        """Submit again the applications that ended; returns what ended, or None."""
        ended = [b for b, proc in self.procs.items() if proc.poll() is not None]
        for b in ended:
            self.submit(b)
        return f"broker application(s) {', '.join(ended)} had ended" if ended else None

    def close(self, timeout: float = 60.0) -> None:
        """Stop every application (SIGTERM to the driver, SIGKILL after ``timeout``)."""
        procs = [p for p in self.procs.values() if p.poll() is None]
        self.procs = {}
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
