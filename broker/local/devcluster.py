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

``secure=True`` (``onyx up --secure``) makes it a Kafka that trusts nobody, as the Helm chart's:
clients authenticate with SASL/SCRAM and Kafka's standard authorizer allows only what an ACL
allows (``allow.everyone.if.no.acl.found=false``). Its super user (:data:`~broker.config.KAFKA_SUPER_USER`,
password generated at format time and kept in ``secrets.json`` beside the data, mode 0600) is
what the nodes talk to each other as and what creates the other users and their ACLs
(:mod:`broker.local.kafka_users`).

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
from broker.kafka_auth import Credentials, client_options
from broker.local.secret_files import new_secret, read_json, write_json, write_private

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms a secure local Kafka can serve (:data:`~broker.config.KAFKA_SASL_MECHANISM`)."""

CONTROLLER_USER = "onyx-controller"
"""The user the nodes of a secure local Kafka present on their controller listener."""


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


def super_user_of(kafka_dir: Path) -> Credentials:
    """The super user of the secure local Kafka whose data is in ``kafka_dir`` (what a command
    beside a running ``onyx up --secure`` makes users with)."""
    kept = read_json(kafka_dir / "secrets.json")
    if not kept:
        raise SetupError(f"no secure Kafka's passwords in {kafka_dir}: is the overlay running with --secure?")
    return Credentials(kept["super_user"], kept["password"])


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
        secure: bool = False,
    ) -> None:
        if nodes < 1:
            raise SetupError(f"a Kafka cluster needs at least one node, not {nodes}")
        if secure and config.KAFKA_SASL_MECHANISM not in SCRAM_MECHANISMS:
            raise SetupError(f"a secure local Kafka authenticates with {' or '.join(SCRAM_MECHANISMS)}, not "
                             f"ONYX_KAFKA_SASL_MECHANISM={config.KAFKA_SASL_MECHANISM}: unset it")
        self.name = name
        self.keep = keep
        self.secure = secure
        self.super_user: Credentials | None = None  # a secure cluster's, known once it is formatted
        self._controller_password: str | None = None
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

    @property
    def secrets_file(self) -> Path:
        """Where a secure cluster keeps its super user's and controller listener's passwords (0600)."""
        return self.dir / "secrets.json"

    def admin_options(self) -> dict[str, str]:
        """kafka-python options with which a client acts as the super user (none when not secure)."""
        return client_options(*self.super_user) if self.super_user else client_options(None, None)

    def _listeners(self, node: KafkaNode) -> list[str]:
        """Listener settings: open ones, or (secure) SASL on both listeners and the standard authorizer."""
        if not self.secure:
            return [f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"]
        mechanism = config.KAFKA_SASL_MECHANISM
        user, password = self.super_user
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
        plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
        controller = self._controller_password
        return [
            f"listeners=CLIENT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            f"advertised.listeners=CLIENT://127.0.0.1:{node.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            # Clients, and the nodes among themselves (as the super user), log in with SCRAM.
            "inter.broker.listener.name=CLIENT",
            f"sasl.enabled.mechanisms={mechanism}",
            f"sasl.mechanism.inter.broker.protocol={mechanism}",
            f'listener.name.client.{mechanism.lower()}.sasl.jaas.config={scram} required '
            f'username="{user}" password="{password}";',
            # KRaft cannot check SCRAM on the controller listener: SCRAM credentials live in the
            # metadata log the controllers serve, so a controller would need them before it has
            # them. The controller listener uses PLAIN with one static user instead, whose
            # password is generated like the super user's and written only here (mode 0600);
            # the same line gives the nodes the credentials they present to the controllers.
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            f'listener.name.controller.plain.sasl.jaas.config={plain} required username="{CONTROLLER_USER}" '
            f'password="{controller}" user_{CONTROLLER_USER}="{controller}";',
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found=false",
            # The nodes act as these users towards each other (replication, the controllers' RPCs).
            f"super.users=User:{user};User:{CONTROLLER_USER}",
        ]

    def _properties(self, node: KafkaNode) -> str:
        rf, isr = self.replication
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        return "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={node.node_id}",
                f"controller.quorum.voters={voters}",
                *self._listeners(node),
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
        if self.secure:
            self._secrets(formatted)
        cluster_id = new_cluster_id()
        jobs = []
        for node in self.nodes:
            node.dir.mkdir(parents=True, exist_ok=True)
            props = node.dir / "server.properties"
            self._write_properties(node)
            (node.dir / "log4j2.properties").write_text(_LOG4J2.format(log=node.log_file))
            if not formatted:
                jobs.append(subprocess.Popen(
                    self._java(java, node, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                               *self._bootstrap_users()),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for job in jobs:
            out, _ = job.communicate()
            if job.returncode != 0:
                raise KafkaStartError(f"formatting Kafka storage failed: {out.strip()[-500:]}")
        self._cluster_id = cluster_id

    def _secrets(self, formatted: bool) -> None:
        """A secure cluster's passwords: those kept beside data formatted with them, else new ones."""
        kept = read_json(self.secrets_file)
        if formatted and not kept:
            raise KafkaStartError(f"{self.dir} holds Kafka data without the passwords of its super user "
                                  f"({self.secrets_file} is missing): start from nothing (onyx up --fresh, or "
                                  "onyx reset), or run it without --secure")
        if not kept:
            kept = {"super_user": config.KAFKA_SUPER_USER, "password": new_secret(),
                    "controller_password": new_secret()}
            write_json(self.secrets_file, kept)
        self.super_user = Credentials(kept["super_user"], kept["password"])
        self._controller_password = kept["controller_password"]

    def _bootstrap_users(self) -> list[str]:
        """``kafka-storage format`` arguments that write the super user's SCRAM credential into the
        first metadata records, so that it can log in before any user could create it. (The
        password is on the tool's command line for the second it runs: readable by this machine's
        users through /proc for that second; the tool takes it no other way.)"""
        if not self.secure:
            return []
        user, password = self.super_user
        return ["--add-scram", f"{config.KAFKA_SASL_MECHANISM}=[name={user},password={password}]"]

    def _write_properties(self, node: KafkaNode) -> None:
        """Write ``node``'s server.properties (owner-only: a secure node's hold its passwords)."""
        props = node.dir / "server.properties"
        if self.secure:
            write_private(props, self._properties(node))
        else:
            props.write_text(self._properties(node))

    def _launch(self, java: str, node: KafkaNode) -> None:
        props = node.dir / "server.properties"
        self._write_properties(node)  # ports picked since the last start
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
                                                                    if n.running), request_timeout_ms=5000,
                                         **self.admin_options())
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
