"""A single-node Kafka broker (KRaft: broker and controller in one JVM) on loopback.

Used by ``make run``, ``onyx kafka`` and the tests' session fixture. It formats a
fresh data directory under ``.run/``, picks free ports (or checks the ones given),
writes the broker's log to a file, waits until clients can talk to it, and stops
it cleanly. The JVM is tied to the Python process that started it: if that process
dies, even by SIGKILL, Linux kills the JVM too (``PR_SET_PDEATHSIG``).

>>> with KafkaDevCluster() as kafka:            # doctest: +SKIP
...     print(kafka.bootstrap_servers)
127.0.0.1:40121
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import errno
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from broker import config
from broker.errors import KafkaStartError, SetupError
from broker.jvm import find_java, jar_dir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port_free(port: int) -> None:
    """Raise :class:`SetupError` if ``port`` on 127.0.0.1 is taken. As the servers that
    will bind it do (the JVM's listeners, uvicorn), with ``SO_REUSEADDR``: connections of a
    server stopped a moment ago linger in TIME_WAIT and must not count as taking it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SetupError(f"port {port} on 127.0.0.1 is already in use; pick another or stop what holds it") from None
            raise


def new_cluster_id() -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64, never starting with '-'.

    Kafka's own ids avoid a leading '-' because the storage tool's argument parser would
    read such an id as an option and refuse to format (1 random id in 64 would).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel to SIGKILL it when the
    # parent goes away, so no JVM outlives a crashed test run.
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaDevCluster:
    """One KRaft Kafka node on 127.0.0.1; start with :meth:`start` or a ``with`` block.

    ``port`` / ``controller_port``: fixed ports, checked free; ``None`` picks free ones.
    ``name``: the data directory is ``<run_dir>/kafka-<name>``, wiped at start unless
    ``keep`` (then a node formatted before starts again on its data: its topics, records
    and committed offsets; the ports may differ, clients find it through its bootstrap
    address).
    """

    def __init__(
        self,
        name: str = "dev",
        port: int | None = None,
        controller_port: int | None = None,
        run_dir: Path | None = None,
        heap: str | None = None,
        keep: bool = False,
    ) -> None:
        self.name = name
        self.keep = keep
        self.port = port
        self.controller_port = controller_port
        self.dir = (run_dir or config.RUN_DIR) / f"kafka-{name}"
        self.heap = heap or config.KAFKA_HEAP
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.dir / "kafka.log"

    def _properties(self) -> str:
        return "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={self.dir / 'data'}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.flush.interval.messages=9223372036854775807",
                "",
            ]
        )

    def _java(self, java: str, main: str, *args: str, **popen) -> list[str]:
        cp = str(jar_dir("kafka") / "*")
        return [
            java,
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            cp,
            main,
            *args,
        ]

    def start(self, timeout: float | None = None) -> "KafkaDevCluster":
        """Format storage, launch the JVM and wait until it serves clients."""
        if self.proc is not None:
            return self
        java = find_java()
        for attr in ("port", "controller_port"):
            value = getattr(self, attr)
            if value is None:
                setattr(self, attr, free_port())
            else:
                check_port_free(value)
        if self.port == self.controller_port:
            raise SetupError("the Kafka client and controller ports must differ")
        formatted = self.keep and (self.dir / "data" / "meta.properties").exists()
        if not formatted:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        props = self.dir / "server.properties"
        props.write_text(self._properties())
        (self.dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        if not formatted:
            fmt = subprocess.run(
                self._java(java, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(), "-c", str(props)),
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                raise KafkaStartError(f"formatting Kafka storage failed: {(fmt.stderr or fmt.stdout).strip()[-500:]}")
        with open(self.dir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                self._java(java, "kafka.Kafka", str(props)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            )
        atexit.register(self.stop)
        self._wait_ready(timeout if timeout is not None else config.KAFKA_START_TIMEOUT_S)
        return self

    def _wait_ready(self, timeout: float) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise KafkaStartError(f"Kafka exited with code {code} while starting; last log lines:\n{self._log_tail()}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000)
                try:
                    admin.describe_cluster()
                    return
                finally:
                    admin.close()
            except (KafkaError, OSError) as exc:
                last = exc
                time.sleep(0.3)
        self.stop()
        raise KafkaStartError(f"Kafka did not accept clients within {timeout:.0f}s ({last}); last log lines:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 15) -> str:
        for f in (self.log_file, self.dir / "stdout.log"):
            if f.exists() and f.stat().st_size:
                return "\n".join(f.read_text(errors="replace").splitlines()[-lines:])
        return "(no log written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the broker down (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """End the broker with SIGKILL, as a crash would (no clean shutdown: the next start
        recovers its logs)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "KafkaDevCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
