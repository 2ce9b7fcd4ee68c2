"""Session-wide fixtures: one real Kafka broker, one real SparkSession and one real PostgreSQL
server per test run; and, per test module that asks for it, a distributed overlay (a Kafka
cluster and a Spark standalone cluster on loopback)."""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from broker import config


@pytest.fixture(scope="session")
def kafka():
    """A real single-node KRaft Kafka broker on loopback, stopped when the session ends."""
    from broker.local.devcluster import KafkaDevCluster

    cluster = KafkaDevCluster(name=f"test-{os.getpid()}")
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on loopback (Debian's postgresql-15 binaries), stopped when the
    session ends; ``postgres.create_database(name)`` gives a fresh database's URL."""
    from broker.local.pgserver import PostgresDevServer

    server = PostgresDevServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """A real local SparkSession with the Kafka connector on its classpath."""
    from broker.spark.session import build_session

    session = build_session("onyx-tests")
    yield session
    session.stop()


@pytest.fixture
def unique():
    """A short unique suffix for topic names, so tests never read each other's records."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def corpus_files():
    """The news corpus files (``../shared/corpus/news``); skips when absent."""
    files = sorted(config.CORPUS_DIR.glob("*.xml")) if config.CORPUS_DIR.is_dir() else []
    if not files:
        pytest.skip(f"news corpus not found at {config.CORPUS_DIR}")
    return files


@pytest.fixture(scope="module")
def distributed_overlay(request):
    """``onyx up --distributed`` for a test module: a 3-node KRaft Kafka cluster (replication
    factor 3, min.insync.replicas 2), a Spark standalone master with 2 workers, every broker of
    the module's ``OVERLAY`` (default: ONYX Figure 4) a Spark application of its own, and the
    registration service; stopped at the end, and then nothing it started may still run."""
    from broker.local.cluster import LocalOverlay, OverlaySettings
    from routing.overlay import builtin
    from tests.broker.test_crash_restart import survivors

    name = f"dist-{request.module.__name__.rsplit('.', 1)[-1]}-{os.getpid()}"
    cluster = LocalOverlay(getattr(request.module, "OVERLAY", None) or builtin("figure4"),
                           OverlaySettings.distributed(name=name))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    left = survivors(f"overlay-{name}")
    assert left == [], f"processes of the distributed overlay still running: {left}"
    for d in cluster.data_dirs():
        shutil.rmtree(d, ignore_errors=True)
