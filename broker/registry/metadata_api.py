"""The registration service's metadata (issue 32): the service is a Metadata Provider
(:class:`~broker.metadata.provider.MetadataProvider`); this module feeds it the service's
sources and profiles and adds the users' side of MDV's publish & subscribe over HTTP:

* ``POST /metadata/subscriptions`` ``{"rule": "search Source s register s where ...",
  "topic": optional}``: what the rule registers now, and every change of it later, goes to the
  subscriber's delivery topic (or ``topic``, checked as a profile's is), keyed
  ``metadata:<subscription id>``; ``onyx metadata watch`` reads it. A rule MDV's language or
  the Onyx schema refuses is a 422 with the ``column`` of the problem.
* ``DELETE /metadata/subscriptions/{id}``: ends one (the subscriber's token).

What a subscription's topic gets is the subscriber's view (:func:`tenant_view`): its own
profiles' documents and the sources it may read, never another tenant's.

A profile's document mirrors what the profile log says of it (:class:`ProfileFeed`).
"""

import json
from typing import Annotated, Callable

from fastapi import Depends, FastAPI, HTTPException, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, WithJsonSchema, field_validator

from broker import topics
from broker.metadata.documents import Document, profile_document, source_document
from broker.metadata.onyx_schema import profile_doc
from broker.metadata.provider import MetadataProvider
from broker.packets import send_all
from broker.registry import access
from broker.registry.control_packets import Sender, source_dictionary
from broker.registry.store import SourceRecord, Store
from broker.registry.subscribers import TOPIC_JSON_SCHEMA, Subscribers, legal_topic
from catalog import RuleError
from catalog.defaults import MAX_RULE_CHARS


def source_doc(source: SourceRecord) -> Document:
    """A stored source as its metadata document."""
    return source_document(source.id, source.name, source.root_broker, source.schema, source.rate, source.size,
                           source_dictionary(source))


def stored_documents(store: Store) -> list[Document]:
    """The documents of every source and profile the database holds."""
    return ([source_doc(s) for s in store.list_sources()]
            + [profile_document(p.id, p.version, p.host_broker) for p in store.list_profiles()])


def tenant_view(store: Store) -> Callable[[str, str], bool]:
    """Whether subscriber ``s`` may see the metadata resource ``uri``: a profile's if it is
    its own, a source's (its schema and dictionary too) if it may read the source, the
    overlay's (brokers, links, trees) always.

    >>> from broker.registry.store import ProfileRecord
    >>> store = Store("sqlite://")
    >>> with store.transaction() as tx:
    ...     tx.add_profile(ProfileRecord("p1", "/a", "b1", "t", 1, "s1"), "token")
    >>> see = tenant_view(store)
    >>> see("s1", "urn:onyx:profiles:p1#profile"), see("s2", "urn:onyx:profiles:p1#profile")
    (True, False)
    >>> see("s2", "urn:onyx:sources:news#source"), see("s2", "urn:onyx:brokers:b1#broker")
    (False, True)
    """
    def visible(subscriber_id: str, uri: str) -> bool:
        kind, _, rest = uri.removeprefix("urn:onyx:").partition(":")
        ident = rest.split("#", 1)[0]
        if kind == "profiles":
            record = store.profile(ident)
            return record is not None and record.subscriber_id == subscriber_id
        if kind == "sources":
            return ident in store.readable_sources(subscriber_id)
        return True

    return visible


class ProfileFeed:
    """A :class:`~broker.registry.control_packets.Sender` that, once the packets it is given
    are written, queues the metadata document of every profile-log record among them (a
    tombstone deletes it): the provider learns of a profile change from the same place the
    brokers' recovery does, whichever operation made it."""

    def __init__(self, sender: Sender, provider: MetadataProvider) -> None:
        self.sender = sender
        self.provider = provider

    def send(self, topic: str, packet) -> None:
        self.sender.send(topic, packet)
        self._follow([(topic, packet)])

    def send_batch(self, items) -> None:
        send_all(self.sender, items)
        self._follow(items)

    def _follow(self, items) -> None:
        docs, gone = [], []
        for topic, (key, value, _) in items:
            if topic != topics.PROFILES:
                continue
            if value is None:
                gone.append(profile_doc(key.decode()))
            else:
                body = json.loads(value)
                docs.append(profile_document(body["profile_id"], int(body["version"]), body["host_broker"]))
        if docs or gone:
            self.provider.queue(docs, gone)


class MetadataSubscriptionIn(BaseModel):
    rule: str = Field(min_length=1, max_length=MAX_RULE_CHARS, json_schema_extra={"format": "onyx-rule"},
                      description="a rule of MDV's language over the Onyx metadata schema, e.g. \"search Source s "
                                  "register s where s.schema.declares? = 'nitf' and s.rate > 100\"")
    topic: Annotated[str, WithJsonSchema(TOPIC_JSON_SCHEMA)] | None = Field(None,
                              description="where the changes go (default: the subscriber's own delivery topic)")


    @field_validator("topic")
    @classmethod
    def _legal_topic(cls, v: str | None) -> str | None:
        return legal_topic(v)


class MetadataSubscriptionOut(BaseModel):
    subscription_id: str
    topic: str = Field(description="the Kafka topic the changes go to, keyed metadata:<subscription_id>")
    subscriber_id: str
    subscriber_token: str | None = Field(None, description="the new subscriber's token (when none was sent)")


def add_metadata(app: FastAPI, store: Store, provider: MetadataProvider, subscribers: Subscribers,
                 errors: Callable, charge_anonymous: Callable[[], None]) -> None:
    """Add the metadata subscription operations (module docstring) to ``app``; ``errors`` is
    the service's error-answer documenter, ``charge_anonymous`` takes one registration from
    what requests without a token may make (429 past it)."""
    rights = access.of(app)
    provider.restrict(tenant_view(store))

    @app.post("/metadata/subscriptions", response_model=MetadataSubscriptionOut, response_model_exclude_none=True,
              status_code=201, summary="Subscribe to metadata changes by an MDV rule",
              operation_id="subscribe_metadata",
              responses=errors({400: "the body is not JSON", 401: "unknown subscriber token",
                                403: "a token of another kind",
                                409: "the topic belongs to another subscriber",
                                413: "the body is too large", 429: "too many registrations without a token",
                                422: "a rule the language or the schema refuses (with the column), or a topic "
                                     "outside your namespace", 503: "Kafka or the database failed: nothing was "
                                                                     "changed"}))
    def subscribe(body: MetadataSubscriptionIn, who: access.Caller = Depends(rights.allow(
            "anonymous", "subscriber", sees="its new subscription (anonymous: of a new subscriber); what it "
                                            "delivers is its own profiles and the sources it may read"))
                  ) -> MetadataSubscriptionOut | JSONResponse:
        """What the rule registers goes to the topic now, every change of it later (JSON:
        ``subscription_id``, ``upserts`` {uri: {class, properties}}, ``deleted``, ``matched``,
        ``unmatched``), as far as the subscriber may see it: its own profiles, the sources
        it may read, the overlay's brokers and trees."""
        owner = who.subscriber
        if owner is None:
            charge_anonymous()
        subscriber_id = owner or subscribers.new_id()
        subscribers.check_topic(subscriber_id, body.topic)
        try:
            with store.transaction() as tx:  # a refused rule leaves no new subscriber behind
                new = None if owner else subscribers.register(tx, subscriber_id)
                topic = subscribers.delivery_topic(tx, subscriber_id, body.topic)
                subscribers.create_topics(tx)
                sub = provider.subscribe(body.rule, topic, subscriber_id)
        except RuleError as exc:
            return JSONResponse(status_code=422, content={"detail": f"rule: {exc.message}: nothing was registered",
                                                          "column": exc.position + 1})
        return MetadataSubscriptionOut(subscription_id=sub.id, topic=sub.topic, subscriber_id=subscriber_id,
                                       subscriber_token=new.token if new else None)

    @app.delete("/metadata/subscriptions/{subscription_id}", status_code=204, response_class=Response,
                summary="End a metadata subscription", operation_id="unsubscribe_metadata",
                responses=errors({401: "no or unknown subscriber token", 403: "a token of another kind",
                                  404: "no such subscription of yours", 503: "Kafka failed: nothing was changed"}))
    def unsubscribe(subscription_id: str, who: access.Caller = Depends(rights.allow(
            "subscriber", sees="its own subscriptions"))) -> Response:
        sub = provider.users.get(subscription_id)
        if sub is None or sub.subscriber_id != who.subscriber:
            raise HTTPException(404, f"no metadata subscription {subscription_id!r} of yours")
        provider.unsubscribe(subscription_id)
        return Response(status_code=204)
