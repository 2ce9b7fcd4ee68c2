"""Subscribers: the owners of profiles and delivery topics.

A subscriber registers (``POST /subscribers``) or is created with its first profile, and
gets an id, a token (shown once; stored as a hash) and a delivery topic of its own,
``onyx.deliver.<subscriber id>``, created in Kafka before the registration returns, so a
consumer can subscribe to it right away. Its profiles deliver there unless it names another topic: that topic must
lie outside the overlay's ``onyx.*`` namespace (:func:`broker.topics.subscriber_topic_reason`)
and becomes the subscriber's, so nobody else can have deliveries written into it.

>>> from broker.registry.store import Store
>>> from broker.registry.topic_admin import NoTopicAdmin
>>> subs = Subscribers(Store("sqlite://"), NoTopicAdmin())
>>> with subs.store.transaction() as tx:
...     alice = subs.register(tx)
...     topic = subs.delivery_topic(tx, alice.id, "alerts.sf")
...     subs.create_topics(tx)                # last: nothing is created for a refused request
>>> topic
'alerts.sf'
>>> alice.delivery_topic == f"onyx.deliver.{alice.id}", subs.authenticate(alice.token).id == alice.id
(True, True)
"""

from __future__ import annotations

import re

import secrets
from dataclasses import dataclass
from typing import Iterable

from broker import topics
from broker.registry.store import Store, SubscriberRecord, Transaction, hash_token
from broker.registry.topic_admin import TopicAdmin


# What JSON Schema can say of a delivery topic; the validator and the subscriber rules
# (broker.topics.subscriber_topic_reason) say the same and more, with a reason.
TOPIC_JSON_SCHEMA = {
    "type": "string", "pattern": r"^[A-Za-z0-9._-]{1,249}$", "minLength": 1, "maxLength": 249,
    "not": {"anyOf": [{"enum": [".", ".."]}, {"pattern": "^[Oo][Nn][Yy][Xx]([._-]|$)"}]},
    "description": "a Kafka topic name (1-249 letters, digits, '.', '_', '-'; not '.' or '..') outside the overlay's "
                   "onyx.* names (look-alikes with other case, '_' or '-' included); only your own default topic "
                   "onyx.deliver.<subscriber id> may be named there",
}



def legal_topic(name: str | None) -> str | None:
    """``name`` if Kafka takes it as a topic name (or it is ``None``), else :class:`ValueError`."""
    if name is not None and (not re.match(TOPIC_JSON_SCHEMA["pattern"], name) or name in (".", "..")):
        raise ValueError("a Kafka topic name has 1-249 characters from letters, digits, '.', '_' and '-', "
                         "and is not '.' or '..'")
    return name

class SubscriberError(ValueError):
    """A subscriber request that cannot be granted; the message says what to do instead."""


class UnknownSubscriberError(SubscriberError):
    """No subscriber has this token."""


class TopicNotAllowedError(SubscriberError):
    """The delivery topic is the overlay's own, or another subscriber's default topic."""


@dataclass(frozen=True)
class NewSubscriber:
    """A registered subscriber, with its token (the only time the token is known)."""

    id: str
    token: str
    delivery_topic: str


def default_topic(subscriber_id: str) -> str:
    """A subscriber's own delivery topic."""
    return topics.delivery_topic(subscriber_id)


class Subscribers:
    """Registers and authenticates subscribers and grants them delivery topics; ``taken``
    are names a subscriber id must not have (the brokers', whose ``onyx.deliver.<broker>``
    topics profiles from before subscribers deliver to)."""

    def __init__(self, store: Store, admin: TopicAdmin, taken: Iterable[str] = ()) -> None:
        self.store = store
        self.admin = admin
        self.taken = set(taken)
        self._known: dict[str, SubscriberRecord] = {}  # token hash -> subscriber (see authenticate)

    def new_id(self) -> str:
        """A fresh subscriber id (not stored until :meth:`register`)."""
        while True:
            subscriber_id = "s" + secrets.token_hex(8)
            if subscriber_id not in self.taken:
                return subscriber_id

    def register(self, tx: Transaction, subscriber_id: str | None = None) -> NewSubscriber:
        """Store a new subscriber, owner of its delivery topic, inside ``tx``."""
        subscriber_id = subscriber_id or self.new_id()
        token = secrets.token_urlsafe(24)
        topic = default_topic(subscriber_id)
        tx.add_subscriber(subscriber_id, token)
        tx.claim_topic(topic, subscriber_id)
        return NewSubscriber(subscriber_id, token, topic)

    def create_topics(self, tx: Transaction) -> None:
        """Create in Kafka the topics claimed in ``tx``: the last step before it commits,
        so a refused request creates none and a failure here undoes the registration."""
        for topic in tx.claimed:
            self.admin.create(topic)

    def authenticate(self, token: str) -> SubscriberRecord:
        """The subscriber with this token, or :class:`UnknownSubscriberError`. Subscribers
        are never deleted nor given new tokens, so the ones found are remembered (a few
        thousand at most): a subscriber registering profiles one by one costs one query
        less per profile."""
        key = hash_token(token)  # what is kept is the hash, as in the store, not the token
        record = self._known.get(key)
        if record is not None:
            return record
        record = self.store.subscriber_by_token(token)
        if record is None:
            raise UnknownSubscriberError("unknown subscriber token: send the token POST /subscribers returned, "
                                         "or leave X-Onyx-Subscriber-Token out to register as a new subscriber")
        if len(self._known) >= 4096:
            self._known.clear()
        self._known[key] = record
        return record

    @staticmethod
    def check_topic(subscriber_id: str, requested: str | None) -> None:
        """:class:`TopicNotAllowedError` if the subscriber may not name ``requested``
        (checked before anything is stored; ownership is checked when claiming)."""
        if requested is not None:
            reason = topics.subscriber_topic_reason(requested, default_topic(subscriber_id))
            if reason is not None:
                raise TopicNotAllowedError(reason)

    def delivery_topic(self, tx: Transaction, subscriber_id: str, requested: str | None) -> str:
        """The topic a profile of ``subscriber_id`` delivers to: its own default topic, or
        ``requested``, which is checked and claimed for the subscriber inside ``tx``
        (:class:`~broker.registry.store.TopicTakenError` if someone else owns it)."""
        own = default_topic(subscriber_id)
        if requested is None or requested == own:
            return own
        self.check_topic(subscriber_id, requested)
        tx.claim_topic(requested, subscriber_id)
        return requested
