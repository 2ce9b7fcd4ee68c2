"""The registration service: the HTTP API of DESIGN.md section 4 (FastAPI).

Sources get ids and root brokers; profiles are validated by the engine's parser (a bad
profile gets HTTP 422 with the parser's message and leaves nothing behind), get a host
broker from the placement strategy, are stored durably and sent as query packets to
the host broker. Updating or deleting a profile needs the token returned when it was
registered, in an ``X-Onyx-Token`` header (or ``Authorization: Bearer <token>``).

Every profile belongs to a subscriber (:mod:`broker.registry.subscribers`): the one whose token
comes in ``X-Onyx-Subscriber-Token``, or a new one, created with the profile and returned
with it. A profile delivers to its subscriber's own topic ``onyx.deliver.<subscriber id>``
unless it names another; a topic the overlay uses itself is refused (422), one another
subscriber owns too (409). Profiles stored by an older version with such a topic are
refused when the service starts (:func:`refuse_internal_profiles`).

``POST /profiles:batch`` registers up to :data:`MAX_BATCH` profiles of one subscriber in
one request: each item is checked as ``POST /profiles`` checks its body and is refused on
its own (its status and error in the answer, which is 200 with one result per item); the
others are stored in one transaction and sent as one batch of query packets.
The OpenAPI description is served at ``/openapi.json``, interactive docs at ``/docs``: it
documents every status each operation answers and its body (every error is an
:class:`Error`, ``{"detail": ..., "column": ...}``, FastAPI's own validation errors
included), the tokens as security schemes, the links between operations and the limits
(:mod:`broker.registry.limits`: request body sizes, 413; a rate of registrations per
subscriber, 429 with ``Retry-After``); ``tests/broker/test_api_conformance.py`` holds the
running service to it with schemathesis.

A profile may also have its deliveries POSTed to a webhook (``delivery.webhook``, checked by
:func:`broker.registry.webhooks.check_url`; its signing secret is returned once as
``webhook_secret``); the delivery stream, the console and ``/metrics`` are added by
:mod:`broker.registry.serve` from their own modules.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (AllowInfNan, BaseModel, Field, Strict, ValidationError, WithJsonSchema,
                      field_validator)
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from broker import config, topics
from broker.registry.access import (PROFILE_TOKEN_HEADER, PUBLISHER_TOKEN_HEADER, SUBSCRIBER_TOKEN_HEADER, Access,
                                    Caller, describe, install)
from broker.registry.control_packets import (PacketSendError, Sender, announce_changes, announce_profile,
                                             announce_profiles, announce_source, source_dictionary)
from broker.metadata.provider import MetadataProvider
from broker.registry.health import DatabasePing
from broker.registry.hosts import HostCheck, allowed_hosts as default_hosts
from broker.registry.limits import BodyLimit, RateLimited, RateLimiter
from broker.registry.metadata_api import ProfileFeed, add_metadata, source_doc, stored_documents
from broker.registry.store import DuplicateError, ProfileRecord, SourceRecord, Store
from broker.registry.subscribers import (TOPIC_JSON_SCHEMA, SubscriberError, Subscribers, TopicNotAllowedError,
                                         UnknownSubscriberError, legal_topic, topic_json_schema)
from broker.registry.topic_admin import NoTopicAdmin, TopicAdmin, TopicAdminError, TopicRefusedError
from broker.registry.webhooks import WebhookRefusedError, check_url
from formats.errors import FormatError
from routing.overlay import Overlay
from routing.placement import PlacementError, PlacementOptions, PlacementRequest, make_strategy
from yfilter import ProfileError, validate

MAX_PROFILE_CHARS = 100_000
MAX_SCHEMA_CHARS = 1_000_000  # a source's DTD or XML Schema (a caller without a token: config.ANONYMOUS_MAX_CHARS)
MAX_BATCH = 10_000  # profiles per POST /profiles:batch, changes per POST /profiles:changes
MAX_BATCH_CHARS = 2_000_000  # profile text over all items of one batch (about 12 s of parsing at most)
MAX_BATCH_BYTES = 64 * 1024 * 1024  # request body of POST /profiles:batch and /profiles:changes
MAX_BODY_BYTES = 2 * 1024 * 1024  # request body of every other operation: a profile of 100,000 characters fits
# even when each is sent as a 12-byte escaped surrogate pair (\ud83d\ude00)
MAX_SIZE = 2**53 - 1  # a source's expected message size: the largest integer every JSON reader keeps exact
BATCH_PATH = "/profiles:batch"
CHANGES_PATH = "/profiles:changes"
log = logging.getLogger("onyx.service")


def whole_number(value: Any) -> Any:
    """A JSON number without a fraction as an int (JSON Schema's integer includes 1.0)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Numbers as JSON Schema has them: a JSON number and nothing else (no "1", no true),
# finite; an integer may be written 1.0.
JsonFloat = Annotated[float, Strict(), AllowInfNan(False)]
JsonInt = Annotated[int, Strict()]  # with a "before" validator calling whole_number
JsonBool = Annotated[bool, Strict()]  # true or false, not 0 or "yes"


class Error(BaseModel):
    """Every error answer of the service (and every refused item of a batch)."""

    detail: str = Field(description="what went wrong, and what to do about it")
    column: int | None = Field(None, description="for a profile the parser refuses (or a query the query service's "
                               "cache cannot reason about): the 1-based column in its text where the offending "
                               "construct starts")


# A source's name goes into XML (its metadata document) and logs: printable characters XML
# 1.0 allows, no control characters (the JSON Schema pattern; the validator says why, and
# refuses lone surrogates too, which a JSON string may hold and no pattern can name).
NAME_PATTERN = "^[^\\x00-\\x1f\\x7f-\\x9f\\ufffe\\uffff]+$"
_NOT_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable_name(name: str) -> str:
    """``name`` if it has no control character and nothing XML cannot hold, else ValueError.

    >>> printable_name("AFP wire")
    'AFP wire'
    >>> printable_name("c1\x01x")
    Traceback (most recent call last):
    ...
    ValueError: a name holds no control characters (found U+0001 at character 3)
    """
    bad = _NOT_IN_NAMES.search(name)
    if bad is not None:
        raise ValueError(f"a name holds no control characters (found U+{ord(bad.group()):04X} at character "
                         f"{bad.start() + 1})")
    return name


class SourceIn(BaseModel):
    name: str = Field(min_length=1, max_length=200, description="human-readable source name, unique: printable "
                      "characters (no control characters)", json_schema_extra={"pattern": NAME_PATTERN})
    schema_text: str | None = Field(None, alias="schema", max_length=MAX_SCHEMA_CHARS,
                                    description=f"DTD or XML Schema text (optional; up to {MAX_SCHEMA_CHARS:,} "
                                                f"characters, {config.ANONYMOUS_MAX_CHARS:,} without a token)",
                                    json_schema_extra={"format": "onyx-schema"})
    rate: JsonFloat | None = Field(None, gt=0, description="expected messages per second")
    size: JsonInt | None = Field(None, gt=0, le=MAX_SIZE, description="expected message size in bytes")
    root_broker: str | None = Field(None, description="root broker to use (default: least-used broker)")
    public: JsonBool = Field(False, description="whether every subscriber may read the source's archive (replay, "
                         "queries, backfill); otherwise only the subscribers granted it (PUT "
                         "/sources/{source_id}/grants/{subscriber_id})")

    @field_validator("size", mode="before")
    @classmethod
    def _whole_size(cls, v: Any) -> Any:
        return whole_number(v)

    @field_validator("name")
    @classmethod
    def _printable(cls, v: str) -> str:
        return printable_name(v)


class SourceOut(BaseModel):
    source_id: str
    root_broker: str
    topic: str
    public: bool = Field(description="whether every subscriber may read its archive")
    publisher_id: str | None = Field(None, description="the publisher owning the source (null: the operator)")
    publisher_token: str | None = Field(None, description=f"only when the request had no token: the token of the "
                                        f"publisher created with this source (send it as {PUBLISHER_TOKEN_HEADER} "
                                        "to register more sources and grant subscribers this one)")


class PublisherRegistered(BaseModel):
    publisher_id: str
    token: str = Field(description=f"send it as {PUBLISHER_TOKEN_HEADER} to register sources and manage them")


class SourceView(BaseModel):
    source_id: str
    name: str
    root_broker: str
    topic: str
    public: bool
    publisher_id: str | None = Field(description="the publisher owning it (null: the operator)")


class SourcePatch(BaseModel):
    public: JsonBool = Field(description="whether every subscriber may read the source's archive")


class GrantsView(BaseModel):
    source_id: str
    public: bool
    subscribers: list[str] = Field(description="the subscribers granted the source's archive, in id order")


class Delivery(BaseModel):
    topic: Annotated[str, WithJsonSchema(TOPIC_JSON_SCHEMA)] | None = Field(
        None, description="Kafka topic for deliveries (default: the subscriber's own onyx.deliver.<subscriber id>). "
                          "A topic you name becomes yours: it must be in your namespace onyx.deliver.<subscriber "
                          "id>.<name> or under a prefix the operator allows (422 otherwise, and for Kafka's own __* "
                          "topics), and not be another subscriber's, nor a topic that exists in Kafka without having "
                          "been created for you (409)")

    by: Literal["copy", "reference"] | None = Field(
        None, description="copy (the default): each delivery record carries the message; reference: it carries "
                          "a small JSON reference (message_id, source, href) and the message is fetched once with "
                          "GET /profiles/{id}/messages/{message_id} from the archive (the Claim Check pattern). "
                          "A transformation profile's results are delivered as they are whatever it asks. On "
                          "PUT, omitted: as it was")

    @field_validator("topic")
    @classmethod
    def _legal_topic(cls, v: str | None) -> str | None:
        return legal_topic(v)


def delivery_by(requested: str | None, current: str = "copy") -> str:
    """How a profile delivers: ``requested`` (``None``: ``current``, as registered). Any profile
    may ask for references; a transformation profile's results are documents of their own,
    which the archive does not hold, so the brokers deliver them as they are whatever it asked
    (the choice applies once an update makes it a filter). Not refused, so that every request
    the OpenAPI description admits is accepted.

    >>> delivery_by("reference"), delivery_by(None, "reference"), delivery_by(None)
    ('reference', 'reference', 'copy')
    """
    return requested or current


class DeliveryWithWebhook(Delivery):
    webhook: str | None = Field(None, min_length=1, max_length=2000, json_schema_extra={
        "format": "onyx-webhook"}, description=(
        "also POST each delivery to this http(s) URL, signed with the webhook_secret the registration returns "
        "(X-Onyx-Signature: sha256=HMAC-SHA256(secret, '<X-Onyx-Timestamp>.<X-Onyx-Message-Id>\\n<body>')), "
        "retried with backoff, dead-lettered after the last attempt; a URL whose host resolves to a loopback, "
        "private, link-local or other non-public address (IPv6 forms with an IPv4 address inside included) is "
        "refused (422) unless the operator allows it. POST /profiles only"))


class ProfileIn(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_PROFILE_CHARS, description="XPath filter or FLWR query",
                      json_schema_extra={"format": "onyx-profile"})
    delivery: DeliveryWithWebhook | None = None
    near: str | None = Field(None, description="broker the subscriber is close to (placement hint)")
    location: tuple[JsonFloat, JsonFloat] | None = Field(None, description="subscriber coordinates (placement hint)")


class ProfileUpdate(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_PROFILE_CHARS, json_schema_extra={"format": "onyx-profile"})
    delivery: Delivery | None = None


class ProfileRegistered(BaseModel):
    profile_id: str
    host_broker: str
    token: str = Field(description="the profile's token, needed to update or delete it")
    delivery_topic: str = Field(description="deliveries: Kafka records listing profile_id in their onyx-profiles "
                                "header (the key is the first id listed), header onyx-message-id (docs/deliveries.md)")
    delivery_by: str | None = Field(None, description="only for a profile delivering by reference: reference")
    subscriber_id: str = Field(description="the subscriber owning the profile")
    subscriber_token: str | None = Field(None, description=f"only when the request had no {SUBSCRIBER_TOKEN_HEADER}: "
                                         "the token of the subscriber created with this profile; send it with your "
                                         "next profiles so they share its delivery topic")
    webhook_secret: str | None = Field(None, description="only for a profile with delivery.webhook: the key of "
                                       "the HMAC-SHA256 signature of its POSTs (shown once)")


_BATCH_EXAMPLE = {"profiles": [
    {"text": "/nitf[head/pubdata/@edition.area='SF']", "near": "b5"},
    {"text": "/nitf/head/parent::x"},
    {"text": "for $n in $msg/nitf where $n//tobject.subject/@tobject.subject.type = 'Stock' "
             "return <stock>{$n/head/title}</stock>", "delivery": {"topic": "onyx.deliver.s3f1c2a9d8e7b6a50.stock"}},
]}


def _any_item(model: str, what: str) -> WithJsonSchema:
    """The schema of a list item checked on its own (a bad item is refused alone, in the
    results, and the request still succeeds): ``model``, or any other JSON value."""
    return WithJsonSchema({"anyOf": [{"$ref": f"#/components/schemas/{model}"},
                                     {"description": f"anything that is not {what} is refused alone: its result has "
                                                     "status 422 and error"}]})


class ProfileBatchIn(BaseModel):
    model_config = {"json_schema_extra": {"examples": [_BATCH_EXAMPLE]}}

    profiles: list[Annotated[Any, _any_item("ProfileIn", "a POST /profiles body")]] = Field(
        min_length=1, max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH:,} profiles, each what POST /profiles takes (text, optional delivery, near, "
                    "location); registered all together, except the ones refused")


class BatchItem(BaseModel):
    index: int = Field(description="the item's position in the request's profiles (0-based)")
    status: int = Field(description="201: registered (profile); otherwise the status POST /profiles would have "
                        "answered for this item alone: 422 (not a profile, a bad field, a delivery topic of the "
                        "overlay or one Kafka refuses, an unknown broker in near) or 409 (a delivery topic another "
                        "subscriber owns), with error")
    profile: ProfileRegistered | None = Field(None, description="the registered profile (status 201): the fields "
                                              "of POST /profiles' answer; the subscriber_token is given once, "
                                              "at the top level")
    error: Error | None = Field(None, description="why it was refused (status 409 or 422)")


class ProfileBatchRegistered(BaseModel):
    model_config = {"json_schema_extra": {"examples": [{
        "registered": 2, "failed": 1, "subscriber_id": "s3f1c2a9d8e7b6a50",
        "subscriber_token": "kq3...(only when the request had no X-Onyx-Subscriber-Token)",
        "results": [
            {"index": 0, "status": 201, "profile": {"profile_id": "5b0c8a1f2e3d4c5b", "host_broker": "b5",
                                                    "token": "Zt9...",
                                                    "delivery_topic": "onyx.deliver.s3f1c2a9d8e7b6a50",
                                                    "subscriber_id": "s3f1c2a9d8e7b6a50"}},
            {"index": 1, "status": 422, "error": {"detail": "unsupported axis 'parent::' at column 12",
                                                  "column": 12}},
            {"index": 2, "status": 201, "profile": {"profile_id": "9d8e7f6a5b4c3d2e", "host_broker": "b2",
                                                    "token": "Qa1...", "delivery_topic": "onyx.deliver.s3f1c2a9d8e7b6a50.stock",
                                                    "subscriber_id": "s3f1c2a9d8e7b6a50"}},
        ]}]}}

    registered: int = Field(description="items registered (status 201)")
    failed: int = Field(description="items refused (nothing of them was stored or sent)")
    subscriber_id: str | None = Field(None, description="the subscriber owning the registered profiles (absent "
                                      "when nothing was registered for a request without a subscriber token)")
    subscriber_token: str | None = Field(None, description=f"only when the request had no {SUBSCRIBER_TOKEN_HEADER} "
                                         "and something was registered: the token of the subscriber created for "
                                         "the batch (one for all its profiles)")
    results: list[BatchItem] = Field(description="one per item, in the order of the request")


class SubscriberRegistered(BaseModel):
    subscriber_id: str
    token: str = Field(description=f"send it as {SUBSCRIBER_TOKEN_HEADER} when registering profiles")
    delivery_topic: str = Field(description="your own delivery topic (already created): the default for your profiles")


class ProfileView(BaseModel):
    profile_id: str
    text: str
    host_broker: str
    delivery_topic: str
    version: int
    subscriber_id: str | None = Field(description="null for a profile registered before subscribers existed")
    delivery_by: Literal["copy", "reference"] = Field("copy", description="what its delivery records carry: the "
                                                      "message (copy) or a reference to it")


class ProfileChange(BaseModel):
    op: Literal["update", "delete"] = Field(description="update: replace the text (as PUT /profiles/{id}); "
                                            "delete: as DELETE /profiles/{id}")
    profile_id: str = Field(min_length=1, max_length=200)
    text: str | None = Field(None, min_length=1, max_length=MAX_PROFILE_CHARS,
                             description="the new text (update only)", json_schema_extra={"format": "onyx-profile"})
    token: str | None = Field(None, description=f"the profile's token; not needed when the request's "
                              f"{SUBSCRIBER_TOKEN_HEADER} is the one of the subscriber owning the profile")


class ProfileChangesIn(BaseModel):
    model_config = {"json_schema_extra": {"examples": [{"changes": [
        {"op": "update", "profile_id": "5b0c8a1f2e3d4c5b", "text": "/nitf[head/pubdata/@edition.area='LA']"},
        {"op": "delete", "profile_id": "9d8e7f6a5b4c3d2e"}]}]}}

    changes: list[Annotated[Any, _any_item("ProfileChange", "a change")]] = Field(
        min_length=1, max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH:,} changes, applied in order (a profile may change more than once)")


class ChangeItem(BaseModel):
    index: int = Field(description="the change's position in the request (0-based)")
    status: int = Field(description="200: updated (profile); 204: deleted; otherwise what PUT or DELETE "
                        "/profiles/{id} would have answered for this change alone: 401 (no token, or one no "
                        "profile has), 404 (no such profile of yours: another subscriber's profile is not shown "
                        "either), 422 (not a profile, a bad field), with error")
    profile: ProfileView | None = Field(None, description="the profile as updated (status 200)")
    error: Error | None = None


class ProfileChangesApplied(BaseModel):
    applied: int = Field(description="changes made (status 200 or 204)")
    failed: int = Field(description="changes refused (nothing of them was stored or sent)")
    results: list[ChangeItem] = Field(description="one per change, in the order of the request")


class BrokerView(BaseModel):
    broker_id: str
    topic: str
    profiles: int
    neighbours: list[str]
    sources: list[str]


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    database: str = Field(description="ok, or why the database cannot be reached")
    brokers: int | None = Field(None, description="brokers of the overlay (when ok)")


def validate_profile(text: str) -> None:
    """Raise :class:`ProfileError` unless the engine accepts ``text``: the parser alone
    (:func:`yfilter.validate`), no engine is built."""
    validate(text)


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:40]
    return slug or "source"


def _problems(errors: Sequence[Mapping[str, Any]]) -> str:
    """Validation complaints (pydantic's, or FastAPI's for a request) as one line
    (``delivery.topic: ...``)."""
    out = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        if e.get("type") == "json_invalid":  # FastAPI: loc is ("body", the character where JSON broke)
            out.append(f"the body is not JSON: {e.get('ctx', {}).get('error', e['msg'])} at character {loc[-1]}")
        else:
            out.append((".".join(loc) + ": " if loc else "") + e["msg"])
    return "; ".join(out)


def _schema_problem(exc: ValidationError) -> str:
    """A request model's complaints as one line."""
    return _problems(exc.errors(include_url=False))


def _lap(timing: dict[str, float], stage: str, since: float) -> float:
    """Add the time since ``since`` to ``stage`` (the batch answer's Server-Timing header); now."""
    now = time.perf_counter()
    timing[stage] = timing.get(stage, 0.0) + now - since
    return now


def _refused(index: int, status: int, detail: str, column: int | None = None) -> BatchItem:
    return BatchItem(index=index, status=status, error=Error(detail=detail, column=column))


class PlacementLoad:
    """Profiles per broker as placement sees them (round robin's load), without counting
    the whole ``profiles`` table for every registration (5 ms at 100,000 profiles): the
    store's count, kept up to date with this service's own changes, and read again from
    the store when it is more than ``refresh_s`` seconds old, so that other writers of
    the same database (if any) are seen too. Used under the service's placement lock."""

    def __init__(self, store: Store, refresh_s: float = 5.0) -> None:
        self.store, self.refresh_s = store, refresh_s
        self._counts: dict[str, int] | None = None
        self._read = 0.0

    def counts(self) -> dict[str, int]:
        """A copy of the current counts."""
        if self._counts is None or time.monotonic() - self._read > self.refresh_s:
            self._counts, self._read = self.store.profile_counts(), time.monotonic()
        return dict(self._counts)

    def add(self, broker: str, n: int = 1) -> None:
        """``n`` profiles more (or fewer) on ``broker``, committed."""
        if self._counts is not None:
            self._counts[broker] = self._counts.get(broker, 0) + n


class MoveView(BaseModel):
    profile_id: str
    from_broker: str
    to_broker: str


def _view(record: ProfileRecord) -> ProfileView:
    return ProfileView(profile_id=record.id, text=record.text, host_broker=record.host_broker,
                       delivery_topic=record.delivery_topic, version=record.version,
                       subscriber_id=record.subscriber_id, delivery_by=record.delivery_by)


def refuse_internal_profiles(store: Store, sender: Sender) -> list[tuple[ProfileRecord, str]]:
    """Delete the stored profiles that deliver to one of the overlay's or Kafka's own
    topics (an older version accepted them), tell their host brokers, and log each with
    the reason; returns them with their reasons."""
    refused = [(p, reason) for p in store.list_profiles()
               if (reason := topics.unwritable_reason(p.delivery_topic)) is not None]
    for p, reason in refused:
        with store.transaction() as tx:
            tx.delete_profile(p.id)
            announce_profile(sender, "delete", dataclasses.replace(p, version=p.version + 1))
        log.warning("refused stored profile %s (host %s): its delivery topic %s; it was deleted, not loaded. "
                    "Its subscriber must register it again with another delivery topic (or none).",
                    p.id, p.host_broker, reason)
    return refused


_NOT_JSON = "the body is not JSON text in UTF-8: nothing was changed"
_FASTAPI_UNREADABLE = "There was an error parsing the body"  # FastAPI's 400 for a body it cannot decode
_UNAVAILABLE = "Kafka or the database failed: nothing was changed, try again"
_RATE = ("the subscriber registered, updated or deleted more profiles than the service allows in this time (see "
         "the description): nothing was changed; retry after Retry-After seconds, or send fewer at a time")
_UNKNOWN_SUBSCRIBER = f"unknown {SUBSCRIBER_TOKEN_HEADER}: nothing was changed"


def _too_large(limit: int) -> str:
    return (f"a body of more than {limit:,} bytes, refused before it is read (or as soon as it passes the limit): "
            "nothing was changed")


def error_responses(spec: Mapping[int, str]) -> dict[int | str, dict[str, Any]]:
    """``responses`` of an operation: each error status with its description and the
    :class:`Error` body (a 429 also with its ``Retry-After`` header)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status, text in spec.items():
        out[status] = {"model": Error, "description": text}
        if status == 429:
            out[status]["headers"] = {"Retry-After": {"description": "seconds after which the request can succeed",
                                                      "schema": {"type": "integer", "minimum": 1}}}
    return out


def _links(source: str, profile_id: str, token: str) -> dict[str, Any]:
    """OpenAPI links from an answer naming a profile and its token to what can be done with it."""
    ref = {"profile_id": profile_id}
    auth = {**ref, f"header.{PROFILE_TOKEN_HEADER}": token}
    return {"responses": {source: {"links": {
        "GetProfile": {"operationId": "get_profile", "parameters": auth,
                       "description": "the profile just registered, with its token"},
        "UpdateProfile": {"operationId": "update_profile", "parameters": auth,
                          "description": "replace its text, with its token"},
        "DeleteProfile": {"operationId": "delete_profile", "parameters": auth,
                          "description": "delete it, with its token"}}}}}


def _replace(node: Any, old: dict[str, Any], new: dict[str, Any]) -> Any:
    """``node`` (a JSON value) with every sub-object equal to ``old`` replaced by ``new``."""
    if node == old:
        return dict(new)
    if isinstance(node, dict):
        return {k: _replace(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace(v, old, new) for v in node]
    return node


def _describe(app: FastAPI, overlay: Overlay, limits: str, topic_schema: dict[str, Any]) -> None:
    """Complete what FastAPI derives from the endpoints: the models only lists refer to
    (``ProfileChange``), the brokers ``near`` and ``root_broker`` may name, the delivery
    topics the operator allows (``topic_schema``), no trace of FastAPI's own
    validation-error body (every 422 is an :class:`Error`), who may call each operation
    (:func:`broker.registry.access.describe`), the limits."""
    derive = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = derive()
        schemas = spec["components"]["schemas"]
        schemas["ProfileChange"] = ProfileChange.model_json_schema(ref_template="#/components/schemas/{model}")
        brokers = {"anyOf": [{"type": "string", "enum": list(overlay.brokers)}, {"type": "null"}]}
        for model, field in (("ProfileIn", "near"), ("SourceIn", "root_broker")):
            prop = schemas[model]["properties"][field]
            prop.pop("anyOf", None)
            prop.update(brokers)
        for path in spec["paths"].values():
            for operation in path.values():
                answer = operation.get("responses", {}).get("422")
                if answer and "HTTPValidationError" in str(answer):  # FastAPI's default, for path parameters
                    del operation["responses"]["422"]
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        spec["components"]["schemas"] = _replace(schemas, TOPIC_JSON_SCHEMA, topic_schema)
        describe(app, spec)
        spec["info"]["description"] += "\n\n**Limits.** " + limits
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(store: Store, overlay: Overlay, sender: Sender, placement: str = "nearest",
               admin_token: str | None = None, topic_admin: TopicAdmin | None = None,
               rate_limit: RateLimiter | None = None, metadata: MetadataProvider | None = None,
               webhook_allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE,
               delivery_prefixes: Iterable[str] = config.DELIVERY_TOPIC_PREFIXES,
               allowed_hosts: Sequence[str] | None = None) -> FastAPI:
    """The registration service over a store, an overlay and a packet sender;
    ``placement`` names the host-choice strategy, ``admin_token`` is the operator's token
    (without one no request is an operator's: :mod:`broker.registry.access`),
    ``topic_admin`` creates delivery topics as they are handed out (default: none are
    created), ``rate_limit`` limits the profiles each subscriber registers, updates and
    deletes (default: ONYX_REGISTRATION_RATE and ONYX_REGISTRATION_BURST), ``metadata`` is
    the service's metadata provider (default: one that has read no log), started here with
    the database's sources and profiles, ``webhook_allow_private`` lets webhook URLs name
    loopback and private addresses (default: ONYX_WEBHOOK_ALLOW_PRIVATE),
    ``delivery_prefixes`` are the topic prefixes subscribers may name delivery topics
    under besides their own namespace (default: ONYX_DELIVERY_TOPIC_PREFIXES),
    ``allowed_hosts`` are the names a request's ``Host`` may give (:mod:`broker.registry.hosts`;
    default: ONYX_ALLOWED_HOSTS, else the loopback names and ONYX_API_HOST; FastAPI's
    in-process ``TestClient`` sends ``testserver``)."""
    metadata = metadata or MetadataProvider(sender, overlay)
    sender = ProfileFeed(sender, metadata)
    refuse_internal_profiles(store, sender)
    subscribers = Subscribers(store, topic_admin or NoTopicAdmin(), taken=overlay.brokers, prefixes=delivery_prefixes)
    tuning = PlacementOptions(partitions_per_broker=config.PEP_PARTITIONS_PER_BROKER, tolerance=config.PEP_TOLERANCE)
    placer = make_strategy(placement, overlay, tuning)
    placer.restore((p.id, p.text, p.host_broker) for p in store.list_profiles())
    placing = threading.Lock()  # requests run in a thread pool; strategies keep state
    load = PlacementLoad(store)
    limiter = rate_limit or RateLimiter.from_config()
    anonymous = RateLimiter(config.ANONYMOUS_RATE, config.ANONYMOUS_BURST,  # one bucket, key None
                            what="register", items="profiles or subscribers")
    new_sources = RateLimiter(config.SOURCE_RATE, config.SOURCE_BURST,  # per publisher (None: anonymous)
                              who="publisher", what="register", items="sources")
    limits = (f"A request body may have up to {MAX_BATCH_BYTES:,} bytes for {BATCH_PATH} and {CHANGES_PATH} "
              f"(1 to {MAX_BATCH:,} profiles or changes, {MAX_BATCH_CHARS:,} characters of profile text in all), "
              f"{MAX_BODY_BYTES:,} for every other operation; a profile's text up to {MAX_PROFILE_CHARS:,} "
              f"characters, a source's schema up to {MAX_SCHEMA_CHARS:,}. A larger body is refused with 413. "
              f"A request without a token may register at most {config.ANONYMOUS_MAX_BATCH:,} profiles and "
              f"{config.ANONYMOUS_MAX_CHARS:,} characters of profile or schema text at once; all such requests "
              f"together may register {config.ANONYMOUS_RATE:g} profiles or subscribers a second (bursts of "
              f"{config.ANONYMOUS_BURST:,}). Each publisher (and all requests without a token together) may "
              f"register {config.SOURCE_RATE:g} sources a second (bursts of {config.SOURCE_BURST:,}). "
              + limiter.describe() + " A request whose Host header names none of the hosts the service answers to "
              "(ONYX_ALLOWED_HOSTS) is refused with 400 (GET /health answers any). Event streams are limited per "
              "subscriber and in all (ONYX_SSE_PER_SUBSCRIBER, ONYX_SSE_MAX, ONYX_CONSOLE_STREAMS): past them a "
              "stream is refused with 429 and Retry-After.")
    app = FastAPI(title="Onyx registration service", version="0.1.0",
                  description="Register data sources and subscriber profiles of the Onyx XML dissemination overlay. "
                              "Every error answer is a JSON object with a `detail` (what went wrong, what to do) and, "
                              "for a profile the parser refuses, the `column` where the problem starts. Every "
                              "operation says who may call it (`x-onyx-access`: anonymous, subscriber, owner of a "
                              "profile, publisher, operator) and what it sees; another tenant's object answers 404.")
    _describe(app, overlay, limits, topic_json_schema(subscribers.prefixes))
    app.add_middleware(BodyLimit, default=MAX_BODY_BYTES, limits={BATCH_PATH: MAX_BATCH_BYTES,
                                                                  CHANGES_PATH: MAX_BATCH_BYTES})
    access = Access(store, subscribers.authenticate, admin_token)
    install(app, access)
    # added last, so it runs first: a request for another host is refused before anything else
    app.add_middleware(HostCheck, allowed=allowed_hosts or default_hosts(config.API_HOST))
    known_sources = {s.id for s in store.list_sources()}
    for source_id, root in sorted(overlay.sources.items()):
        if source_id not in known_sources:
            record = SourceRecord(source_id, source_id, root, None, None, None)
            with store.transaction() as tx:
                tx.add_source(record)
                announce_source(sender, record)
    for s in store.list_sources():
        overlay.sources.setdefault(s.id, s.root_broker)
    metadata.start(stored_documents(store))
    app.router.on_shutdown.append(metadata.stop)

    def error(status: int, detail: str, column: int | None = None,
              headers: Mapping[str, str] | None = None) -> JSONResponse:
        body: dict[str, Any] = {"detail": detail}
        if column is not None:
            body["column"] = column
        return JSONResponse(status_code=status, content=body, headers=headers)

    def allowed(path: str) -> str:
        """The methods some route of ``path`` takes (Starlette's 405 names one route's only)."""
        return ", ".join(sorted({m for r in app.routes if isinstance(r, Route) and r.methods
                                 and r.path_regex.match(path) for m in r.methods}))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = _NOT_JSON if exc.status_code == 400 and exc.detail == _FASTAPI_UNREADABLE else str(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed(request.url.path)
        return error(exc.status_code, detail, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, _problems(exc.errors()) + ": nothing was changed")

    @app.exception_handler(ProfileError)
    async def _profile_error(_: Request, exc: ProfileError) -> JSONResponse:
        return error(422, str(exc), exc.column)

    @app.exception_handler(PlacementError)
    async def _placement_error(_: Request, exc: PlacementError) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(PacketSendError)
    async def _kafka_down(_: Request, exc: PacketSendError) -> JSONResponse:
        return error(503, f"{exc}; nothing was changed, try again")

    @app.exception_handler(OperationalError)
    async def _database_down(_: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database failure: %s", exc)
        return error(503, f"the database failed ({str(exc.orig)[:200]}); nothing was changed, try again")

    @app.exception_handler(DuplicateError)
    async def _duplicate(_: Request, exc: DuplicateError) -> JSONResponse:
        return error(409, str(exc))

    @app.exception_handler(SubscriberError)
    async def _subscriber_error(_: Request, exc: SubscriberError) -> JSONResponse:
        return error(401 if isinstance(exc, UnknownSubscriberError) else 422, str(exc))

    @app.exception_handler(TopicAdminError)
    async def _topic_admin_error(_: Request, exc: TopicAdminError) -> JSONResponse:
        if isinstance(exc, TopicRefusedError):
            return error(422, str(exc))
        return error(503, f"{exc}; nothing was changed, try again")

    @app.exception_handler(WebhookRefusedError)
    async def _webhook_refused(_: Request, exc: WebhookRefusedError) -> JSONResponse:
        return error(422, f"delivery.webhook: {exc}; nothing was registered")

    @app.exception_handler(RateLimited)
    async def _rate_limited(_: Request, exc: RateLimited) -> JSONResponse:
        return error(429, exc.detail, headers={"Retry-After": exc.retry_after_header})

    def in_use(subscriber_id: str | None) -> Callable[[str], bool]:
        """Whether one of the subscriber's metadata subscriptions delivers to a topic."""
        held = {sub.topic for sub in metadata.users.values() if sub.subscriber_id == subscriber_id}
        return held.__contains__

    def release(tx, records: Iterable[ProfileRecord]) -> None:
        """Give up the claims on the delivery topics of ``records`` no profile uses any more."""
        by_subscriber: dict[str | None, set[str]] = {}
        for r in records:
            by_subscriber.setdefault(r.subscriber_id, set()).add(r.delivery_topic)
        for subscriber_id, names in by_subscriber.items():
            subscribers.release(tx, subscriber_id, names, in_use(subscriber_id))

    def charge(caller: Caller, n: int, chars: int, owner: str | None = None) -> None:
        """Charge a registration of ``n`` items and ``chars`` characters of text to the
        caller's budget: its subscriber's bucket, or (no token) the shared anonymous bucket
        and the lower anonymous limits (413)."""
        if caller.anonymous:
            if n > config.ANONYMOUS_MAX_BATCH or chars > config.ANONYMOUS_MAX_CHARS:
                raise HTTPException(413, f"a request without a token may carry at most {config.ANONYMOUS_MAX_BATCH:,} "
                                         f"profiles and {config.ANONYMOUS_MAX_CHARS:,} characters of text (this one: "
                                         f"{n:,} and {chars:,}): register a subscriber first (POST /subscribers) "
                                         f"and send its token as {SUBSCRIBER_TOKEN_HEADER}")
            anonymous.charge(None, n)
        limiter.charge(owner, n)

    profile_errors = {400: _NOT_JSON, 401: _UNKNOWN_SUBSCRIBER,
                      409: "the delivery topic belongs to another subscriber, or exists in Kafka and is not yours: "
                           "nothing was registered",
                      413: _too_large(MAX_BODY_BYTES),
                      422: "not a profile (with the column where the parser stopped), a bad or missing field, a "
                           "delivery topic outside your namespace and the operator's prefixes (Kafka's __* and the "
                           "overlay's own topics included) or one Kafka refuses, or an unknown broker in near: "
                           "nothing was registered",
                      429: _RATE, 503: _UNAVAILABLE}

    # -- publishers and sources ------------------------------------------------------------------

    @app.post("/publishers", response_model=PublisherRegistered, status_code=201, summary="Register a publisher",
              operation_id="register_publisher",
              dependencies=[Depends(access.allow("operator", sees="the new publisher's token, once"))],
              responses=error_responses({401: "no or a wrong operator token", 403: "not an operator's token",
                                         503: _UNAVAILABLE}),
              openapi_extra={"responses": {"201": {"links": {"RegisterSource": {
                  "operationId": "register_source", "description": "register a source of this publisher",
                  "parameters": {f"header.{PUBLISHER_TOKEN_HEADER}": "$response.body#/token"}}}}}})
    def register_publisher() -> PublisherRegistered:
        """A new publisher: its id and its token (shown once), for POST /sources."""
        publisher_id, token = "p" + secrets.token_hex(8), secrets.token_urlsafe(24)
        with store.transaction() as tx:
            tx.add_publisher(publisher_id, token)
        return PublisherRegistered(publisher_id=publisher_id, token=token)

    @app.post("/sources", response_model=SourceOut, response_model_exclude_none=True, status_code=201,
              summary="Register a data source", operation_id="register_source",
              responses=error_responses({400: _NOT_JSON, 401: "an unknown token", 403: "a token of another kind "
                                         "(a subscriber's, a profile's)",
                                         409: "a source with this name (id) is already registered",
                                         413: f"{_too_large(MAX_BODY_BYTES)}; or, without a token, a schema of more "
                                              f"than {config.ANONYMOUS_MAX_CHARS:,} characters",
                                         422: "a bad or missing field (a name with control characters), an unknown "
                                              "root broker, or a schema that is neither a DTD nor an XML Schema: "
                                              "nothing was registered",
                                         429: "more new sources than the service allows in this time: retry after "
                                              "Retry-After seconds",
                                         503: _UNAVAILABLE}))
    def register_source(body: SourceIn, who: Caller = Depends(access.allow(
            "anonymous", "publisher", "operator",
            sees="its new source (anonymous: a new publisher, whose token it gets once)"))) -> SourceOut:
        """Register a source of the publisher whose token came (an operator's source, with
        the operator's token; without a token, of a new publisher, created with it and
        returned: publisher_id, publisher_token). Publishers write to ``topic`` with any Kafka
        client. Its archive is the publisher's: subscribers read it once granted it, or
        when it is public."""
        if who.anonymous and body.schema_text is not None and len(body.schema_text) > config.ANONYMOUS_MAX_CHARS:
            raise HTTPException(413, f"a request without a token may send a schema of at most "
                                     f"{config.ANONYMOUS_MAX_CHARS:,} characters: register as a publisher "
                                     f"(an operator's POST /publishers) and send its {PUBLISHER_TOKEN_HEADER}")
        if body.root_broker is not None and body.root_broker not in overlay.graph:
            raise HTTPException(422, f"unknown root broker {body.root_broker!r}; brokers: {overlay.brokers}")
        if not who.operator:
            new_sources.charge(who.publisher, 1)
        source_id = _slug(body.name)
        if store.source(source_id) is not None:
            raise HTTPException(409, f"a source with id {source_id!r} is already registered")
        used = {b: 0 for b in overlay.brokers}
        for s in store.list_sources():
            used[s.root_broker] = used.get(s.root_broker, 0) + 1
        root = body.root_broker or min(overlay.brokers, key=lambda b: (used[b], b))
        record = SourceRecord(source_id, body.name, root, body.schema_text, body.rate, body.size)
        try:
            source_dictionary(record)
        except FormatError as exc:
            raise HTTPException(422, f"schema: {exc}") from None
        owner, token = who.publisher, None
        if who.anonymous:
            owner, token = "p" + secrets.token_hex(8), secrets.token_urlsafe(24)
        with store.transaction() as tx:
            if token is not None:
                tx.add_publisher(owner, token)
            tx.add_source(record, owner=owner, public=body.public)
            announce_source(sender, record)
        # Once committed: who may see the document (metadata_api.tenant_view) reads the store.
        # Should this fail, the service's next start publishes every stored source again.
        metadata.publish([source_doc(record)])
        overlay.sources[source_id] = root
        return SourceOut(source_id=source_id, root_broker=root, topic=topics.source_topic(source_id),
                         public=body.public, publisher_id=owner, publisher_token=token)

    def source_view(source_id: str) -> SourceView:
        record, acl = store.source(source_id), store.source_access(source_id)
        return SourceView(source_id=record.id, name=record.name, root_broker=record.root_broker,
                          topic=topics.source_topic(record.id), public=acl.public, publisher_id=acl.owner)

    @app.get("/sources", response_model=list[SourceView], summary="The sources you may read or manage",
             operation_id="list_sources", responses=error_responses({401: "no or an unknown token", 503: _UNAVAILABLE}))
    def list_sources(who: Caller = Depends(access.allow(
            "subscriber", "owner", "publisher", "operator",
            sees="the sources whose archive it may read (public, granted) or that it owns; an operator: all"))
            ) -> list[SourceView]:
        readable = access.readable(who)
        return [source_view(s.id) for s in store.list_sources() if readable is None or s.id in readable]

    source_errors = error_responses({401: "no or an unknown token", 403: "a token of another kind",
                                     404: "no such source of yours", 503: _UNAVAILABLE})

    @app.patch("/sources/{source_id}", response_model=SourceView, summary="Make a source public, or not",
               operation_id="update_source",
               responses={**source_errors, **error_responses({400: _NOT_JSON, 413: _too_large(MAX_BODY_BYTES),
                                                              422: "a bad or missing field"})})
    def update_source(source_id: str, body: SourcePatch, who: Caller = Depends(access.allow(
            "publisher", "operator", sees="its own sources; an operator: all"))) -> SourceView:
        """Whether every subscriber may read the source's archive (public) or only the ones granted it."""
        access.managed_source(who, source_id)
        with store.transaction() as tx:
            tx.set_public(source_id, body.public)
        return source_view(source_id)

    @app.get("/sources/{source_id}/grants", response_model=GrantsView, summary="Who may read a source's archive",
             operation_id="source_grants", responses=source_errors)
    def source_grants(source_id: str, who: Caller = Depends(access.allow(
            "publisher", "operator", sees="its own sources' grants; an operator: all"))) -> GrantsView:
        access.managed_source(who, source_id)
        return GrantsView(source_id=source_id, public=store.source_access(source_id).public,
                          subscribers=store.grants(source_id))

    @app.put("/sources/{source_id}/grants/{subscriber_id}", status_code=204, response_class=Response,
             summary="Let a subscriber read a source's archive", operation_id="grant_source",
             responses=error_responses({401: "no or an unknown token", 403: "a token of another kind",
                                        404: "no such source of yours, or no such subscriber", 503: _UNAVAILABLE}))
    def grant_source(source_id: str, subscriber_id: str, who: Caller = Depends(access.allow(
            "publisher", "operator", sees="its own sources; an operator: all"))) -> Response:
        """The subscriber may now replay, query and backfill from the source's archive."""
        access.managed_source(who, source_id)
        if store.subscriber(subscriber_id) is None:
            raise HTTPException(404, f"no subscriber {subscriber_id!r}: grant the id its registration returned")
        with store.transaction() as tx:
            tx.grant(source_id, subscriber_id)
        return Response(status_code=204)

    @app.delete("/sources/{source_id}/grants/{subscriber_id}", status_code=204, response_class=Response,
                summary="Take back a subscriber's reading of a source's archive", operation_id="revoke_source",
                responses=source_errors)
    def revoke_source(source_id: str, subscriber_id: str, who: Caller = Depends(access.allow(
            "publisher", "operator", sees="its own sources; an operator: all"))) -> Response:
        access.managed_source(who, source_id)
        with store.transaction() as tx:
            tx.revoke(source_id, subscriber_id)
        return Response(status_code=204)

    # -- subscribers and profiles ----------------------------------------------------------------

    @app.post("/subscribers", response_model=SubscriberRegistered, status_code=201,
              summary="Register a subscriber", operation_id="register_subscriber",
              responses=error_responses({401: "an unknown token", 403: "a token of another kind",
                                         429: "more new subscribers than the service allows in this time",
                                         503: _UNAVAILABLE}),
              openapi_extra={"responses": {"201": {"links": {"RegisterProfile": {
                  "operationId": "register_profile", "description": "register a profile of this subscriber",
                  "parameters": {f"header.{SUBSCRIBER_TOKEN_HEADER}": "$response.body#/token"}}}}}})
    def register_subscriber(who: Caller = Depends(access.allow(
            "anonymous", "operator", sees="the new subscriber's token, once"))) -> SubscriberRegistered:
        """A new subscriber: its id, its token (send it as X-Onyx-Subscriber-Token with its
        profiles) and its own delivery topic, created in Kafka before this returns."""
        if who.anonymous:
            anonymous.charge(None, 1)
        with store.transaction() as tx:
            new = subscribers.register(tx)
            subscribers.create_topics(tx)
        return SubscriberRegistered(subscriber_id=new.id, token=new.token, delivery_topic=new.delivery_topic)

    @app.post("/profiles", response_model=ProfileRegistered, response_model_exclude_none=True, status_code=201,
              summary="Register a profile", operation_id="register_profile", responses=error_responses(profile_errors),
              openapi_extra=_links("201", "$response.body#/profile_id", "$response.body#/token"))
    def register_profile(body: ProfileIn, who: Caller = Depends(access.allow(
            "anonymous", "subscriber", sees="its new profile (anonymous: of a new subscriber, whose token it gets "
                                            "once)"))) -> ProfileRegistered:
        """Register a profile of the subscriber whose token is in X-Onyx-Subscriber-Token
        (or of a new subscriber, created with it and returned: subscriber_id,
        subscriber_token). Deliveries are Kafka records on ``delivery_topic`` whose
        ``onyx-profiles`` header lists ``profile_id`` (the key is the first id listed:
        ``profile_id`` when it is the only one), with the message id in the
        ``onyx-message-id`` header."""
        owner = who.subscriber
        charge(who, 1, len(body.text), owner)
        validate_profile(body.text)
        by = delivery_by(body.delivery.by if body.delivery else None)
        requested = body.delivery.topic if body.delivery else None
        webhook = body.delivery.webhook if body.delivery else None
        subscriber_id = owner or subscribers.new_id()
        subscribers.check_topic(subscriber_id, requested)  # refused before anything is stored
        if webhook is not None:
            check_url(webhook, webhook_allow_private)
        webhook_secret = secrets.token_hex(32) if webhook is not None else None
        profile_id = uuid.uuid4().hex[:16]
        with placing:
            host = placer.choose(PlacementRequest(profile_id, body.text, body.near, body.location,
                                                  load.counts()))
            token = secrets.token_urlsafe(24)
            try:
                with store.transaction() as tx:
                    new = None if owner else subscribers.register(tx, subscriber_id)
                    topic = subscribers.delivery_topic(tx, subscriber_id, requested)
                    record = ProfileRecord(profile_id, body.text, host, topic, 1, subscriber_id, by)
                    tx.add_profile(record, token)
                    if webhook is not None:
                        tx.set_webhook(profile_id, webhook, webhook_secret, subscriber_id)
                    subscribers.create_topics(tx)
                    announce_profile(sender, "add", record)
            except Exception:
                placer.forget(profile_id)  # not registered after all
                raise
            load.add(host)
        return ProfileRegistered(profile_id=record.id, host_broker=host, token=token, delivery_topic=topic,
                                 subscriber_id=subscriber_id, subscriber_token=new.token if new else None,
                                 webhook_secret=webhook_secret, delivery_by=by if by != "copy" else None)

    @app.post(BATCH_PATH, response_model=ProfileBatchRegistered, response_model_exclude_none=True,
              summary="Register many profiles at once", operation_id="register_profiles",
              responses=error_responses({400: _NOT_JSON, 401: _UNKNOWN_SUBSCRIBER,
                                         413: f"{_too_large(MAX_BATCH_BYTES)}; or more than {MAX_BATCH_CHARS:,} "
                                              "characters of profile text in all (without a token: "
                                              f"{config.ANONYMOUS_MAX_BATCH:,} profiles, "
                                              f"{config.ANONYMOUS_MAX_CHARS:,} characters)",
                                         422: f"not a JSON object with a list of 1 to {MAX_BATCH:,} profiles: nothing "
                                              "registered (a bad item is refused alone, in the results)",
                                         429: _RATE, 503: _UNAVAILABLE}),
              openapi_extra=_links("200", "$response.body#/results/0/profile/profile_id",
                                   "$response.body#/results/0/profile/token"))
    def register_profiles(body: ProfileBatchIn, who: Caller = Depends(access.allow(
            "anonymous", "subscriber", sees="its new profiles (anonymous: of one new subscriber, whose token it "
                                            "gets once)"))) -> JSONResponse:
        """Register up to 10,000 profiles of one subscriber (the one whose token is in
        X-Onyx-Subscriber-Token, or one new subscriber for all of them), each item as
        ``POST /profiles`` would: the answer is **200** with one result per item, in
        order: ``status`` 201 and the registered ``profile``, or the status the single
        endpoint would have answered for that item alone (422, 409) and its ``error``
        (with the ``column`` of a syntax error). A refused item changes nothing; the
        others are stored in one database transaction and sent to their host brokers as
        one batch of query packets. The whole request fails, and nothing is registered,
        only for an unknown subscriber token (401), a body that is not a list of 1 to
        10,000 items (422) or larger than 64 MiB or 2,000,000 characters of text (413), a
        subscriber over its rate (429), and a failure of Kafka or the database (503). The
        ``Server-Timing`` header tells where the time went (check, place, topics, insert,
        kafka, commit, answer; milliseconds)."""
        timing, t0 = {}, time.perf_counter()
        owner = who.subscriber
        chars = _text_chars(body.profiles, "text")
        if chars > MAX_BATCH_CHARS:
            raise HTTPException(413, f"the batch has {chars:,} characters of profile text, more than the "
                                     f"{MAX_BATCH_CHARS:,} one request may carry: send it in smaller batches")
        charge(who, len(body.profiles), chars, owner)
        subscriber_id = owner or subscribers.new_id()
        results: list[BatchItem | None] = [None] * len(body.profiles)
        checked: list[tuple[int, ProfileIn]] = []
        for i, raw in enumerate(body.profiles):  # what the single endpoint refuses before it stores anything
            try:
                item = ProfileIn.model_validate(raw)
                if item.delivery is not None and item.delivery.webhook is not None:
                    raise SubscriberError("delivery.webhook: a profile with a webhook is registered with POST "
                                          "/profiles, which returns its webhook_secret")
                validate_profile(item.text)
                subscribers.check_topic(subscriber_id, item.delivery.topic if item.delivery else None)
            except ValidationError as exc:
                results[i] = _refused(i, 422, _schema_problem(exc))
            except ProfileError as exc:
                results[i] = _refused(i, 422, str(exc), exc.column)
            except SubscriberError as exc:
                results[i] = _refused(i, 422, str(exc))
            except DuplicateError as exc:  # a topic in another subscriber's namespace
                results[i] = _refused(i, 409, str(exc))
            else:
                checked.append((i, item))
        accepted: list[tuple[int, ProfileRecord, str]] = []
        new = None
        t0 = _lap(timing, "check", t0)
        with placing:
            placed: list[str] = []
            counts = load.counts() if checked else {}  # the load placement sees, kept up to date here
            try:
                with store.transaction() as tx:
                    for i, item in checked:
                        profile_id = uuid.uuid4().hex[:16]
                        try:
                            host = placer.choose(PlacementRequest(profile_id, item.text, item.near, item.location,
                                                                  counts))
                        except PlacementError as exc:
                            results[i] = _refused(i, 422, str(exc))
                            continue
                        placed.append(profile_id)
                        try:
                            topic = subscribers.delivery_topic(tx, subscriber_id,
                                                               item.delivery.topic if item.delivery else None)
                        except DuplicateError as exc:  # the topic is another subscriber's, or foreign
                            results[i] = _refused(i, 409, str(exc))
                            placer.forget(profile_id)
                            continue
                        counts[host] = counts.get(host, 0) + 1
                        by = delivery_by(item.delivery.by if item.delivery else None)
                        accepted.append((i, ProfileRecord(profile_id, item.text, host, topic, 1, subscriber_id, by),
                                         secrets.token_urlsafe(24)))
                    t0 = _lap(timing, "place", t0)
                    refused_topics = {}
                    for topic in list(tx.claimed):  # the delivery topics items named, new to their subscriber
                        try:
                            subscribers.admin.create(topic)
                        except TopicRefusedError as exc:  # Kafka's ACLs: the items naming it fail, not the batch
                            refused_topics[topic] = str(exc)
                            tx.unclaim_topic(topic)
                    if refused_topics:
                        for i, record, _ in accepted:
                            if record.delivery_topic in refused_topics:
                                results[i] = _refused(i, 422, refused_topics[record.delivery_topic])
                                placer.forget(record.id)
                        accepted = [a for a in accepted if a[1].delivery_topic not in refused_topics]
                    if accepted:
                        if owner is None:
                            claimed = len(tx.claimed)
                            new = subscribers.register(tx, subscriber_id)
                            for topic in tx.claimed[claimed:]:  # its own delivery topic
                                subscribers.admin.create(topic)
                        t0 = _lap(timing, "topics", t0)
                        tx.add_profiles([(record, token) for _, record, token in accepted])
                        t0 = _lap(timing, "insert", t0)
                        announce_profiles(sender, "add", [record for _, record, _ in accepted])
                        t0 = _lap(timing, "kafka", t0)
                t0 = _lap(timing, "commit", t0)
            except Exception:
                for profile_id in placed:
                    placer.forget(profile_id)  # not registered after all
                raise
            for _, record, _ in accepted:
                load.add(record.host_broker)
        for i, record, token in accepted:
            results[i] = BatchItem(index=i, status=201, profile=ProfileRegistered(
                profile_id=record.id, host_broker=record.host_broker, token=token,
                delivery_topic=record.delivery_topic, subscriber_id=subscriber_id,
                delivery_by=record.delivery_by if record.delivery_by != "copy" else None))
        out = ProfileBatchRegistered(registered=len(accepted), failed=len(results) - len(accepted),
                                     subscriber_id=subscriber_id if accepted or owner else None,
                                     subscriber_token=new.token if new else None, results=results)
        # Serialized here (the model is the documented one): FastAPI would validate all of it again.
        response = JSONResponse(out.model_dump(mode="json", exclude_none=True))
        _lap(timing, "answer", t0)
        response.headers["Server-Timing"] = ", ".join(f"{k};dur={v * 1e3:.1f}" for k, v in timing.items())
        return response

    own = {401: "no token, or one no one has", 403: "a token of another kind",
           404: "no such profile of yours (another subscriber's profile is not shown either)"}

    @app.get("/profiles/{profile_id}", response_model=ProfileView, summary="Inspect a profile",
             operation_id="get_profile", responses=error_responses({**own, 503: _UNAVAILABLE}))
    def get_profile(profile_id: str, who: Caller = Depends(access.allow(
            "owner", "subscriber", "operator", sees="its own profile (with the profile's or its subscriber's "
                                                    "token); an operator: any"))) -> ProfileView:
        return _view(access.profile(who, profile_id))

    @app.put("/profiles/{profile_id}", response_model=ProfileView, summary="Replace a profile's text",
             operation_id="update_profile",
             responses=error_responses({400: _NOT_JSON, **own,
                                        409: "the delivery topic belongs to another subscriber, or exists in Kafka "
                                             "and is not yours: nothing was changed",
                                        413: _too_large(MAX_BODY_BYTES),
                                        422: "not a profile (with the column where the parser stopped), a bad or "
                                             "missing field, or a delivery topic outside your namespace and the "
                                             "operator's prefixes or one Kafka refuses: the profile stays as it was",
                                        429: _RATE, 503: _UNAVAILABLE}))
    def update_profile(profile_id: str, body: ProfileUpdate, who: Caller = Depends(access.allow(
            "owner", "subscriber", sees="its own profile"))) -> ProfileView:
        old = access.profile(who, profile_id, operator=False)
        limiter.charge(old.subscriber_id, 1)
        validate_profile(body.text)
        by = delivery_by(body.delivery.by if body.delivery else None, old.delivery_by)
        requested = body.delivery.topic if body.delivery else None
        if requested is not None and requested != old.delivery_topic:
            if old.subscriber_id is None:
                raise TopicNotAllowedError("this profile was registered before subscribers existed, so it cannot "
                                           "claim a delivery topic: register it again to get one of your own")
            subscribers.check_topic(old.subscriber_id, requested)
        with store.transaction() as tx:
            topic = (old.delivery_topic if requested in (None, old.delivery_topic)
                     else subscribers.delivery_topic(tx, old.subscriber_id, requested))
            record = dataclasses.replace(old, text=body.text, delivery_topic=topic, version=old.version + 1,
                                         delivery_by=by)
            tx.update_profile(record)
            release(tx, [old])
            subscribers.create_topics(tx)
            announce_profile(sender, "update", record)
        return _view(record)

    @app.delete("/profiles/{profile_id}", status_code=204, summary="Delete a profile", operation_id="delete_profile",
                responses=error_responses({**own, 429: _RATE, 503: _UNAVAILABLE}))
    def delete_profile(profile_id: str, who: Caller = Depends(access.allow(
            "owner", "subscriber", sees="its own profile"))) -> None:
        """Delete the profile; a delivery topic it named that no other profile of its
        subscriber uses is no longer claimed (the topic stays in Kafka)."""
        old = access.profile(who, profile_id, operator=False)
        limiter.charge(old.subscriber_id, 1)
        record = dataclasses.replace(old, version=old.version + 1)
        with placing:
            with store.transaction() as tx:
                tx.delete_profile(profile_id)
                release(tx, [old])
                announce_profile(sender, "delete", record)
            placer.forget(profile_id)
            load.add(old.host_broker, -1)

    @app.post(CHANGES_PATH, response_model=ProfileChangesApplied, response_model_exclude_none=True,
              summary="Update and delete many profiles at once", operation_id="change_profiles",
              responses=error_responses({400: _NOT_JSON, 401: _UNKNOWN_SUBSCRIBER,
                                         413: f"{_too_large(MAX_BATCH_BYTES)}; or more than {MAX_BATCH_CHARS:,} "
                                              "characters of profile text in all",
                                         422: f"not a JSON object with a list of 1 to {MAX_BATCH:,} changes: nothing "
                                              "changed (a bad change is refused alone, in the results)",
                                         429: _RATE, 503: _UNAVAILABLE}))
    def change_profiles(body: ProfileChangesIn, who: Caller = Depends(access.allow(
            "anonymous", "subscriber", "owner", sees="its own profiles (each change authorized by the profile's "
                                                     "token in it, or by the subscriber's token)"))) -> JSONResponse:
        """Apply up to 10,000 updates and deletions, in order, each as ``PUT`` or ``DELETE
        /profiles/{id}`` would: the answer is **200** with one result per change (200 and
        the updated profile, 204 deleted, or the status the single endpoint would have
        answered and its ``error``). A change is authorized by the profile's ``token`` in
        it, or, for the subscriber's own profiles, by X-Onyx-Subscriber-Token. A refused
        change changes nothing; the others are stored in one database transaction and
        sent to their host brokers as one batch of query packets. A client changing
        profiles at a high rate sends them here in small batches (``bench.churn`` at
        1,000 changes/s sends one request every 100 ms)."""
        chars = _text_chars(body.changes, "text")
        if chars > MAX_BATCH_CHARS:
            raise HTTPException(413, f"the changes have {chars:,} characters of profile text, more than the "
                                     f"{MAX_BATCH_CHARS:,} one request may carry: send them in smaller batches")
        charge(who, len(body.changes), chars, who.tenant)
        results: list[ChangeItem | None] = [None] * len(body.changes)
        current: dict[str, ProfileRecord | None] = {}  # the profiles as this request left them so far
        made: list[tuple[int, str, ProfileRecord, ProfileRecord]] = []
        for i, raw in enumerate(body.changes):
            try:
                change = ProfileChange.model_validate(raw)
                if change.op == "update":
                    if change.text is None:
                        raise ProfileError("an update needs the profile's new text")
                    validate_profile(change.text)
                pid = change.profile_id
                old = current[pid] if pid in current else store.profile(pid)
                if old is None or not (who.owns(old) or (change.token and store.token_matches(pid, change.token))):
                    if change.token and store.profile_by_token(change.token) is None:
                        raise HTTPException(401, "no profile has this change's token (it was never issued, or its "
                                                 "profile was deleted)")
                    if not change.token and who.anonymous:
                        raise HTTPException(401, "this change needs the profile's token (token) or its "
                                                 f"subscriber's ({SUBSCRIBER_TOKEN_HEADER})")
                    raise HTTPException(404, f"no profile {pid!r} of yours")
            except ValidationError as exc:
                results[i] = ChangeItem(index=i, status=422, error=Error(detail=_schema_problem(exc)))
                continue
            except ProfileError as exc:
                results[i] = ChangeItem(index=i, status=422, error=Error(detail=str(exc), column=exc.column))
                continue
            except HTTPException as exc:
                results[i] = ChangeItem(index=i, status=exc.status_code, error=Error(detail=exc.detail))
                continue
            text = change.text if change.op == "update" else old.text
            record = dataclasses.replace(old, text=text, version=old.version + 1)
            current[pid] = record if change.op == "update" else None
            made.append((i, change.op, record, old))
        with placing:
            with store.transaction() as tx:
                for _, op, record, _ in made:
                    if op == "update":
                        tx.update_profile(record)
                    else:
                        tx.delete_profile(record.id)
                release(tx, [old for _, op, _, old in made if op == "delete"])
                announce_changes(sender, [(op, record) for _, op, record, _ in made])
            for _, op, record, _ in made:
                if op == "delete":
                    placer.forget(record.id)
                    load.add(record.host_broker, -1)
        for i, op, record, _ in made:
            results[i] = (ChangeItem(index=i, status=200, profile=_view(record)) if op == "update"
                          else ChangeItem(index=i, status=204))
        out = ProfileChangesApplied(applied=len(made), failed=len(results) - len(made), results=results)
        return JSONResponse(out.model_dump(mode="json", exclude_none=True))

    # -- the overlay -----------------------------------------------------------------------------

    @app.post("/rebalance", response_model=list[MoveView], summary="Re-place profiles (operators)",
              operation_id="rebalance",
              dependencies=[Depends(access.allow("operator", sees="every profile's placement"))],
              responses=error_responses({401: "no or a wrong operator token (or the service has none)",
                                         403: "a token of another kind", 503: _UNAVAILABLE}))
    def rebalance() -> list[MoveView]:
        """Ask the placement strategy for a better placement of the registered profiles
        and move them: each moved profile is deleted at its old host and added at its
        new one (two versions, so every broker applies them in the right order); its
        delivery topic stays the same."""
        done = []
        with placing:
            for move in placer.rebalance():
                old = store.profile(move.profile_id)
                if old is None or old.host_broker != move.from_broker:
                    continue
                gone = dataclasses.replace(old, version=old.version + 1)
                moved = dataclasses.replace(old, host_broker=move.to_broker, version=old.version + 2)
                with store.transaction() as tx:
                    tx.update_profile(moved)
                    announce_profile(sender, "delete", gone)
                    announce_profile(sender, "add", moved)
                load.add(move.from_broker, -1)
                load.add(move.to_broker)
                done.append(MoveView(**move._asdict()))
        return done

    @app.get("/brokers", response_model=list[BrokerView], summary="The brokers of the overlay",
             operation_id="list_brokers", responses=error_responses({401: "no or an unknown token",
                                                                     503: _UNAVAILABLE}))
    def list_brokers(who: Caller = Depends(access.allow(
            "subscriber", "owner", "publisher", "operator",
            sees="the brokers, their neighbours and profile counts, and of their sources the ones it may read or "
                 "owns; an operator: all"))) -> list[BrokerView]:
        counts = store.profile_counts()
        readable = access.readable(who)
        return [BrokerView(broker_id=b, topic=topics.broker_topic(b), profiles=counts.get(b, 0),
                           neighbours=sorted(overlay.graph.neighbors(b)),
                           sources=sorted(s for s, r in overlay.sources.items()
                                          if r == b and (readable is None or s in readable)))
                for b in overlay.brokers]

    database = DatabasePing(store.ping)
    app.router.on_shutdown.append(database.close)

    @app.get("/health", response_model=Health, summary="Liveness and readiness", operation_id="health",
             responses={503: {"model": Health, "description": "the database cannot be reached, or did not answer "
                                                             "within ONYX_HEALTH_TIMEOUT seconds: not ready"}})
    async def health(_: None = Depends(access.public(sees="whether the service is ready"))) -> JSONResponse:
        """Anyone may ask, with any ``Host``. Answered on the event loop, the database pinged in
        a thread of its own: it never waits behind requests and streams that hold the others."""
        problem = await database.check()
        if problem is not None:
            return JSONResponse(status_code=503, content={"status": "unavailable", "database": problem})
        return JSONResponse(content={"status": "ok", "database": "ok", "brokers": len(overlay.brokers)})

    add_metadata(app, store, metadata, subscribers, error_responses, lambda: anonymous.charge(None, 1))
    return app


def _text_chars(items: Sequence[Any], field: str) -> int:
    """Characters of ``field`` over the items of a batch that are objects with a string
    there (the rest is refused item by item later)."""
    return sum(len(x[field]) for x in items if isinstance(x, dict) and isinstance(x.get(field), str))
