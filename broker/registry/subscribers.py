"""Subscribers: the owners of profiles and delivery topics.

A subscriber registers (``POST /subscribers``) or is created with its first profile, and
gets an id, a token (shown once; stored as a hash) and a delivery topic of its own,
``onyx.deliver.<subscriber id>``, created in Kafka before the registration returns, so a
consumer can subscribe to it right away. Its profiles deliver there unless it names another
topic (:func:`broker.topics.subscriber_topic_reason`): one in its own namespace
(``onyx.deliver.<subscriber id>.<anything>``), or one under a prefix the operator allows
(ONYX_DELIVERY_TOPIC_PREFIXES) that no one else claimed and that does not exist in Kafka
already (a foreign topic). A named topic becomes the subscriber's, so nobody else can have
deliveries written into it, until no profile of its subscriber delivers there any more
(:meth:`Subscribers.release`).

>>> from broker.registry.store import Store
>>> from broker.registry.topic_admin import NoTopicAdmin
>>> subs = Subscribers(Store("sqlite://"), NoTopicAdmin(), prefixes=["alerts."])
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
from typing import Callable, Iterable

from broker import config, topics
from broker.registry.store import Store, SubscriberRecord, TopicTakenError, Transaction, hash_token
from broker.registry.topic_admin import TopicAdmin


# What JSON Schema can say of a delivery topic (topic_json_schema: with the operator's
# prefixes); the validator and the subscriber rules (broker.topics.subscriber_topic_reason)
# say the same and more (whose namespace it is), with a reason.
TOPIC_JSON_SCHEMA = {
    "type": "string", "pattern": r"^[A-Za-z0-9._-]{1,249}$", "minLength": 1, "maxLength": 249,
    "not": {"anyOf": [{"enum": [".", ".."]}, {"pattern": "^__"}]},
    "description": "a Kafka topic name (1-249 letters, digits, '.', '_', '-'; not '.' or '..'): your own "
                   "onyx.deliver.<subscriber id>, a topic of your namespace onyx.deliver.<subscriber id>.<name>, "
                   "or one under a prefix the operator allows; never the overlay's own onyx.* topics nor Kafka's __*",
}


def topic_json_schema(prefixes: Iterable[str]) -> dict:
    r""":data:`TOPIC_JSON_SCHEMA` with the topics the operator's ``prefixes`` allow: the
    ``onyx.deliver.`` namespace (whose part, the service checks: 409 for another's) and
    names under the prefixes; nothing else is a valid delivery topic.

    >>> print(topic_json_schema(["alerts."])["pattern"])
    ^(onyx\.deliver\.[A-Za-z0-9_-]+(\.[A-Za-z0-9._-]+)?|alerts\.[A-Za-z0-9._-]*)$
    """
    names = [r"onyx\.deliver\.[A-Za-z0-9_-]+(\.[A-Za-z0-9._-]+)?", *(re.escape(p) + "[A-Za-z0-9._-]*" for p in prefixes)]
    under = f"a topic under {', '.join(prefixes)} (the operator's prefixes)" if prefixes else "no other"
    return {**TOPIC_JSON_SCHEMA, "pattern": f"^({'|'.join(names)})$",
            "description": "a Kafka topic name: your own onyx.deliver.<subscriber id>, a topic of your namespace "
                           f"onyx.deliver.<subscriber id>.<name>, or {under}; never Kafka's own __* topics"}



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
    """The delivery topic is the overlay's or Kafka's own, or outside the subscriber's namespace and prefixes."""


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

    def __init__(self, store: Store, admin: TopicAdmin, taken: Iterable[str] = (),
                 prefixes: Iterable[str] = config.DELIVERY_TOPIC_PREFIXES) -> None:
        self.store = store
        self.admin = admin
        self.taken = set(taken)
        self.prefixes = tuple(prefixes)  # the operator's delivery topic prefixes
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

    def check_topic(self, subscriber_id: str, requested: str | None) -> None:
        """:class:`TopicNotAllowedError` (422) if the subscriber may not name ``requested``,
        :class:`~broker.registry.store.TopicTakenError` (409) if it is in another
        subscriber's namespace (checked before anything is stored; claims are checked when
        claiming)."""
        if requested is None:
            return
        own = default_topic(subscriber_id)
        reason = topics.subscriber_topic_reason(requested, own, self.prefixes)
        if reason is not None:
            raise (TopicTakenError if topics.others_namespace(requested, own) else TopicNotAllowedError)(reason)

    def delivery_topic(self, tx: Transaction, subscriber_id: str, requested: str | None) -> str:
        """The topic a profile of ``subscriber_id`` delivers to: its own default topic, or
        ``requested``, which is checked and claimed for the subscriber inside ``tx``
        (:class:`~broker.registry.store.TopicTakenError` if someone else owns it, or if it
        is outside the subscriber's namespace and exists in Kafka already: a foreign topic)."""
        own = default_topic(subscriber_id)
        if requested is None or requested == own:
            return own
        self.check_topic(subscriber_id, requested)
        if tx.claim_topic(requested, subscriber_id) and not topics.in_namespace(requested, own) \
                and self.admin.exists(requested):
            raise TopicTakenError(f"delivery topic {requested} exists in Kafka already and was not created for you: "
                                  "name another topic, or omit delivery.topic to use your own")
        return requested

    def release(self, tx: Transaction, subscriber_id: str | None, names: Iterable[str],
                in_use: Callable[[str], bool] = lambda topic: False) -> list[str]:
        """Give up the subscriber's claims on ``names`` that none of its profiles (as ``tx``
        sees them) delivers to any more and ``in_use`` (say, a metadata subscription) does
        not hold; never its own default topic. The topics stay in Kafka. Returns the
        topics released."""
        if subscriber_id is None:
            return []
        own = default_topic(subscriber_id)
        released = []
        for topic in sorted(set(names) - {own}):
            if not tx.topic_in_use(topic, subscriber_id) and not in_use(topic):
                tx.release_topic(topic, subscriber_id)
                released.append(topic)
        return released
