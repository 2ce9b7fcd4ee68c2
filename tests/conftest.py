"""Session-wide fixtures: one real Kafka broker, one real SparkSession and one real PostgreSQL
server per test run."""

from __future__ import annotations

import os
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
