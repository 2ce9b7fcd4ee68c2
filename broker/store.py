"""Durable storage of registered sources and profiles (SQLite file or PostgreSQL).

One SQLAlchemy Core schema serves both databases. Tokens are stored as SHA-256
hashes: the registration response is the only place a profile's token appears.

>>> s = Store("sqlite://")
>>> with s.transaction() as tx:
...     tx.add_source(SourceRecord("afp", "AFP wire", "b1", None, 10.0, 4096))
>>> s.source("afp").root_broker
'b1'
"""

from __future__ import annotations

import hashlib
import hmac
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from sqlalchemy import (Column, DateTime, Float, Integer, MetaData, String, Table, Text,
                        create_engine, delete, func, insert, select, update)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

metadata = MetaData()

sources = Table(
    "sources", metadata,
    Column("id", String(63), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("root_broker", String(63), nullable=False),
    Column("schema", Text),
    Column("rate", Float),
    Column("size", Integer),
    Column("created", DateTime(timezone=True), nullable=False),
)

profiles = Table(
    "profiles", metadata,
    Column("id", String(63), primary_key=True),
    Column("text", Text, nullable=False),
    Column("host_broker", String(63), nullable=False, index=True),
    Column("delivery_topic", String(249), nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("updated", DateTime(timezone=True), nullable=False),
)


class DuplicateError(ValueError):
    """A record with that id or name is already registered."""


@dataclass(frozen=True)
class SourceRecord:
    id: str
    name: str
    root_broker: str
    schema: str | None
    rate: float | None
    size: int | None


@dataclass(frozen=True)
class ProfileRecord:
    id: str
    text: str
    host_broker: str
    delivery_topic: str
    version: int


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Transaction:
    """Writes inside one database transaction (see :meth:`Store.transaction`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def add_source(self, s: SourceRecord) -> None:
        try:
            self.conn.execute(insert(sources).values(
                id=s.id, name=s.name, root_broker=s.root_broker, schema=s.schema,
                rate=s.rate, size=s.size, created=_now()))
        except IntegrityError:
            raise DuplicateError(f"a source named {s.name!r} or with id {s.id!r} is already registered") from None

    def add_profile(self, p: ProfileRecord, token: str) -> None:
        now = _now()
        try:
            self.conn.execute(insert(profiles).values(
                id=p.id, text=p.text, host_broker=p.host_broker, delivery_topic=p.delivery_topic,
                token_hash=hash_token(token), version=p.version, created=now, updated=now))
        except IntegrityError:
            raise DuplicateError(f"profile id {p.id!r} is already registered") from None

    def update_profile(self, p: ProfileRecord) -> None:
        self.conn.execute(update(profiles).where(profiles.c.id == p.id).values(
            text=p.text, host_broker=p.host_broker, delivery_topic=p.delivery_topic, version=p.version,
            updated=_now()))

    def delete_profile(self, profile_id: str) -> None:
        self.conn.execute(delete(profiles).where(profiles.c.id == profile_id))


class Store:
    """Sources and profiles in a database named by a SQLAlchemy URL."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.url = url
        if url.startswith("sqlite"):
            # Requests run in a thread pool; an in-memory database must be one shared connection.
            memory = url in ("sqlite://", "sqlite:///:memory:")
            self.engine = create_engine(url, connect_args={"check_same_thread": False},
                                        poolclass=StaticPool if memory else None)
        else:
            self.engine = create_engine(url, pool_pre_ping=True)
        metadata.create_all(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Commit on success, roll back if the block raises (nothing half-registered)."""
        with self.engine.begin() as conn:
            yield Transaction(conn)

    def source(self, source_id: str) -> SourceRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(sources).where(sources.c.id == source_id)).first()
        return SourceRecord(row.id, row.name, row.root_broker, row.schema, row.rate, row.size) if row else None

    def list_sources(self) -> list[SourceRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(sources).order_by(sources.c.id)).all()
        return [SourceRecord(r.id, r.name, r.root_broker, r.schema, r.rate, r.size) for r in rows]

    def profile(self, profile_id: str) -> ProfileRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(profiles).where(profiles.c.id == profile_id)).first()
        return ProfileRecord(row.id, row.text, row.host_broker, row.delivery_topic, row.version) if row else None

    def list_profiles(self, host_broker: str | None = None) -> list[ProfileRecord]:
        query = select(profiles).order_by(profiles.c.created, profiles.c.id)  # registration order
        if host_broker is not None:
            query = query.where(profiles.c.host_broker == host_broker)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [ProfileRecord(r.id, r.text, r.host_broker, r.delivery_topic, r.version) for r in rows]

    def token_matches(self, profile_id: str, token: str) -> bool:
        with self.engine.connect() as conn:
            stored = conn.execute(select(profiles.c.token_hash).where(profiles.c.id == profile_id)).scalar()
        return stored is not None and hmac.compare_digest(stored, hash_token(token))

    def profile_counts(self) -> dict[str, int]:
        """Number of profiles hosted per broker."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(profiles.c.host_broker, func.count()).group_by(profiles.c.host_broker)).all()
        return {b: n for b, n in rows}

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(select(1))
