"""Kafka topic names (DESIGN.md section 5) and topic creation."""

from __future__ import annotations

from typing import Iterable

DEAD_LETTER = "onyx.dead-letter"
"""Rejected input, with the reason in the ``onyx-reason`` header."""

CATALOG = "onyx.catalog"
"""Compacted: registered sources and their schemas/dictionaries, keyed by source id."""

PROFILES = "onyx.profiles"
"""Compacted: the registered profiles, keyed by profile id (a broker rebuilds its state from it)."""


SOURCE_PREFIX = "onyx.src."
BROKER_PREFIX = "onyx.broker."


def source_topic(source_id: str) -> str:
    """Where publishers of ``source_id`` write text XML."""
    return SOURCE_PREFIX + source_id


def broker_topic(broker_id: str) -> str:
    """A broker's inbound topic (four flows, told apart by the ``onyx-flow`` header)."""
    return BROKER_PREFIX + broker_id


def delivery_topic(name: str) -> str:
    """A delivery topic for subscribers, records keyed by profile id. By default one
    per host broker (``name`` = broker id); a subscriber may name its own instead."""
    return f"onyx.deliver.{name}"


def ensure_topics(bootstrap_servers: str, names: Iterable[str], partitions: int = 1) -> list[str]:
    """Create the topics that do not exist yet; returns the ones created."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        wanted = set(names) - set(admin.list_topics())
        if wanted:
            try:
                admin.create_topics([NewTopic(n, partitions, 1) for n in sorted(wanted)])
            except TopicAlreadyExistsError:
                pass  # raced with auto-creation; the topic exists, which is all we need
        return sorted(wanted)
    finally:
        admin.close()
