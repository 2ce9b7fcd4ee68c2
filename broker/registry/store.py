"""Durable storage of registered sources, publishers, subscribers and profiles (SQLite file or PostgreSQL).

One SQLAlchemy Core schema serves both databases. Tokens are stored as SHA-256
hashes: the registration response is the only place a profile's, a subscriber's or a
publisher's token appears. A subscriber owns its profiles and its delivery topics
(``delivery_topics``: the first subscriber to claim a topic owns it). A publisher owns
the sources it registered (``sources.owner``; none: the operator's) and says who may
read their archive (``source_grants``, or ``sources.public``): the tenant model of
:mod:`broker.registry.access`.

>>> s = Store("sqlite://")
>>> with s.transaction() as tx:
...     tx.add_source(SourceRecord("afp", "AFP wire", "b1", None, 10.0, 4096))
...     tx.add_subscriber("s1", "secret")
...     tx.claim_topic("alerts.sf", "s1")
True
>>> s.source("afp").root_broker, s.subscriber_by_token("secret").id, s.topic_owner("alerts_sf")
('b1', 's1', ('alerts.sf', 's1'))
>>> with s.transaction() as tx:
...     tx.grant("afp", "s1")
True
>>> s.readable_sources("s1"), s.readable_sources("s2"), s.source_access("afp")
({'afp'}, set(), SourceAccess(owner=None, public=False))

A database written by a version without subscribers is upgraded when a :class:`Store`
opens it (:func:`_upgrade`): the new tables are created and ``profiles`` gets its
``subscriber_id`` column (and ``delivery_by``: NULL, copies, for every profile already there); the profiles already there have no subscriber, and the custom
topics they deliver to are recorded as claimed by nobody, so that no subscriber can
take them over.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

from sqlalchemy import (Boolean, Column, DateTime, Float, Integer, MetaData, String, Table, Text, create_engine,
                        delete, event, func, insert, inspect, or_, select, text, update)
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
    # The publisher that registered it (NULL: the operator's, or registered before publishers existed).
    Column("owner", String(63), index=True),
    # Whether every subscriber may read its archive (otherwise: the ones in source_grants).
    Column("public", Boolean, nullable=False, server_default=text("false")),
)

publishers = Table(
    "publishers", metadata,
    Column("id", String(63), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

source_grants = Table(
    "source_grants", metadata,
    # Subscriber subscriber_id may read source source_id's archive (replay, queries, backfill).
    Column("source_id", String(63), primary_key=True),
    Column("subscriber_id", String(63), primary_key=True, index=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

profiles = Table(
    "profiles", metadata,
    Column("id", String(63), primary_key=True),
    Column("text", Text, nullable=False),
    Column("host_broker", String(63), nullable=False, index=True),
    Column("delivery_topic", String(249), nullable=False),
    # Indexed: a profile's token names its profile (see Store.profile_by_token).
    Column("token_hash", String(64), nullable=False, index=True),
    Column("version", Integer, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("updated", DateTime(timezone=True), nullable=False),
    # NULL for profiles registered before subscribers existed (see _upgrade).
    Column("subscriber_id", String(63), index=True),
    # 'reference': deliveries carry a reference to the archived message (docs/deliveries.md);
    # NULL: the message itself (and every profile stored before the choice existed).
    Column("delivery_by", String(16)),
)

subscribers = Table(
    "subscribers", metadata,
    Column("id", String(63), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

delivery_topics = Table(
    "delivery_topics", metadata,
    # topics.collision_key(topic): Kafka treats 'a.b' and 'a_b' as one name, so they have one owner.
    Column("key", String(249), primary_key=True),
    Column("topic", String(249), nullable=False),
    # NULL: named by a profile registered before subscribers existed; nobody may claim it.
    Column("subscriber_id", String(63), index=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

webhooks = Table(
    "webhooks", metadata,
    # A profile whose deliveries are also POSTed to a URL (broker.registry.webhooks); the
    # secret signs them, so it is kept as it is (the service needs it), unlike tokens.
    Column("profile_id", String(63), primary_key=True),
    Column("url", Text, nullable=False),
    Column("secret", String(64), nullable=False),
    Column("subscriber_id", String(63)),
    Column("created", DateTime(timezone=True), nullable=False),
)

settings = Table(
    "settings", metadata,
    # identity: a random id of this database, which the service puts on what it writes to
    # the profile log, so that recovery (broker.registry.recovery) reads only its own records.
    Column("key", String(63), primary_key=True),
    Column("value", Text, nullable=False),
)


class DuplicateError(ValueError):
    """A record with that id or name is already registered."""


class TopicTakenError(DuplicateError):
    """The delivery topic (or a name Kafka considers the same) belongs to someone else."""


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
    subscriber_id: str | None = None  # None: registered before subscribers existed
    delivery_by: str = "copy"  # or "reference": deliveries carry a reference to the archived message


@dataclass(frozen=True)
class WebhookRecord:
    profile_id: str
    url: str
    secret: str
    subscriber_id: str | None
    delivery_topic: str


@dataclass(frozen=True)
class SubscriberRecord:
    id: str


@dataclass(frozen=True)
class PublisherRecord:
    id: str


@dataclass(frozen=True)
class SourceAccess:
    """Who owns a source (a publisher id; ``None``: the operator) and whether it is public."""

    owner: str | None
    public: bool


def hash_token(token: str) -> str:
    """The SHA-256 of a token, as stored (a token from a JSON body may hold a lone surrogate)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _collision_key(topic: str) -> str:
    """Kafka's own rule ('.' and '_' collide); :func:`broker.topics.collision_key`,
    repeated here so that the store does not depend on the broker's topic module."""
    return topic.replace(".", "_")


def _profile(row) -> ProfileRecord:
    return ProfileRecord(row.id, row.text, row.host_broker, row.delivery_topic, row.version, row.subscriber_id,
                         row.delivery_by or "copy")


def _by(p: ProfileRecord) -> str | None:
    """The ``delivery_by`` column of ``p`` (NULL: copies, the default)."""
    return None if p.delivery_by == "copy" else p.delivery_by


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Transaction:
    """Writes inside one database transaction (see :meth:`Store.transaction`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.claimed: list[str] = []  # topics newly claimed in this transaction (to create in Kafka)

    def add_source(self, s: SourceRecord, owner: str | None = None, public: bool = False) -> None:
        try:
            self.conn.execute(insert(sources).values(
                id=s.id, name=s.name, root_broker=s.root_broker, schema=s.schema,
                rate=s.rate, size=s.size, created=_now(), owner=owner, public=public))
        except IntegrityError:
            raise DuplicateError(f"a source named {s.name!r} or with id {s.id!r} is already registered") from None

    def add_publisher(self, publisher_id: str, token: str) -> None:
        try:
            self.conn.execute(insert(publishers).values(id=publisher_id, token_hash=hash_token(token),
                                                        created=_now()))
        except IntegrityError:
            raise DuplicateError(f"publisher id {publisher_id!r} is already registered") from None

    def set_public(self, source_id: str, public: bool) -> None:
        self.conn.execute(update(sources).where(sources.c.id == source_id).values(public=public))

    def grant(self, source_id: str, subscriber_id: str) -> bool:
        """Let ``subscriber_id`` read ``source_id``'s archive; False if it already could."""
        found = self.conn.execute(select(source_grants.c.source_id).where(
            source_grants.c.source_id == source_id, source_grants.c.subscriber_id == subscriber_id)).first()
        if found is not None:
            return False
        self.conn.execute(insert(source_grants).values(source_id=source_id, subscriber_id=subscriber_id,
                                                       created=_now()))
        return True

    def revoke(self, source_id: str, subscriber_id: str) -> bool:
        """Undo :meth:`grant`; False if there was no such grant."""
        done = self.conn.execute(delete(source_grants).where(
            source_grants.c.source_id == source_id, source_grants.c.subscriber_id == subscriber_id))
        return done.rowcount > 0

    def topic_in_use(self, topic: str, subscriber_id: str) -> bool:
        """Whether a profile of ``subscriber_id`` delivers to ``topic`` (in this transaction)."""
        return self.conn.execute(select(profiles.c.id).where(profiles.c.delivery_topic == topic,
                                                             profiles.c.subscriber_id == subscriber_id)
                                 ).first() is not None

    def release_topic(self, topic: str, subscriber_id: str) -> None:
        """Give up ``subscriber_id``'s claim on ``topic`` (no profile delivers there any more)."""
        self.conn.execute(delete(delivery_topics).where(delivery_topics.c.key == _collision_key(topic),
                                                        delivery_topics.c.subscriber_id == subscriber_id))

    def add_subscriber(self, subscriber_id: str, token: str) -> None:
        try:
            self.conn.execute(insert(subscribers).values(id=subscriber_id, token_hash=hash_token(token),
                                                         created=_now()))
        except IntegrityError:
            raise DuplicateError(f"subscriber id {subscriber_id!r} is already registered") from None

    def claim_topic(self, topic: str, subscriber_id: str) -> bool:
        """Make ``subscriber_id`` the owner of ``topic`` unless someone else owns it (or a
        name Kafka considers the same): :class:`TopicTakenError`. True if newly claimed,
        False if the subscriber already owned it."""
        key = _collision_key(topic)
        row = self.conn.execute(select(delivery_topics).where(delivery_topics.c.key == key)).first()
        if row is None:
            try:
                self.conn.execute(insert(delivery_topics).values(key=key, topic=topic, subscriber_id=subscriber_id,
                                                                 created=_now()))
            except IntegrityError:  # claimed by a concurrent request between the select and here
                raise TopicTakenError(f"delivery topic {topic} was just taken by another request: "
                                      "name another topic, or omit delivery.topic to use your own") from None
            self.claimed.append(topic)
            return True
        if row.subscriber_id == subscriber_id and row.topic == topic:
            return False
        same = "" if row.topic == topic else f" as {row.topic} (Kafka treats '.' and '_' in topic names as the same)"
        owner = "another subscriber" if row.subscriber_id else "a profile registered before subscribers existed"
        raise TopicTakenError(f"delivery topic {topic} is already taken{same} by {owner}: "
                              "name another topic, or omit delivery.topic to use your own default topic")

    def add_profile(self, p: ProfileRecord, token: str) -> None:
        now = _now()
        try:
            self.conn.execute(insert(profiles).values(
                id=p.id, text=p.text, host_broker=p.host_broker, delivery_topic=p.delivery_topic,
                token_hash=hash_token(token), version=p.version, created=now, updated=now,
                subscriber_id=p.subscriber_id, delivery_by=_by(p)))
        except IntegrityError:
            raise DuplicateError(f"profile id {p.id!r} is already registered") from None

    def add_profiles(self, records: Sequence[tuple[ProfileRecord, str]]) -> None:
        """:meth:`add_profile` for many ``(profile, token)`` pairs, in one statement."""
        now = _now()
        rows = [{"id": p.id, "text": p.text, "host_broker": p.host_broker, "delivery_topic": p.delivery_topic,
                 "token_hash": hash_token(token), "version": p.version, "created": now, "updated": now,
                 "subscriber_id": p.subscriber_id, "delivery_by": _by(p)} for p, token in records]
        if not rows:
            return
        try:
            self.conn.execute(insert(profiles), rows)
        except IntegrityError:
            raise DuplicateError("a profile id of the batch is already registered") from None

    def unclaim_topic(self, topic: str) -> None:
        """Undo :meth:`claim_topic` of ``topic`` in this transaction (it could not be created)."""
        if topic in self.claimed:
            self.claimed.remove(topic)
            self.conn.execute(delete(delivery_topics).where(delivery_topics.c.key == _collision_key(topic)))

    def update_profile(self, p: ProfileRecord) -> None:
        self.conn.execute(update(profiles).where(profiles.c.id == p.id).values(
            text=p.text, host_broker=p.host_broker, delivery_topic=p.delivery_topic, version=p.version,
            delivery_by=_by(p), updated=_now()))

    def delete_profile(self, profile_id: str) -> None:
        self.conn.execute(delete(profiles).where(profiles.c.id == profile_id))
        self.conn.execute(delete(webhooks).where(webhooks.c.profile_id == profile_id))

    def set_webhook(self, profile_id: str, url: str | None, secret: str | None, subscriber_id: str | None) -> None:
        """POST the profile's deliveries to ``url`` signed with ``secret`` (``url`` None: no more)."""
        self.conn.execute(delete(webhooks).where(webhooks.c.profile_id == profile_id))
        if url is not None:
            self.conn.execute(insert(webhooks).values(profile_id=profile_id, url=url, secret=secret,
                                                      subscriber_id=subscriber_id, created=_now()))


def _write_ahead_log(dbapi_connection, _record) -> None:
    """A SQLite file in write-ahead-log mode: a commit appends to the log and syncs it once
    (``synchronous=FULL``: as durable as before), where the default rollback journal
    syncs the journal and the database file and deletes the journal; it halved a
    registration's commit here, more when the disk is busy. Readers no longer wait for a
    writer. The log (``<file>-wal``, ``<file>-shm``) lives next to the file."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


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
            if not memory:
                event.listen(self.engine, "connect", _write_ahead_log)
        else:
            self.engine = create_engine(url, pool_pre_ping=True)
        # SQLite has one writer at a time; the others wait in its busy handler, which
        # sleeps in growing steps (up to 100 ms) and wakes to try again. Concurrent
        # changes queue on a lock here instead, and each starts as the one before
        # commits: 8 clients changing profiles at once went from about 100 to (see
        # bench.churn) changes/s. Other databases take concurrent writers themselves.
        self._writer = threading.RLock() if url.startswith("sqlite") else nullcontext()
        with self.engine.begin() as conn:
            metadata.create_all(conn)
            _upgrade(conn)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Commit on success, roll back if the block raises (nothing half-registered)."""
        with self._writer, self.engine.begin() as conn:
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
        return _profile(row) if row else None

    def list_profiles(self, host_broker: str | None = None) -> list[ProfileRecord]:
        query = select(profiles).order_by(profiles.c.created, profiles.c.id)  # registration order
        if host_broker is not None:
            query = query.where(profiles.c.host_broker == host_broker)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [_profile(r) for r in rows]

    def token_matches(self, profile_id: str, token: str) -> bool:
        with self.engine.connect() as conn:
            stored = conn.execute(select(profiles.c.token_hash).where(profiles.c.id == profile_id)).scalar()
        return stored is not None and hmac.compare_digest(stored, hash_token(token))

    def subscriber_by_token(self, token: str) -> SubscriberRecord | None:
        """The subscriber whose token this is (tokens are unique; looked up by their hash)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(subscribers.c.id).where(subscribers.c.token_hash == hash_token(token))).first()
        return SubscriberRecord(row.id) if row else None

    def publisher_by_token(self, token: str) -> PublisherRecord | None:
        """The publisher whose token this is (looked up by its hash)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(publishers.c.id).where(publishers.c.token_hash == hash_token(token))).first()
        return PublisherRecord(row.id) if row else None

    def profile_by_token(self, token: str) -> ProfileRecord | None:
        """The profile whose token this is (looked up by its hash), or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(select(profiles).where(profiles.c.token_hash == hash_token(token))).first()
        return _profile(row) if row else None

    def source_access(self, source_id: str) -> SourceAccess | None:
        """The source's owner and whether it is public (``None``: no such source)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(sources.c.owner, sources.c.public).where(sources.c.id == source_id)).first()
        return SourceAccess(row.owner, bool(row.public)) if row else None

    def readable_sources(self, subscriber_id: str) -> set[str]:
        """The sources whose archive ``subscriber_id`` may read: the public ones and those granted to it."""
        granted = select(source_grants.c.source_id).where(source_grants.c.subscriber_id == subscriber_id)
        query = select(sources.c.id).where(or_(sources.c.public.is_(True), sources.c.id.in_(granted)))
        with self.engine.connect() as conn:
            return {r.id for r in conn.execute(query)}

    def owned_sources(self, publisher_id: str) -> set[str]:
        """The sources ``publisher_id`` registered."""
        with self.engine.connect() as conn:
            return {r.id for r in conn.execute(select(sources.c.id).where(sources.c.owner == publisher_id))}

    def grants(self, source_id: str) -> list[str]:
        """The subscribers granted ``source_id``, in id order."""
        with self.engine.connect() as conn:
            return [r.subscriber_id for r in conn.execute(select(source_grants.c.subscriber_id).where(
                source_grants.c.source_id == source_id).order_by(source_grants.c.subscriber_id))]

    def subscriber(self, subscriber_id: str) -> SubscriberRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(subscribers.c.id).where(subscribers.c.id == subscriber_id)).first()
        return SubscriberRecord(row.id) if row else None

    def topic_owner(self, topic: str) -> tuple[str, str | None] | None:
        """``(claimed name, owner)`` of ``topic`` or a name Kafka considers the same, or
        ``None`` if nobody claimed it (owner ``None``: a profile from before subscribers)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(delivery_topics).where(
                delivery_topics.c.key == _collision_key(topic))).first()
        return (row.topic, row.subscriber_id) if row else None

    def counts(self) -> dict[str, int]:
        """How many subscribers, claimed delivery topics and profiles are stored."""
        with self.engine.connect() as conn:
            return {name: conn.execute(select(func.count()).select_from(table)).scalar()
                    for name, table in (("subscribers", subscribers), ("delivery_topics", delivery_topics),
                                        ("profiles", profiles))}

    def profile_counts(self) -> dict[str, int]:
        """Number of profiles hosted per broker."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(profiles.c.host_broker, func.count()).group_by(profiles.c.host_broker)).all()
        return {b: n for b, n in rows}

    def webhooks(self) -> list[WebhookRecord]:
        """Every profile's webhook, with the profile's delivery topic."""
        query = select(webhooks, profiles.c.delivery_topic).join(profiles, profiles.c.id == webhooks.c.profile_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [WebhookRecord(r.profile_id, r.url, r.secret, r.subscriber_id, r.delivery_topic) for r in rows]

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(select(1))

    def identity(self) -> str:
        """This database's random id (made on first use, then kept)."""
        with self.transaction() as tx:
            conn = tx.conn
            value = conn.execute(select(settings.c.value).where(settings.c.key == "identity")).scalar()
            if value is None:
                value = uuid.uuid4().hex
                conn.execute(insert(settings).values(key="identity", value=value))
        return value


def _upgrade(conn: Connection) -> None:
    """Bring a database from before subscribers or publishers up to this schema (see the
    module docstring), and give an older ``profiles`` table its index of token hashes;
    does nothing to a current one. Runs inside the opening transaction. Sources from
    before publishers have no owner (the operator's) and are not public."""
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_profiles_token_hash ON profiles (token_hash)"))
    if "delivery_by" not in {c["name"] for c in inspect(conn).get_columns("profiles")}:
        conn.execute(text("ALTER TABLE profiles ADD COLUMN delivery_by VARCHAR(16)"))  # NULL: copies, as before
    if "owner" not in {c["name"] for c in inspect(conn).get_columns("sources")}:
        conn.execute(text("ALTER TABLE sources ADD COLUMN owner VARCHAR(63)"))
        conn.execute(text("ALTER TABLE sources ADD COLUMN public BOOLEAN NOT NULL DEFAULT false"))
        for index in sources.indexes:
            index.create(conn)
    if "subscriber_id" in {c["name"] for c in inspect(conn).get_columns("profiles")}:
        return
    conn.execute(text("ALTER TABLE profiles ADD COLUMN subscriber_id VARCHAR(63)"))
    for index in profiles.indexes:
        if profiles.c.subscriber_id in index.columns.values():
            index.create(conn)
    now = _now()
    claimed: set[str] = set()
    for (topic,) in conn.execute(text("SELECT DISTINCT delivery_topic FROM profiles")).all():
        key = _collision_key(topic)
        if not topic.startswith("onyx.") and key not in claimed:  # onyx.* is the overlay's, never claimable
            conn.execute(insert(delivery_topics).values(key=key, topic=topic, subscriber_id=None, created=now))
            claimed.add(key)
