"""The Kafka users of a secure local overlay (``onyx up --secure``) and their ACLs, made with
Kafka's Admin API as the local Kafka's super user.

Every rule comes from :mod:`broker.deploy.acls`, the source the Helm chart's ``KafkaUser`` s
render from. A user's ACLs are made exactly its rules (missing ones created, others deleted),
so a changed overlay or rule never leaves a right behind. Passwords are generated once and
kept in the overlay's folder (:data:`USERS_FILE`, mode 0600), never in ``cluster.json``; the
local names follow the chart's: ``onyx-broker-<id>``, ``onyx-registry``, ``onyx-archive``,
``onyx-pub-<name>``, ``onyx-sub-<subscriber id>``, and the local overlay's ``onyx-monitor``.

>>> sorted(f"{b.name} {b.operation.name}" for b in bindings("onyx-sub-s1", acls.subscriber_rules("s1")))[:2]
['onyx.deliver.s1 DESCRIBE', 'onyx.deliver.s1 READ']
>>> print(client_settings("127.0.0.1:9092", Credentials("onyx-pub-wire", "pw")).splitlines()[1])
security.protocol=SASL_PLAINTEXT
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from broker import config
from broker.deploy import acls
from broker.errors import SetupError
from broker.kafka_auth import Credentials, librdkafka_options
from broker.local.secret_files import new_secret, read_json, write_json

USERS_FILE = "kafka-users.json"
"""In the overlay's folder: every user's password, by name (mode 0600)."""

PREFIX = "onyx-"
"""Start of every local user's name (the chart's users start with the release's full name, ``onyx``)."""

REGISTRY = PREFIX + "registry"
ARCHIVE = PREFIX + "archive"
MONITOR = PREFIX + "monitor"


def broker_user(brokers: Sequence[str]) -> str:
    """The user of a Spark application serving ``brokers``: a broker's own (``onyx-broker-b1``),
    or ``onyx-brokers`` for one serving several (its rules: :func:`broker.deploy.acls.application_rules`).

    >>> broker_user(["b1"]), broker_user(["b1", "b2"])
    ('onyx-broker-b1', 'onyx-brokers')
    """
    return f"{PREFIX}broker-{brokers[0]}" if len(brokers) == 1 else f"{PREFIX}brokers"


def publisher_user(name: str) -> str:
    return f"{PREFIX}pub-{name}"


def subscriber_user(subscriber_id: str) -> str:
    return f"{PREFIX}sub-{subscriber_id}"


def bindings(username: str, rules: Sequence[acls.Rule]) -> set:
    """Kafka's ACL bindings of ``rules`` for user ``username``: one per rule and operation."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    kinds = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}
    patterns = {"literal": ResourcePatternType.LITERAL, "prefix": ResourcePatternType.PREFIXED}
    effects = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
    return {AclBinding(kinds[r.resource], r.name, patterns[r.pattern], f"User:{username}", "*",
                       AclOperation[op.upper()], effects[r.effect])
            for r in rules for op in r.operations}


def client_settings(bootstrap: str, user: Credentials) -> str:
    """What a Kafka client needs to log in as ``user`` (librdkafka / Java client properties),
    followed by the same as ``onyx`` commands' environment."""
    return "\n".join([f"bootstrap.servers={bootstrap}",
                      f"security.protocol={config.KAFKA_SECURITY_PROTOCOL}",
                      f"sasl.mechanism={config.KAFKA_SASL_MECHANISM}",
                      f"sasl.username={user.username}", f"sasl.password={user.password}",
                      f"# the onyx commands: export ONYX_KAFKA_USERNAME={user.username} "
                      f"ONYX_KAFKA_PASSWORD={user.password}"])


class KafkaUsers:
    """Users and ACLs of the secure Kafka at ``bootstrap``, made as its ``super_user``;
    passwords kept in ``folder`` / :data:`USERS_FILE`."""

    def __init__(self, bootstrap: str, super_user: Credentials, folder: Path) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.file = folder / USERS_FILE
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **librdkafka_options(*super_user)})

    def ensure(self, username: str, rules: Sequence[acls.Rule]) -> Credentials:
        """User ``username`` with its kept password (a new one the first time) and exactly the
        ACLs of ``rules``, in force when this returns."""
        kept = read_json(self.file)
        password = kept.get(username) or new_secret()
        if kept.get(username) != password:
            write_json(self.file, {**kept, username: password})
        self._scram(username, password)
        self._acls(username, bindings(username, rules))
        user = Credentials(username, password)
        self._wait_login(user)
        return user

    def _scram(self, username: str, password: str) -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        mechanism = ScramMechanism[config.KAFKA_SASL_MECHANISM.replace("-", "_")]
        info = ScramCredentialInfo(mechanism, config.KAFKA_SCRAM_ITERATIONS)
        self._done(self.admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(username, info, password.encode())]), f"set the password of {username}")

    def _acls(self, username: str, wanted: set) -> None:
        """Make ``username``'s ACLs ``wanted``, and wait until Kafka applies them."""
        from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, \
            ResourceType

        mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{username}", None,
                                AclOperation.ANY, AclPermissionType.ANY)
        have = set(self.admin.describe_acls(mine).result(config.KAFKA_ADMIN_TIMEOUT_S))
        if wanted - have:
            self._done(self.admin.create_acls(sorted(wanted - have, key=str)), f"create the ACLs of {username}")
        if have - wanted:
            filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                        b.permission_type) for b in have - wanted]
            self._done(self.admin.delete_acls(filters), f"delete stale ACLs of {username}")
        deadline = time.monotonic() + config.KAFKA_ADMIN_TIMEOUT_S
        while set(self.admin.describe_acls(mine).result(config.KAFKA_ADMIN_TIMEOUT_S)) != wanted:
            if time.monotonic() > deadline:
                raise SetupError(f"Kafka at {self.bootstrap} did not apply the ACLs of {username} within "
                                 f"{config.KAFKA_ADMIN_TIMEOUT_S:.0f}s (ONYX_KAFKA_ADMIN_TIMEOUT)")
            time.sleep(0.1)

    def _wait_login(self, user: Credentials) -> None:
        """Return once ``user`` can log in (Kafka applies a new credential a moment after it
        acknowledged it)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + config.KAFKA_ADMIN_TIMEOUT_S
        while True:
            client = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0,
                                  **librdkafka_options(*user)})
            try:
                client.list_topics(timeout=2)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise SetupError(f"user {user.username} cannot log in to Kafka at {self.bootstrap} "
                                     f"{config.KAFKA_ADMIN_TIMEOUT_S:.0f}s after it was made "
                                     "(ONYX_KAFKA_ADMIN_TIMEOUT)") from None

    def _done(self, futures, what: str) -> None:
        """Wait for an admin request's futures; :class:`SetupError` saying what failed."""
        from confluent_kafka import KafkaException

        items = futures.values() if isinstance(futures, dict) else futures
        for future in items:
            try:
                future.result(config.KAFKA_ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                raise SetupError(f"could not {what} on Kafka at {self.bootstrap}: {exc.args[0].str()}") from None


def add_client_user(info: dict, *, publisher: str | None = None, sources: Sequence[str] = (),
                    subscriber: str | None = None, claimed: Sequence[str] = ()) -> tuple[Credentials, list[acls.Rule]]:
    """``onyx kafka-user add``: a publisher's (``publisher``, writing ``sources``, default every
    source of the overlay config) or a subscriber's (``subscriber``, reading also ``claimed``) user on the
    secure overlay ``onyx up`` runs (``info``: its ``cluster.json``), with the chart's templates;
    its credentials and rules."""
    from broker.local.devcluster import super_user_of

    if not info.get("secure"):
        raise SetupError("the local overlay does not check who its Kafka clients are: start it with "
                         "`onyx up --secure` to give publishers and subscribers users of their own")
    if (publisher is None) == (subscriber is None):
        raise SetupError("give --publisher NAME (with --source S ...) or --subscriber ID (with --topic T ...)")
    if publisher is not None:
        # Sources registered over the API (POST /sources) are not in cluster.json: name them.
        name, rules = publisher_user(publisher), acls.publisher_rules(sources or sorted(info["sources"]))
    else:
        name, rules = subscriber_user(subscriber), acls.subscriber_rules(subscriber, claimed)
    users = KafkaUsers(info["bootstrap_servers"], super_user_of(Path(info["kafka_dir"])),
                       Path(info["kafka_users_file"]).parent)
    return users.ensure(name, rules), rules
