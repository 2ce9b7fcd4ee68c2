"""How Onyx's Kafka clients authenticate: nothing against a local Kafka, SASL/SCRAM as
the user of :data:`broker.config.KAFKA_USERNAME` in a deployment whose Kafka enforces ACLs.

Three spellings of the same settings: keyword arguments of kafka-python's clients,
``kafka.*`` options of Spark's Kafka source and sink, and librdkafka's configuration
(confluent-kafka, what brokers and the fast clients produce and consume with).

>>> client_options(None, None), spark_options(None, None), librdkafka_options(None, None)
({}, {}, {})
>>> client_options("b1", "pw")["sasl_plain_username"]
'b1'
>>> spark_options("b1", "pw")["kafka.sasl.jaas.config"]
'org.apache.kafka.common.security.scram.ScramLoginModule required username="b1" password="pw";'
"""

from __future__ import annotations

from broker import config

_UNSET = object()


def _credentials(username, password) -> tuple[str | None, str | None]:
    return (config.KAFKA_USERNAME if username is _UNSET else username,
            config.KAFKA_PASSWORD if password is _UNSET else password)


def _jaas_quoted(value: str) -> str:
    """``value`` inside a JAAS double-quoted string (backslash and quote escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def client_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Keyword arguments for kafka-python's producer, consumer and admin client
    (the configured user's unless given)."""
    username, password = _credentials(username, password)
    if not username:
        return {}
    return {"security_protocol": config.KAFKA_SECURITY_PROTOCOL, "sasl_mechanism": config.KAFKA_SASL_MECHANISM,
            "sasl_plain_username": username, "sasl_plain_password": password or ""}


def spark_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Options for Spark's Kafka source and sink (the configured user's unless given)."""
    username, password = _credentials(username, password)
    if not username:
        return {}
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{_jaas_quoted(username)}" password="{_jaas_quoted(password or "")}";')
    return {"kafka.security.protocol": config.KAFKA_SECURITY_PROTOCOL,
            "kafka.sasl.mechanism": config.KAFKA_SASL_MECHANISM, "kafka.sasl.jaas.config": jaas}


def librdkafka_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Configuration for confluent-kafka's clients (the configured user's unless given).

    >>> librdkafka_options("b1", "pw")["sasl.username"]
    'b1'
    """
    username, password = _credentials(username, password)
    if not username:
        return {}
    return {"security.protocol": config.KAFKA_SECURITY_PROTOCOL, "sasl.mechanism": config.KAFKA_SASL_MECHANISM,
            "sasl.username": username, "sasl.password": password or ""}
