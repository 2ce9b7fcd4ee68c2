"""Creating delivery topics when the registration service hands them out.

A subscriber's delivery topic is created when it is assigned or claimed, so a consumer
that subscribes right after registering finds it. The service talks to a
:class:`TopicAdmin`: :class:`KafkaTopicAdmin` in production, a fake in unit tests
(as :class:`~broker.registry.control_packets.Sender` for control packets).

>>> admin = NoTopicAdmin()
>>> admin.create("alerts.sf")                      # nothing to do: topics come from elsewhere
"""

from __future__ import annotations

from typing import Protocol

from broker import config


class TopicAdminError(RuntimeError):
    """Kafka could not create a topic (unreachable, timed out); nothing was registered."""


class TopicRefusedError(TopicAdminError):
    """Kafka does not allow the service to create this topic (its ACLs): a request to fix,
    not to retry."""


class TopicAdmin(Protocol):
    """Creates topics (a topic that exists already is fine) and tells whether one exists."""

    def create(self, topic: str) -> None: ...

    def exists(self, topic: str) -> bool: ...


class NoTopicAdmin:
    """Creates nothing: for a service whose topics an operator creates (or a unit test)."""

    def create(self, topic: str) -> None:
        return None

    def exists(self, topic: str) -> bool:
        return False


class KafkaTopicAdmin:
    """Creates topics with Kafka's admin API and waits until every broker knows them."""

    def __init__(self, bootstrap_servers: str, partitions: int = config.DELIVERY_PARTITIONS,
                 timeout_s: float = 15.0) -> None:
        from kafka import KafkaAdminClient

        from broker.kafka_auth import client_options

        self.partitions = partitions
        self.timeout_s = timeout_s
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=int(timeout_s * 1000),
                                      **client_options())

    def create(self, topic: str) -> None:
        from kafka.errors import (ClusterAuthorizationFailedError, KafkaError, TopicAlreadyExistsError,
                                  TopicAuthorizationFailedError)

        try:
            # replication -1: the cluster's default.replication.factor
            self.admin.create_topics({topic: {"num_partitions": self.partitions, "replication_factor": -1}},
                                     timeout_ms=int(self.timeout_s * 1000), wait_for_metadata=True)
        except TopicAlreadyExistsError:
            pass
        except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError):
            raise TopicRefusedError(f"Kafka does not let the registration service create topic {topic} (ACLs): "
                                    "name a topic under a prefix the operator allows for delivery topics, or omit "
                                    "delivery.topic to use your own default topic") from None
        except KafkaError as exc:
            raise TopicAdminError(f"could not create Kafka topic {topic}: {exc}") from exc

    def exists(self, topic: str) -> bool:
        """Whether Kafka has ``topic`` (:class:`TopicAdminError` if it cannot be asked)."""
        from kafka.errors import KafkaError

        try:
            return topic in self.admin.list_topics()
        except KafkaError as exc:
            raise TopicAdminError(f"could not ask Kafka whether topic {topic} exists: {exc}") from exc

    def close(self) -> None:
        self.admin.close()
