"""A Kafka cluster on loopback in KRaft mode: one node by default (broker and
controller in one JVM), or several combined controller+broker nodes (``nodes=3``: what
``onyx up --distributed`` runs, with replication factor 3 and ``min.insync.replicas`` 2,
so the overlay survives the loss of a node).

Used by ``make run``, ``onyx kafka`` and the tests' session fixture. It formats a
fresh data directory per node under ``.run/``, picks free ports (or checks the ones given),
writes each node's log to a file, waits until clients can talk to every node, and stops
them cleanly. Each JVM is tied to the Python process that started it: if that process
dies, even by SIGKILL, Linux kills the JVM too (``PR_SET_PDEATHSIG``). One node of a
cluster can be killed (:meth:`KafkaDevCluster.kill_node`) and started again on its data
(:meth:`KafkaDevCluster.start_node`), as a crash and a restart would.

>>> with KafkaDevCluster() as kafka:            # doctest: +SKIP
...     print(kafka.bootstrap_servers)
127.0.0.1:40121
>>> replication(3), replication(1)
((3, 2), (1, 1))
"""

from __future__ import annotations

import atexit
import base64
import errno
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from broker import config
from broker.errors import KafkaStartError, SetupError
from broker.jvm import die_with_parent, find_java, jar_dir, kill_process, stop_processes


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


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def new_cluster_id() -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64, never starting with '-'.

    Kafka's own ids avoid a leading '-' because the storage tool's argument parser would
    read such an id as an option and refuse to format (1 random id in 64 would).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


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


def replication(nodes: int) -> tuple[int, int]:
    """Replication factor and ``min.insync.replicas`` of a cluster of ``nodes`` nodes: at most
    :data:`~broker.config.KAFKA_REPLICATION` copies, one fewer of which must acknowledge a write
    (one node may be lost without refusing writes); a single node keeps one copy."""
    rf = min(nodes, config.KAFKA_REPLICATION)
    return rf, max(1, min(rf - 1, config.KAFKA_MIN_INSYNC))


@dataclass
class KafkaNode:
    """One JVM of the cluster: its KRaft node id, folder, ports and process."""

    node_id: int
    dir: Path
    port: int | None
    controller_port: int | None
    proc: subprocess.Popen | None = None

    @property
    def log_file(self) -> Path:
        return self.dir / "kafka.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaDevCluster:
    """A KRaft Kafka cluster of ``nodes`` nodes on 127.0.0.1; start with :meth:`start` or a
    ``with`` block.

    ``port`` / ``controller_port``: fixed ports of the first node, checked free; ``None``
    picks free ones (the other nodes always get free ones). ``name``: the data directory
    is ``<run_dir>/kafka-<name>`` (a cluster's nodes in ``node-<id>/`` below it), wiped at
    start unless ``keep`` (then a node formatted before starts again on its data: its
    topics, records and committed offsets; the ports may differ, clients find it through
    its bootstrap address). A node started once by this object is never wiped again: a
    restart after :meth:`kill` or :meth:`kill_node` resumes its data.
    """

    def __init__(
        self,
        name: str = "dev",
        port: int | None = None,
        controller_port: int | None = None,
        run_dir: Path | None = None,
        heap: str | None = None,
        keep: bool = False,
        nodes: int = 1,
    ) -> None:
        if nodes < 1:
            raise SetupError(f"a Kafka cluster needs at least one node, not {nodes}")
        self.name = name
        self.keep = keep
        self.dir = (run_dir or config.RUN_DIR) / f"kafka-{name}"
        self.heap = heap or config.KAFKA_HEAP
        self.nodes = [KafkaNode(i, self.dir if nodes == 1 else self.dir / f"node-{i}",
                                port if i == 1 else None, controller_port if i == 1 else None)
                      for i in range(1, nodes + 1)]
        self._cluster_id: str | None = None  # set once the nodes are formatted by this object

    @property
    def port(self) -> int | None:
        return self.nodes[0].port

    @property
    def controller_port(self) -> int | None:
        return self.nodes[0].controller_port

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.nodes[0].proc

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def log_file(self) -> Path:
        return self.nodes[0].log_file

    @property
    def replication(self) -> tuple[int, int]:
        """This cluster's replication factor and ``min.insync.replicas``."""
        return replication(len(self.nodes))

    def _properties(self, node: KafkaNode) -> str:
        rf, isr = self.replication
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        return "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={node.node_id}",
                f"controller.quorum.voters={voters}",
                f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={node.dir / 'data'}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                f"default.replication.factor={rf}",
                f"min.insync.replicas={isr}",
                f"offsets.topic.replication.factor={rf}",
                "offsets.topic.num.partitions=4",
                f"transaction.state.log.replication.factor={rf}",
                f"transaction.state.log.min.isr={isr}",
                f"share.coordinator.state.topic.replication.factor={rf}",
                f"share.coordinator.state.topic.min.isr={isr}",
                "group.initial.rebalance.delay.ms=0",
                "log.flush.interval.messages=9223372036854775807",
                "",
            ]
        )

    def _java(self, java: str, node: KafkaNode, main: str, *args: str) -> list[str]:
        cp = str(jar_dir("kafka") / "*")
        return [
            java,
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={node.dir / 'log4j2.properties'}",
            "-cp",
            cp,
            main,
            *args,
        ]

    def start(self, timeout: float | None = None) -> "KafkaDevCluster":
        """Format storage (first start), launch every node's JVM that is not running and
        wait until each serves clients."""
        java = find_java()
        idle = [n for n in self.nodes if not n.running]
        if not idle:
            return self
        for node in idle:
            for attr in ("port", "controller_port"):
                value = getattr(node, attr)
                if value is None:
                    setattr(node, attr, free_port())
                elif node.proc is None and self._cluster_id is None:
                    check_port_free(value)
        ports = [p for n in self.nodes for p in (n.port, n.controller_port)]
        if len(set(ports)) != len(ports):
            raise SetupError("the Kafka client and controller ports must differ")
        if self._cluster_id is None:
            self._format(java)
        for node in idle:
            self._launch(java, node)
        atexit.register(self.stop)
        self._wait_ready(timeout if timeout is not None else config.KAFKA_START_TIMEOUT_S)
        return self

    def _format(self, java: str) -> None:
        """Write every node's configuration and format its storage with one cluster id
        (a node formatted before is kept as it is when ``keep``)."""
        formatted = self.keep and all((n.dir / "data" / "meta.properties").exists() for n in self.nodes)
        if not formatted:
            shutil.rmtree(self.dir, ignore_errors=True)
        cluster_id = new_cluster_id()
        jobs = []
        for node in self.nodes:
            node.dir.mkdir(parents=True, exist_ok=True)
            props = node.dir / "server.properties"
            props.write_text(self._properties(node))
            (node.dir / "log4j2.properties").write_text(_LOG4J2.format(log=node.log_file))
            if not formatted:
                jobs.append(subprocess.Popen(
                    self._java(java, node, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for job in jobs:
            out, _ = job.communicate()
            if job.returncode != 0:
                raise KafkaStartError(f"formatting Kafka storage failed: {out.strip()[-500:]}")
        self._cluster_id = cluster_id

    def _launch(self, java: str, node: KafkaNode) -> None:
        props = node.dir / "server.properties"
        props.write_text(self._properties(node))  # ports picked since the last start
        with open(node.dir / "stdout.log", "ab") as out:
            node.proc = subprocess.Popen(
                self._java(java, node, "kafka.Kafka", str(props)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            )

    def _wait_ready(self, timeout: float) -> None:
        """Wait until the cluster reports every running node as a broker."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | str | None = None
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    code = node.proc.returncode
                    node.proc = None
                    raise KafkaStartError(f"Kafka node {node.node_id} exited with code {code} while starting; "
                                          f"last log lines:\n{self._log_tail(node)}")
            up = {n.node_id for n in self.nodes if n.running}
            try:
                admin = KafkaAdminClient(bootstrap_servers=",".join(f"127.0.0.1:{n.port}" for n in self.nodes
                                                                    if n.running), request_timeout_ms=5000)
                try:
                    seen = {b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}
                    listening = {n.node_id for n in self.nodes if n.running and _listening(n.port)}
                    if up <= seen & listening:
                        return
                    last = f"nodes {sorted(seen & listening)} of {sorted(up)} serve clients"
                finally:
                    admin.close()
            except (KafkaError, OSError) as exc:
                last = exc
            time.sleep(0.3)
        self.stop()
        raise KafkaStartError(f"Kafka did not accept clients within {timeout:.0f}s ({last}); last log lines:\n"
                              f"{self._log_tail(self.nodes[0])}")

    def _log_tail(self, node: KafkaNode, lines: int = 15) -> str:
        for f in (node.log_file, node.dir / "stdout.log"):
            if f.exists() and f.stat().st_size:
                return "\n".join(f.read_text(errors="replace").splitlines()[-lines:])
        return "(no log written)"

    def stop(self, timeout: float = 30.0) -> None:
        """Shut every node down (SIGTERM to all, then SIGKILL after ``timeout`` seconds)."""
        procs = [n.proc for n in self.nodes if n.running]
        for node in self.nodes:
            node.proc = None
        stop_processes(procs, timeout)

    def kill(self) -> None:
        """End every node with SIGKILL, as a crash would (no clean shutdown: the next start
        recovers its logs)."""
        for node in self.nodes:
            self.kill_node(node.node_id)

    def kill_node(self, node_id: int) -> None:
        """End node ``node_id`` (1-based) with SIGKILL; the others carry on."""
        node = self.nodes[node_id - 1]
        proc, node.proc = node.proc, None
        kill_process(proc)

    def start_node(self, node_id: int, timeout: float | None = None) -> None:
        """Start node ``node_id`` again on its data and ports, and wait until it serves.
        Call it from a thread that outlives the node (the main thread): the kernel's
        parent-death signal follows the thread that started a process, not the process."""
        node = self.nodes[node_id - 1]
        if node.running:
            return
        self._launch(find_java(), node)
        self._wait_ready(timeout if timeout is not None else config.KAFKA_START_TIMEOUT_S)

    @property
    def running(self) -> bool:
        return all(n.running for n in self.nodes)

    def __enter__(self) -> "KafkaDevCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
