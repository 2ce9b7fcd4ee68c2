"""A whole overlay on one machine: Kafka, the registration service, and every broker
served by one streaming query of a single Spark application (what ``onyx up`` runs,
and what the end-to-end tests, the demo and the benchmark use); or, ``distributed``
(``onyx up --distributed``), a Kafka cluster of three nodes (replication factor 3,
``min.insync.replicas`` 2) and a Spark standalone cluster (a master, two workers) on
loopback, with every broker a Spark application of its own submitted to it
(:mod:`broker.local.brokerapps`), as the Helm chart deploys them.

``secure`` (``onyx up --secure``): its Kafka authenticates every client (SASL/SCRAM) and allows
only what an ACL allows, and every component logs in as its own user with the rules of
:mod:`broker.deploy.acls` (what the Helm chart's ``KafkaUser`` s hold): the registration service
as ``onyx-registry``, the archive writer as ``onyx-archive``, each broker application as its
broker's user (one application serving every broker: one user allowed what any of them may do),
the status loop as ``onyx-monitor``. The passwords are kept in the overlay's folder
(:mod:`broker.local.kafka_users`).

>>> with LocalOverlay(builtin("figure4")) as cluster:        # doctest: +SKIP
...     cluster.api_url, cluster.bootstrap_servers
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker import config, kafka_auth, topics
from broker.dataplane.plan import Limits
from broker.deploy import acls
from broker.errors import SetupError
from broker.job import BrokerJob, BrokerSettings
from broker.kafka_auth import Credentials
from broker.local import kafka_users
from broker.local.brokerapps import BrokerApps
from broker.local.devcluster import KafkaDevCluster, free_port
from broker.local.sparkcluster import SparkStandalone
from broker.registry.serve import BackgroundServer, ServiceSettings
from routing.budget import Budget
from routing.overlay import Overlay


@dataclass
class OverlaySettings:
    """How to run a local overlay; ``bootstrap_servers`` reuses a running Kafka."""

    name: str = "local"
    bootstrap_servers: str | None = None
    api_port: int | None = None
    trigger: str = config.BROKER_TRIGGER
    link_format: str = "stream"
    limits: Limits = field(default_factory=Limits)
    fresh: bool = True  # start from nothing; False: resume the Kafka data, database and checkpoints left here
    mode: str = "route"  # "flood" / "floor": the benchmark's baselines (see broker.dataplane.plan)
    placement: str = config.PLACEMENT  # host choice of the registration service
    tasks: int = config.BROKER_TASKS
    budget: Budget | None = None  # routing-table budget of every broker (None: config.BROKER_TABLE_BUDGET)
    projection: bool = config.BROKER_PROJECTION
    bandwidth: float = config.LINK_BANDWIDTH  # bits/s of a link (incremental transformation's cost model)
    archive: bool = False  # run the archive writer beside the brokers (`onyx up`: config.ARCHIVE)
    kafka_nodes: int = 1  # nodes of the overlay's own Kafka (3: replication factor 3, min.insync.replicas 2)
    applications: bool = False  # every broker a Spark application of its own on a local standalone cluster
    secure: bool = False  # Kafka with SASL/SCRAM and ACLs, every component its own user (`onyx up --secure`)
    admin_token: str | None = config.ADMIN_TOKEN  # the registration service's operator token (`onyx up` makes one)
    delivery_topic_prefixes: tuple[str, ...] = config.DELIVERY_TOPIC_PREFIXES  # topics subscribers may name too

    @classmethod
    def distributed(cls, **kwargs) -> "OverlaySettings":
        """``onyx up --distributed``: a Kafka cluster of :data:`~broker.config.DIST_KAFKA_NODES`
        nodes and one Spark application per broker on a standalone cluster."""
        return cls(kafka_nodes=config.DIST_KAFKA_NODES, applications=True, **kwargs)


class LocalOverlay:
    """Start with :meth:`start` (or ``with``); stop with :meth:`stop`. ``spark``: a running
    SparkSession to serve the brokers' query in (default: one of its own); ``kafka``: a running
    local Kafka to use (default: one of its own, unless ``settings.bootstrap_servers``), which
    must be secure for a secure overlay (its super user makes the overlay's users)."""

    def __init__(self, overlay: Overlay, settings: OverlaySettings | None = None, spark=None,
                 kafka: KafkaDevCluster | None = None) -> None:
        self.overlay = overlay
        self.settings = settings or OverlaySettings()
        s = self.settings
        if s.secure and s.bootstrap_servers is not None:
            raise SetupError("a secure overlay runs a Kafka of its own, whose super user makes the overlay's users "
                             "and ACLs: drop --bootstrap-servers, or --secure (a Kafka you run is secured by you)")
        if kafka is not None and kafka.secure != s.secure:
            raise SetupError(f"the Kafka given is {'' if kafka.secure else 'not '}secure and the overlay is "
                             f"{'' if s.secure else 'not '}: start it with secure={s.secure}")
        self.dir = config.RUN_DIR / f"overlay-{self.settings.name}"
        self.kafka: KafkaDevCluster | None = kafka
        self._own_kafka = kafka is None
        self.users: dict[str, Credentials] = {}  # secure: the overlay's Kafka users, by user name
        self._process_user = False  # whether this overlay made the registry's user the process's
        self.service: BackgroundServer | None = None
        self.spark = spark
        self._own_spark = spark is None
        self.job: BrokerJob | BrokerApps | None = None  # the brokers, as one application or one each
        self.standalone: SparkStandalone | None = None  # the Spark cluster of a distributed overlay
        self.archive_writer: subprocess.Popen | None = None  # the archive writer's Spark application
        self._offsets = None  # a Kafka client for lag()
        self._status_lock = threading.Lock()  # status() runs for `onyx up`'s loop and for the service's console

    def data_dirs(self) -> list[Path]:
        """Where this overlay keeps what a restart resumes: its folder (the registration
        database, the brokers' checkpoints) and, with a Kafka of its own, Kafka's data
        (topics, records, committed offsets; the brokers' state logs among them)."""
        dirs = [self.dir]
        if self.settings.bootstrap_servers is None and self._own_kafka:
            dirs.append(self._kafka().dir)
        return dirs

    def _kafka(self) -> KafkaDevCluster:
        """The overlay's own Kafka: one node, or a cluster of several when distributed."""
        return KafkaDevCluster(name=f"overlay-{self.settings.name}", keep=not self.settings.fresh,
                               nodes=self.settings.kafka_nodes, secure=self.settings.secure)

    @property
    def users_file(self) -> Path | None:
        """Where a secure overlay keeps its Kafka users' passwords (0600); ``None``: not secure."""
        return self.dir / kafka_users.USERS_FILE if self.settings.secure else None

    @property
    def archive_dir(self) -> Path | None:
        """Where the archive writer keeps the archive (``None``: no archive)."""
        return self.dir / "archive" if self.settings.archive else None

    @property
    def bootstrap_servers(self) -> str:
        return self.settings.bootstrap_servers or self.kafka.bootstrap_servers

    @property
    def api_url(self) -> str:
        return self.service.url

    def topics(self) -> list[str]:
        """Every topic the overlay reads or writes (created up front)."""
        names = {topics.DEAD_LETTER, topics.CATALOG, topics.PROFILES}
        for b in self.overlay.brokers:
            names |= {topics.broker_topic(b), topics.delivery_topic(b)}
        names |= {topics.source_topic(s) for s in self.overlay.sources}
        return sorted(names)

    def start(self, progress=lambda msg: None) -> "LocalOverlay":
        if self.settings.fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.kafka is None and self.settings.bootstrap_servers is None:
            progress("starting Kafka" + (" (SASL/SCRAM, ACLs)" if self.settings.secure else ""))
            self.kafka = self._kafka().start()
        topics.ensure_topics(self.bootstrap_servers, self.topics(),
                             auth=self.kafka.admin_options() if self.kafka is not None else None)
        if self.settings.secure:
            progress("making the overlay's Kafka users and ACLs")
            self._make_users()
            # The service's clients name no user: they are the process's (as in its pod).
            kafka_auth.use_process_user(self.users[kafka_users.REGISTRY])
            self._process_user = True
        progress("starting the registration service")
        self.service = BackgroundServer(ServiceSettings(
            self.bootstrap_servers, copy.deepcopy(self.overlay), f"sqlite:///{self.dir / 'onyx.db'}",
            "127.0.0.1", self.settings.api_port or free_port(), self.settings.placement,
            admin_token=self.settings.admin_token, archive_dir=self.archive_dir, figures=self.status)).start()
        if self.settings.applications:
            self._start_applications(progress)
        else:
            self._start_query(progress)
        if self.archive_dir is not None:
            progress("starting the archive writer")
            self._start_archive_writer()
        return self

    def _make_users(self) -> None:
        """The overlay's Kafka users with the rules of :mod:`broker.deploy.acls`: the registration
        service, the archive writer (when it runs), one per broker application, the monitor."""
        s, ov = self.settings, self.overlay
        users = kafka_users.KafkaUsers(self.bootstrap_servers, self.kafka.super_user, self.dir)
        wanted = {kafka_users.REGISTRY: acls.registry_rules(ov, s.delivery_topic_prefixes),
                  kafka_users.MONITOR: acls.monitor_rules()}
        if self.archive_dir is not None:
            wanted[kafka_users.ARCHIVE] = acls.archive_rules(ov)
        for brokers in self._applications():
            wanted[kafka_users.broker_user(brokers)] = acls.application_rules(ov, brokers, s.delivery_topic_prefixes)
        self.users = {name: users.ensure(name, rules) for name, rules in wanted.items()}

    def _applications(self) -> list[list[str]]:
        """The brokers of each Spark application: one each, or all in one."""
        return [[b] for b in self.overlay.brokers] if self.settings.applications else [list(self.overlay.brokers)]

    def _user(self, name: str) -> Credentials | None:
        """A secure overlay's user ``name``; ``None`` when not secure (the process's user)."""
        return self.users.get(name) if self.settings.secure else None

    def _start_applications(self, progress) -> None:
        """A Spark standalone cluster, and every broker submitted to it as an application."""
        s = self.settings
        if s.mode != "route" or s.budget is not None or s.projection != config.BROKER_PROJECTION or s.limits != Limits() \
                or s.bandwidth != config.LINK_BANDWIDTH:
            # broker/job.py takes these from broker.config (the environment), as in Kubernetes.
            raise SetupError("per-broker applications run with the defaults of broker/config.py: set mode, table "
                             "budget, projection, limits and link bandwidth through the environment "
                             "(ONYX_TABLE_BUDGET, ONYX_BROKER_PROJECTION, ONYX_LINK_BANDWIDTH), not OverlaySettings")
        progress(f"starting Spark standalone (a master, {config.DIST_SPARK_WORKERS} workers)")
        self.standalone = SparkStandalone("cluster", run_dir=self.dir).start()
        progress(f"submitting brokers {', '.join(self.overlay.brokers)} as one Spark application each")
        self.job = BrokerApps(self.standalone, copy.deepcopy(self.overlay), self.bootstrap_servers, self.dir,
                              self.settings.link_format, self.settings.trigger,
                              credentials={b: self._user(kafka_users.broker_user([b])) for b in self.overlay.brokers})
        self.job.start()
        self.job.wait_running()

    def _start_query(self, progress) -> None:
        """One Spark application whose one streaming query serves every broker."""
        if self.spark is None:
            progress("starting Spark")
            from broker.spark.session import build_session

            self.spark = build_session(f"onyx-{self.settings.name}")
        progress(f"starting brokers {', '.join(self.overlay.brokers)}")
        self.job = BrokerJob(self.spark, BrokerSettings(
            self.overlay.brokers, copy.deepcopy(self.overlay), self.bootstrap_servers, self.dir / "brokers",
            self.settings.link_format, self.settings.trigger, self.settings.limits,
            mode=self.settings.mode, tasks=self.settings.tasks, projection=self.settings.projection,
            bandwidth=self.settings.bandwidth, credentials=self._user(kafka_users.broker_user(self.overlay.brokers)),
            **({"budget": self.settings.budget} if self.settings.budget is not None else {})))
        self.job.start()

    def _start_archive_writer(self) -> None:
        """The archive writer as a Spark application of its own (``broker.archive_job``,
        what the Helm chart runs), one core, at a lower CPU priority than the brokers: on
        a busy machine the archive falls behind and catches up, the brokers' latency does
        not pay for it (in the brokers' application its tasks took the brokers' slots:
        p50 +0.65 s at 20 msg/s in the outside probe)."""
        log = open(self.dir / "archive-writer.log", "ab")  # noqa: SIM115 - the child's, closed with it
        archive_user = self._user(kafka_users.ARCHIVE)
        env = {**os.environ, "ONYX_SPARK_MASTER": "local[1]", "ONYX_SPARK_DRIVER_MEMORY": config.ARCHIVE_DRIVER_MEMORY,
               **(kafka_auth.environment(archive_user) if archive_user else {})}
        self.archive_writer = subprocess.Popen(
            [sys.executable, "-m", "broker.archive_job", "--bootstrap-servers", self.bootstrap_servers,
             "--directory", str(self.archive_dir), "--checkpoint", str(self.dir / "archive-checkpoint"),
             "--trigger", config.ARCHIVE_TRIGGER, "--stop-with-stdin"],
            # The pipe on its stdin closes when this process ends, SIGKILL included, and
            # the writer stops then: a killed overlay leaves no writer behind to race the
            # next one's for the archive.
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
            preexec_fn=lambda: os.nice(config.ARCHIVE_NICE))
        log.close()

    def revive(self) -> list[str]:
        """Start again, from their checkpoints, the streaming queries that died (the
        brokers', the archive writer's: Kafka away for longer than their clients wait,
        say); returns what stopped each, for the log."""
        out = []
        why = self.job.revive()
        if why is not None:
            out.append(f"the brokers' streaming query had stopped ({why})")
        w = self.archive_writer
        if w is not None and w.poll() is not None:
            out.append(f"the archive writer had stopped (exit code {w.returncode}; its log: "
                       f"{self.dir / 'archive-writer.log'})")
            w.stdin.close()
            self._start_archive_writer()
        return out

    def lag(self) -> dict[str, int]:
        """Per broker: records on its inbound (and source) topics not processed yet."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        done = self.job.offsets()
        if self._offsets is None:  # one client for every call: this runs several times a second
            monitor = self._user(kafka_users.MONITOR)
            auth = kafka_auth.librdkafka_options(*monitor) if monitor else kafka_auth.librdkafka_options()
            self._offsets = AdminClient({"bootstrap.servers": self.bootstrap_servers, **auth})
        names = sorted({t for mine in done.values() for t in mine})
        meta = self._offsets.list_topics(timeout=10).topics
        parts = {TopicPartition(t, p): OffsetSpec.latest() for t in names if t in meta for p in sorted(meta[t].partitions)}
        per_topic: dict[str, int] = {}
        for tp, future in (self._offsets.list_offsets(parts, request_timeout=10).items() if parts else ()):
            per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(future.result().offset, 0)
        return {b: sum(max(0, per_topic.get(t, 0) - read) for t, read in mine.items()) for b, mine in done.items()}

    def wait_idle(self, timeout: float = 120.0, settle: float = 1.0) -> float:
        """Wait until every broker has processed everything on its topics (control
        packets included, so routing tables have converged); returns seconds waited."""
        start = time.monotonic()
        quiet_since = None
        while time.monotonic() - start < timeout:
            self.job.poll()
            if all(v == 0 for v in self.lag().values()):
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return time.monotonic() - start
            else:
                quiet_since = None
            time.sleep(0.3)
        raise TimeoutError(f"overlay still busy after {timeout:.0f}s: lag {self.lag()}")

    def status(self) -> dict:
        """Per broker what ``onyx status`` shows (and the console, ``/metrics``); no broker before they started."""
        with self._status_lock:
            if self.job is None or (isinstance(self.job, BrokerJob) and self.job.follower is None):
                return {"brokers": []}  # the streaming query has not started yet
            lag = self.lag()
            out = {"brokers": [dict(b, lag=lag.get(b["broker"])) for b in self.job.status()]}
        if self.archive_writer is not None:
            out["archive"] = self.archive_status()
        return out

    def archive_status(self) -> dict:
        """The archive writer: running or not, its pid, where it writes."""
        w = self.archive_writer
        return {"running": w is not None and w.poll() is None, "pid": w.pid if w is not None else None,
                "directory": str(self.archive_dir)}

    def cluster_info(self) -> dict:
        """What scripts and other Kafka clients need (written to ``.run/cluster.json``)."""
        default_source = sorted(self.overlay.sources)[0] if self.overlay.sources else None
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "api_url": self.api_url,
            "source_topic": topics.source_topic(default_source) if default_source else None,
            "sources": {s: topics.source_topic(s) for s in sorted(self.overlay.sources)},
            "brokers": self.overlay.brokers,
            "dead_letter_topic": topics.DEAD_LETTER,
            "archive_dir": str(self.archive_dir) if self.archive_dir is not None else None,
            "kafka_dir": str(self.kafka.dir) if self.kafka is not None else None,
            # Where the passwords are, never what they are.
            "secure": self.settings.secure,
            "kafka_users_file": str(self.users_file) if self.users_file is not None else None,
        }

    def write_cluster_json(self, path: Path, **extra) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self.cluster_info(), **extra}, indent=2))
        tmp.replace(path)

    def stop(self) -> None:
        if self.archive_writer is not None:
            self.archive_writer.stdin.close()
            self.archive_writer.terminate()
            try:
                self.archive_writer.wait(30)
            except subprocess.TimeoutExpired:
                self.archive_writer.kill()
                self.archive_writer.wait()
            self.archive_writer = None
        with self._status_lock:
            if self.job is not None:
                self.job.close()
                self.job = None
            self._offsets = None
        if self.service is not None:
            self.service.stop()
        if self.spark is not None and self._own_spark:
            self.spark.stop()
        if self.standalone is not None:
            self.standalone.stop()
            self.standalone = None
        if self._process_user:
            kafka_auth.restore_process_user()
            self._process_user = False
        if self.kafka is not None and self._own_kafka:
            self.kafka.stop()

    def __enter__(self) -> "LocalOverlay":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
