"""Kafka topic names (DESIGN.md section 5), which of them are the overlay's own, and topic creation.

The overlay reads and writes some topics for itself (:data:`INTERNAL`); every other
topic a delivery goes to is subscriber data. The registration service refuses a
delivery topic that is, or looks like, an internal one; brokers dead-letter a delivery
that would land on one (a delivery into a topic a broker reads would be read again,
matched again and delivered again: a loop that grows without bound).

>>> internal_reason("onyx.src.news")
"onyx.src.news is the overlay's own topic (onyx.src.*: what publishers write; root brokers read it)"
>>> internal_reason("ONYX_Broker_b2") is not None    # case, '_' and '-' do not make a new name
True
>>> internal_reason("onyx.deliver.s1a2b3c4d5e6f7a8b9") is None, internal_reason("alerts.sf") is None
(True, True)
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

DEAD_LETTER = "onyx.dead-letter"
"""Rejected input, with the reason in the ``onyx-reason`` header."""

CATALOG = "onyx.catalog"
"""Compacted: registered sources and their schemas/dictionaries, keyed by source id."""

METADATA = "onyx.metadata"
"""Compacted: the metadata provider's log (documents by URI, users' metadata subscriptions)."""

PROFILES = "onyx.profiles"
"""Compacted: the registered profiles, keyed by profile id (a broker rebuilds its state from it)."""


SOURCE_PREFIX = "onyx.src."
BROKER_PREFIX = "onyx.broker."
STATE_PREFIX = "onyx.state."
DELIVER_PREFIX = "onyx.deliver."
NAMESPACE = "onyx."
"""Every name the overlay gives a topic starts with this; subscribers name topics outside it
only under the prefixes an operator allows (ONYX_DELIVERY_TOPIC_PREFIXES)."""

KAFKA_INTERNAL_PREFIX = "__"
"""Kafka's own topics (``__consumer_offsets``, ``__transaction_state``, ...): never a delivery topic."""


class Internal(NamedTuple):
    """An internal topic, or family of topics: a name prefix and what it is for."""

    prefix: str
    pattern: str   # how a user would write it
    role: str


INTERNAL: tuple[Internal, ...] = (
    Internal(SOURCE_PREFIX, "onyx.src.*", "what publishers write; root brokers read it"),
    Internal(BROKER_PREFIX, "onyx.broker.*", "a broker's inbound messages, profiles and routing updates"),
    Internal(CATALOG, "onyx.catalog*", "the compacted source catalog brokers rebuild their state from"),
    Internal(METADATA, "onyx.metadata*", "the compacted metadata log the registration services replicate through"),
    Internal(PROFILES, "onyx.profiles*", "the compacted profile log brokers rebuild their state from"),
    Internal(DEAD_LETTER, "onyx.dead-letter", "the overlay's rejected input"),
    Internal(STATE_PREFIX, "onyx.state.*", "a broker's state log: the control packets it applied, in order"),
)
"""Every topic the overlay reads or writes for itself, as name prefixes: the one list the
registration service, the brokers' delivery guard, the start-up check of stored profiles
and the deployment's Kafka ACLs use. A feature that adds an internal topic adds it here.
Delivery topics (``onyx.deliver.*``) are not internal: brokers only write them."""


def _fold(name: str) -> str:
    """A topic name with the differences that do not make a name distinct to a reader
    folded away: case, and '_' / '-' against '.' (Kafka itself treats ``a.b`` and ``a_b``
    as colliding names)."""
    return name.lower().replace("_", ".").replace("-", ".")


def internal_reason(topic: str) -> str | None:
    """Why ``topic`` is the overlay's own (so no delivery may go there), or ``None``.
    A topic is internal when it is, or starts like, one of :data:`INTERNAL`, look-alikes
    (other case, '_' or '-' for '.') included."""
    folded = _fold(topic)
    for entry in INTERNAL:
        if folded.startswith(_fold(entry.prefix).rstrip(".")):
            return f"{topic} is the overlay's own topic ({entry.pattern}: {entry.role})"
    return None


def unwritable_reason(topic: str) -> str | None:
    """Why no delivery may ever be written to ``topic``, or ``None``: it is the overlay's own
    (:func:`internal_reason`) or Kafka's (``__*``).

    >>> print(unwritable_reason("__consumer_offsets"))
    __consumer_offsets is one of Kafka's own topics (__*)
    """
    if topic.startswith(KAFKA_INTERNAL_PREFIX):
        return f"{topic} is one of Kafka's own topics ({KAFKA_INTERNAL_PREFIX}*)"
    return internal_reason(topic)


def in_namespace(topic: str, own: str) -> bool:
    """Whether ``topic`` is in the namespace of the subscriber whose own delivery topic is
    ``own``: ``own`` itself or ``own.<anything>``.

    >>> in_namespace("onyx.deliver.s1.alerts", "onyx.deliver.s1"), in_namespace("onyx.deliver.s10", "onyx.deliver.s1")
    (True, False)
    """
    return topic == own or topic.startswith(own + ".")


def others_namespace(topic: str, own: str) -> bool:
    """Whether ``topic`` is (or looks like: other case, '_' or '-') a name in the
    ``onyx.deliver.*`` namespace the service hands out, and not in ``own``'s.

    >>> others_namespace("onyx.deliver.b4", "onyx.deliver.s1"), others_namespace("ONYX_DELIVER_s1", "onyx.deliver.s1")
    (True, True)
    """
    return not in_namespace(topic, own) and _fold(topic).startswith(_fold(DELIVER_PREFIX).rstrip("."))


def subscriber_topic_reason(topic: str, own: str, prefixes: Iterable[str] = ()) -> str | None:
    """Why a subscriber whose default delivery topic is ``own`` may not name ``topic``
    as a delivery topic, or ``None``: a subscriber writes only into its own namespace
    (:func:`in_namespace`) and under the prefixes an operator allows (``prefixes``);
    internal topics (the overlay's, and Kafka's own ``__*``) never. Another subscriber's
    namespace is refused too (:func:`others_namespace` tells it apart: it is taken, 409).

    >>> subscriber_topic_reason("onyx.deliver.s1.sf", "onyx.deliver.s1") is None
    True
    >>> subscriber_topic_reason("alerts.sf", "onyx.deliver.s1", ["alerts."]) is None
    True
    >>> print(subscriber_topic_reason("alerts.sf", "onyx.deliver.s1"))
    alerts.sf is outside your namespace: name onyx.deliver.s1 or a topic under onyx.deliver.s1., or omit delivery.topic to use onyx.deliver.s1
    >>> print(subscriber_topic_reason("__consumer_offsets", "onyx.deliver.s1", ["_"]))
    __consumer_offsets is one of Kafka's own topics (__*): name onyx.deliver.s1 or a topic under onyx.deliver.s1. or one under _, or omit delivery.topic to use onyx.deliver.s1
    """
    prefixes = tuple(prefixes)
    allowed = " or ".join([f"{own} or a topic under {own}.", *(f"one under {p}" for p in prefixes)])
    advice = f"name {allowed}, or omit delivery.topic to use {own}"
    if topic.startswith(KAFKA_INTERNAL_PREFIX):
        return f"{unwritable_reason(topic)}: {advice}"
    reason = internal_reason(topic)
    if reason is not None:
        return f"{reason}; a delivery there would reach the overlay itself. {advice[0].upper()}{advice[1:]}"
    if in_namespace(topic, own):
        return None
    if others_namespace(topic, own):
        return f"{topic} is a delivery topic the service assigns to someone else: {advice}"
    if any(topic.startswith(p) for p in prefixes):
        return None
    return f"{topic} is outside your namespace: {advice}"


def collision_key(topic: str) -> str:
    """The name Kafka considers ``topic`` the same as: '.' and '_' collide in topic names
    (their metrics share a name), so ``alerts.sf`` and ``alerts_sf`` are one topic to own.

    >>> collision_key("alerts.sf") == collision_key("alerts_sf")
    True
    """
    return topic.replace(".", "_")


def source_topic(source_id: str) -> str:
    """Where publishers of ``source_id`` write text XML."""
    return SOURCE_PREFIX + source_id


def state_topic(broker_id: str) -> str:
    """A broker's state log: every control packet it applied, in order (one partition)."""
    return STATE_PREFIX + broker_id


def broker_topic(broker_id: str) -> str:
    """A broker's inbound topic (four flows, told apart by the ``onyx-flow`` header)."""
    return BROKER_PREFIX + broker_id


def delivery_topic(name: str) -> str:
    """A delivery topic, records keyed by profile id: ``name`` is a subscriber id for a
    subscriber's default topic (profiles registered before subscribers existed used a
    host broker's id)."""
    return DELIVER_PREFIX + name


def ensure_topics(bootstrap_servers: str, names: Iterable[str], partitions: int = 1,
                  config: dict[str, str] | None = None, auth: dict[str, str] | None = None) -> list[str]:
    """Create the topics that do not exist yet (with topic ``config``, e.g. retention),
    with the cluster's default replication factor (3 on a cluster of three nodes); returns
    the ones created. ``auth``: kafka-python options of the user to act as
    (:func:`broker.kafka_auth.client_options`; default: the process's user)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from broker.kafka_auth import client_options

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, **(client_options() if auth is None else auth))
    try:
        wanted = set(names) - set(admin.list_topics())
        if wanted:
            try:
                admin.create_topics([NewTopic(n, partitions, -1, topic_configs=config or {}) for n in sorted(wanted)])
            except TopicAlreadyExistsError:
                pass  # raced with auto-creation; the topic exists, which is all we need
        return sorted(wanted)
    finally:
        admin.close()
