"""The registration service: the HTTP API of DESIGN.md section 4 (FastAPI).

Sources get ids and root brokers; profiles are validated by the engine's parser (a bad
profile gets HTTP 422 with the parser's message and leaves nothing behind), get a host
broker from the placement strategy, are stored durably and sent as query packets to
the host broker. Updating or deleting a profile needs the token returned when it was
registered, in an ``X-Onyx-Token`` header (or ``Authorization: Bearer <token>``).
The OpenAPI description is served at ``/openapi.json``, interactive docs at ``/docs``.
"""

from __future__ import annotations

import re
import secrets
import threading
import uuid
from typing import Annotated

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

from broker import topics
from broker.control_packets import PacketSendError, Sender, announce_profile, announce_source, source_dictionary
from broker.placement import PlacementError, PlacementRequest, make_strategy
from broker.store import DuplicateError, ProfileRecord, SourceRecord, Store
from formats.errors import FormatError
from routing.overlay import Overlay
from yfilter import Engine, ProfileError

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_PROFILE_CHARS = 100_000


class SourceIn(BaseModel):
    name: str = Field(min_length=1, max_length=200, description="human-readable source name, unique")
    schema_text: str | None = Field(None, alias="schema", description="DTD or schema text (optional)")
    rate: float | None = Field(None, gt=0, description="expected messages per second")
    size: int | None = Field(None, gt=0, description="expected message size in bytes")
    root_broker: str | None = Field(None, description="root broker to use (default: least-used broker)")


class SourceOut(BaseModel):
    source_id: str
    root_broker: str
    topic: str


class Delivery(BaseModel):
    topic: str | None = Field(None, description="Kafka topic for deliveries (default onyx.deliver.<host broker>)")

    @field_validator("topic")
    @classmethod
    def _legal_topic(cls, v: str | None) -> str | None:
        if v is not None and not _TOPIC.match(v):
            raise ValueError("a Kafka topic name has 1-249 characters from letters, digits, '.', '_' and '-'")
        return v


class ProfileIn(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_PROFILE_CHARS, description="XPath filter or FLWR query")
    delivery: Delivery | None = None
    near: str | None = Field(None, description="broker the subscriber is close to (placement hint)")
    location: tuple[float, float] | None = Field(None, description="subscriber coordinates (placement hint)")


class ProfileUpdate(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_PROFILE_CHARS)
    delivery: Delivery | None = None


class ProfileRegistered(BaseModel):
    profile_id: str
    host_broker: str
    token: str
    delivery_topic: str


class ProfileView(BaseModel):
    profile_id: str
    text: str
    host_broker: str
    delivery_topic: str
    version: int


class BrokerView(BaseModel):
    broker_id: str
    topic: str
    profiles: int
    neighbours: list[str]
    sources: list[str]


def validate_profile(text: str) -> None:
    """Raise :class:`ProfileError` unless the engine accepts ``text``."""
    Engine().add("validation", text)


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:40]
    return slug or "source"


def _token(x_onyx_token: str | None, authorization: str | None) -> str:
    if x_onyx_token:
        return x_onyx_token
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    raise HTTPException(401, "this needs the profile's token: send it as X-Onyx-Token or Authorization: Bearer")


class MoveView(BaseModel):
    profile_id: str
    from_broker: str
    to_broker: str


def create_app(store: Store, overlay: Overlay, sender: Sender, placement: str = "nearest",
               admin_token: str | None = None) -> FastAPI:
    """The registration service over a store, an overlay and a packet sender;
    ``placement`` names the host-choice strategy, ``admin_token`` enables the operator
    endpoint ``POST /rebalance``."""
    placer = make_strategy(placement, overlay)
    placer.restore((p.id, p.text, p.host_broker) for p in store.list_profiles())
    placing = threading.Lock()  # requests run in a thread pool; strategies keep state
    app = FastAPI(title="Onyx registration service", version="0.1.0",
                  description="Register data sources and subscriber profiles of the Onyx XML dissemination overlay.")
    known_sources = {s.id for s in store.list_sources()}
    for source_id, root in sorted(overlay.sources.items()):
        if source_id not in known_sources:
            record = SourceRecord(source_id, source_id, root, None, None, None)
            with store.transaction() as tx:
                tx.add_source(record)
                announce_source(sender, record)
    for s in store.list_sources():
        overlay.sources.setdefault(s.id, s.root_broker)

    @app.exception_handler(ProfileError)
    async def _profile_error(_: Request, exc: ProfileError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc), "column": exc.column})

    @app.exception_handler(PlacementError)
    async def _placement_error(_: Request, exc: PlacementError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.exception_handler(PacketSendError)
    async def _kafka_down(_: Request, exc: PacketSendError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": f"{exc}; nothing was changed, try again"})

    @app.exception_handler(DuplicateError)
    async def _duplicate(_: Request, exc: DuplicateError) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    def authorized(profile_id: str, token: str) -> ProfileRecord:
        record = store.profile(profile_id)
        if record is None:
            raise HTTPException(404, f"no profile {profile_id!r}")
        if not store.token_matches(profile_id, token):
            raise HTTPException(403, "wrong token for this profile")
        return record

    @app.post("/sources", response_model=SourceOut, status_code=201, summary="Register a data source")
    def register_source(body: SourceIn) -> SourceOut:
        if body.root_broker is not None and body.root_broker not in overlay.graph:
            raise HTTPException(422, f"unknown root broker {body.root_broker!r}; brokers: {overlay.brokers}")
        source_id = _slug(body.name)
        if store.source(source_id) is not None:
            raise HTTPException(409, f"a source with id {source_id!r} is already registered")
        load = {b: 0 for b in overlay.brokers}
        for s in store.list_sources():
            load[s.root_broker] = load.get(s.root_broker, 0) + 1
        root = body.root_broker or min(overlay.brokers, key=lambda b: (load[b], b))
        record = SourceRecord(source_id, body.name, root, body.schema_text, body.rate, body.size)
        try:
            source_dictionary(record)
        except FormatError as exc:
            raise HTTPException(422, f"schema: {exc}") from None
        with store.transaction() as tx:
            tx.add_source(record)
            announce_source(sender, record)
        overlay.sources[source_id] = root
        return SourceOut(source_id=source_id, root_broker=root, topic=topics.source_topic(source_id))

    @app.post("/profiles", response_model=ProfileRegistered, status_code=201, summary="Register a profile")
    def register_profile(body: ProfileIn) -> ProfileRegistered:
        validate_profile(body.text)
        profile_id = uuid.uuid4().hex[:16]
        with placing:
            host = placer.choose(PlacementRequest(overlay, store.profile_counts(), body.near, body.location,
                                                  body.text, profile_id))
            topic = (body.delivery.topic if body.delivery else None) or topics.delivery_topic(host)
            record = ProfileRecord(profile_id, body.text, host, topic, 1)
            token = secrets.token_urlsafe(24)
            try:
                with store.transaction() as tx:
                    tx.add_profile(record, token)
                    announce_profile(sender, "add", record)
            except Exception:
                placer.forget(profile_id)  # not registered after all
                raise
        return ProfileRegistered(profile_id=record.id, host_broker=host, token=token, delivery_topic=topic)

    @app.get("/profiles/{profile_id}", response_model=ProfileView, summary="Inspect a profile")
    def get_profile(profile_id: str) -> ProfileView:
        record = store.profile(profile_id)
        if record is None:
            raise HTTPException(404, f"no profile {profile_id!r}")
        return ProfileView(profile_id=record.id, text=record.text, host_broker=record.host_broker,
                           delivery_topic=record.delivery_topic, version=record.version)

    @app.put("/profiles/{profile_id}", response_model=ProfileView, summary="Replace a profile's text")
    def update_profile(profile_id: str, body: ProfileUpdate,
                       x_onyx_token: Annotated[str | None, Header()] = None,
                       authorization: Annotated[str | None, Header()] = None) -> ProfileView:
        old = authorized(profile_id, _token(x_onyx_token, authorization))
        validate_profile(body.text)
        topic = (body.delivery.topic if body.delivery else None) or old.delivery_topic
        record = ProfileRecord(old.id, body.text, old.host_broker, topic, old.version + 1)
        with store.transaction() as tx:
            tx.update_profile(record)
            announce_profile(sender, "update", record)
        return ProfileView(profile_id=record.id, text=record.text, host_broker=record.host_broker,
                           delivery_topic=record.delivery_topic, version=record.version)

    @app.delete("/profiles/{profile_id}", status_code=204, summary="Delete a profile")
    def delete_profile(profile_id: str,
                       x_onyx_token: Annotated[str | None, Header()] = None,
                       authorization: Annotated[str | None, Header()] = None) -> None:
        old = authorized(profile_id, _token(x_onyx_token, authorization))
        record = ProfileRecord(old.id, old.text, old.host_broker, old.delivery_topic, old.version + 1)
        with placing:
            with store.transaction() as tx:
                tx.delete_profile(profile_id)
                announce_profile(sender, "delete", record)
            placer.forget(profile_id)

    @app.post("/rebalance", response_model=list[MoveView], summary="Re-place profiles (operators)")
    def rebalance(x_onyx_admin_token: Annotated[str | None, Header()] = None) -> list[MoveView]:
        """Ask the placement strategy for a better placement of the registered profiles
        and move them: each moved profile is deleted at its old host and added at its
        new one (two versions, so every broker applies them in the right order); its
        delivery topic stays the same."""
        if admin_token is None:
            raise HTTPException(403, "operator endpoints are disabled: start the service with ONYX_ADMIN_TOKEN set")
        if x_onyx_admin_token is None or not secrets.compare_digest(x_onyx_admin_token, admin_token):
            raise HTTPException(401, "this needs the operator token in X-Onyx-Admin-Token")
        done = []
        with placing:
            for move in placer.rebalance():
                old = store.profile(move.profile_id)
                if old is None or old.host_broker != move.from_broker:
                    continue
                gone = ProfileRecord(old.id, old.text, old.host_broker, old.delivery_topic, old.version + 1)
                moved = ProfileRecord(old.id, old.text, move.to_broker, old.delivery_topic, old.version + 2)
                with store.transaction() as tx:
                    tx.update_profile(moved)
                    announce_profile(sender, "delete", gone)
                    announce_profile(sender, "add", moved)
                done.append(MoveView(**move._asdict()))
        return done

    @app.get("/brokers", response_model=list[BrokerView], summary="The brokers of the overlay")
    def list_brokers() -> list[BrokerView]:
        counts = store.profile_counts()
        return [BrokerView(broker_id=b, topic=topics.broker_topic(b), profiles=counts.get(b, 0),
                           neighbours=sorted(overlay.graph.neighbors(b)),
                           sources=sorted(s for s, r in overlay.sources.items() if r == b))
                for b in overlay.brokers]

    @app.get("/health", summary="Liveness and readiness")
    def health() -> JSONResponse:
        try:
            store.ping()
        except Exception as exc:  # any database failure means "not ready", reported, not raised
            return JSONResponse(status_code=503, content={"status": "unavailable", "database": str(exc)[:200]})
        return JSONResponse(content={"status": "ok", "database": "ok", "brokers": len(overlay.brokers)})

    return app
