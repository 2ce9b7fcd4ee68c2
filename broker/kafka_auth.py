"""How Onyx's Kafka clients authenticate: nothing against an open local Kafka, SASL/SCRAM as
a user of their own against a Kafka that enforces ACLs (the Helm chart's, ``onyx up --secure``).

Three spellings of the same settings: keyword arguments of kafka-python's clients,
``kafka.*`` options of Spark's Kafka source and sink, and librdkafka's configuration
(confluent-kafka, what brokers and the fast clients produce and consume with).

Each function takes a user and its password; without them, the process's user: the one of
:data:`broker.config.KAFKA_USERNAME` (a deployed pod's), unless :func:`use_process_user`
named another for a while (``onyx up --secure`` runs the registration service in its own
process, whose code asks for the process's user: it is the registration service's user then).

>>> client_options(None, None), spark_options(None, None), librdkafka_options(None, None)
({}, {}, {})
>>> client_options("b1", "pw")["sasl_plain_username"]
'b1'
>>> spark_options(*Credentials("b1", "pw"))["kafka.sasl.jaas.config"]
'org.apache.kafka.common.security.scram.ScramLoginModule required username="b1" password="pw";'
"""

from __future__ import annotations

from typing import NamedTuple

from broker import config

_UNSET = object()


class Credentials(NamedTuple):
    """A Kafka user and its password (``client_options(*credentials)``)."""

    username: str
    password: str


_process_user: list[Credentials | None] = []  # set by use_process_user; empty: the configured user


def process_user() -> Credentials | None:
    """The user this process's clients authenticate as when no user is named: the last one
    :func:`use_process_user` set, else ONYX_KAFKA_USERNAME's (``None``: they do not
    authenticate)."""
    if _process_user:
        return _process_user[-1]
    return Credentials(config.KAFKA_USERNAME, config.KAFKA_PASSWORD or "") if config.KAFKA_USERNAME else None


def use_process_user(credentials: Credentials | None) -> None:
    """Make ``credentials`` the process's user until :func:`restore_process_user`: what a
    secure local overlay does for the registration service it serves in its own process,
    whose clients name no user (in Kubernetes its pod's environment does the same).

    >>> use_process_user(Credentials("registry", "pw")); process_user().username
    'registry'
    >>> restore_process_user(); process_user() == (Credentials(config.KAFKA_USERNAME, config.KAFKA_PASSWORD or "")
    ...                                            if config.KAFKA_USERNAME else None)
    True
    """
    _process_user.append(credentials)


def restore_process_user() -> None:
    """Undo the last :func:`use_process_user`."""
    _process_user.pop()


def _credentials(username, password) -> tuple[str | None, str | None]:
    if username is _UNSET:
        user = process_user()
        return (user.username, user.password) if user else (None, None)
    return username, password


def _jaas_quoted(value: str) -> str:
    """``value`` inside a JAAS double-quoted string (backslash and quote escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def client_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Keyword arguments for kafka-python's producer, consumer and admin client
    (the process's user unless given)."""
    username, password = _credentials(username, password)
    if not username:
        return {}
    return {"security_protocol": config.KAFKA_SECURITY_PROTOCOL, "sasl_mechanism": config.KAFKA_SASL_MECHANISM,
            "sasl_plain_username": username, "sasl_plain_password": password or ""}


def spark_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Options for Spark's Kafka source and sink (the process's user unless given)."""
    username, password = _credentials(username, password)
    if not username:
        return {}
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{_jaas_quoted(username)}" password="{_jaas_quoted(password or "")}";')
    return {"kafka.security.protocol": config.KAFKA_SECURITY_PROTOCOL,
            "kafka.sasl.mechanism": config.KAFKA_SASL_MECHANISM, "kafka.sasl.jaas.config": jaas}


def librdkafka_options(username=_UNSET, password=_UNSET) -> dict[str, str]:
    """Configuration for confluent-kafka's clients (the process's user unless given).

    >>> librdkafka_options("b1", "pw")["sasl.username"]
    'b1'
    """
    username, password = _credentials(username, password)
    if not username:
        return {}
    return {"security.protocol": config.KAFKA_SECURITY_PROTOCOL, "sasl.mechanism": config.KAFKA_SASL_MECHANISM,
            "sasl.username": username, "sasl.password": password or ""}


def environment(credentials: Credentials) -> dict[str, str]:
    """The environment with which a child process (an archive writer, a broker application)
    authenticates as ``credentials``.

    >>> sorted(environment(Credentials("archive", "pw")))
    ['ONYX_KAFKA_PASSWORD', 'ONYX_KAFKA_USERNAME']
    """
    return {"ONYX_KAFKA_USERNAME": credentials.username, "ONYX_KAFKA_PASSWORD": credentials.password}
