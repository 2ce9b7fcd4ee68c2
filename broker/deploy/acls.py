"""Who may touch which Kafka topic and consumer group: every principal of an overlay and its
ACL rules, in one place.

The security model (DESIGN.md section 1) in Kafka's terms, from the overlay config and the
topic names of :mod:`broker.topics`:

* each **broker** reads its inbound topic, the source topics, its state log and the compacted
  catalog and profile log; writes its links (the inbound topics of its neighbours in the
  broadcast trees), its state log, the dead letters and every delivery topic; and is *denied*
  writing the overlay's own topics no broker writes (the source topics, the catalog, profile
  and metadata logs: :func:`brokers_never_write`), whatever a profile names;
* the **registration service** writes the brokers' inbound topics, the catalog, profile and
  metadata logs and the dead letters; creates delivery topics and reads them (push delivery over
  SSE and webhooks), and writes them for a backfill, for which it also reads the brokers' state
  logs and the source topics' end offsets;
* the **archive writer** reads the source topics and the profile log and is denied writing
  anything;
* the local overlay's **monitor** (``onyx up``'s watcher) learns the end offsets of the brokers'
  inbound and the source topics, and reads no record;
* a **publisher** writes its sources' topics, ``onyx.src.<source>``, and nothing else;
* a **subscriber** reads its own delivery topic ``onyx.deliver.<id>``, the topics of its own
  namespace ``onyx.deliver.<id>.*`` and the topics listed for it, with consumer groups whose
  names start with its id.

Publisher and subscriber rules, and the rules every operator-allowed delivery topic prefix
adds to brokers and the registration service, are :data:`TEMPLATES`: rules whose names hold
``{source}``, ``{id}``, ``{topic}`` or ``{prefix}``. The Helm chart's ``KafkaUser`` s render
from what :func:`chart_values` gives (the ``overlay.access`` values block, filled by the chart
with ``security.publishers`` / ``subscribers`` / ``deliveryTopicPrefixes``), and a secure
local Kafka (``onyx up --secure``, :mod:`broker.local.kafka_users`) is given the ACLs of the
very same functions.

>>> from routing.overlay import builtin
>>> ov = builtin("figure4")
>>> [r.name for r in broker_rules(ov, "b4") if r.effect == "deny"]
['onyx.src.', 'onyx.catalog', 'onyx.metadata', 'onyx.profiles']
>>> print(subscriber_rules("s1", ["alerts.sf"])[1])
allow topic prefix onyx.deliver.s1.: Read, Describe
>>> print(publisher_rules(["news"])[0])
allow topic literal onyx.src.news: Write, Describe
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from broker import topics
from broker.deploy.topology import topology
from routing.overlay import Overlay

SPARK_GROUP_PREFIX = "spark-kafka-source-"
"""Consumer groups of Spark's Kafka source (its executors' consumers), which brokers and the
archive writer read with."""

STATE_READER_GROUP = "onyx-state-reader"
"""The group id of the brokers' state-log reader (:mod:`broker.control.state_log`): it assigns
partitions itself and commits nothing, but librdkafka still asks for the group's coordinator,
which Kafka refuses without Describe on the group."""

SERVICE_GROUP_PREFIX = "onyx-"
"""The registration service's consumer groups all start so (``onyx-service-logs``,
``onyx-service-reads``, ``onyx-backfill``, ``onyx-webhooks-<instance>``, in broker/registry and
broker/compacted.py); a subscriber's start with its id, never ``onyx-``."""


@dataclass(frozen=True)
class Rule:
    """One ACL rule: ``effect`` (allow or deny) of ``operations`` on a topic or group named
    ``name`` exactly (``literal``; ``*`` is every one) or by its start (``prefix``)."""

    resource: str  # "topic" or "group"
    name: str
    pattern: str  # "literal" or "prefix"
    operations: tuple[str, ...]
    effect: str = "allow"

    def __str__(self) -> str:
        return f"{self.effect} {self.resource} {self.pattern} {self.name}: {', '.join(self.operations)}"

    def fill(self, **values: str) -> "Rule":
        """The rule with each ``{key}`` of its name replaced by ``values[key]`` (a template's use).

        >>> print(Rule("topic", "onyx.deliver.{id}", "literal", ("Read",)).fill(id="s1"))
        allow topic literal onyx.deliver.s1: Read
        """
        name = self.name
        for key, value in values.items():
            name = name.replace("{" + key + "}", value)
        return replace(self, name=name)

    def to_strimzi(self) -> dict:
        """The rule as a Strimzi ``KafkaUser`` ACL (``spec.authorization.acls[]``)."""
        return {"type": self.effect, "resource": {"type": self.resource, "name": self.name,
                                                  "patternType": self.pattern},
                "operations": list(self.operations)}

    @classmethod
    def from_strimzi(cls, acl: dict) -> "Rule":
        """The rule of a Strimzi ACL (what the chart rendered), as :meth:`to_strimzi` writes it."""
        res = acl["resource"]
        return cls(res["type"], res["name"], res.get("patternType", "literal"), tuple(acl["operations"]),
                   acl.get("type", "allow"))

    def allows(self, resource: str, name: str, operation: str) -> bool:
        """Whether the rule speaks of ``operation`` on that topic or group (either effect)."""
        if self.resource != resource or not ({operation, "All"} & set(self.operations)):
            return False
        if self.pattern == "prefix":
            return name.startswith(self.name)
        return self.name in (name, "*")


def allowed(rules: Iterable[Rule], resource: str, name: str, operation: str) -> bool:
    """Kafka's verdict on ``rules``: a matching deny wins, else a matching allow grants, else
    nothing is allowed (``allow.everyone.if.no.acl.found=false``). Read, Write, Create and
    Delete imply Describe, as in Kafka.

    >>> from routing.overlay import builtin
    >>> rules = broker_rules(builtin("figure4"), "b1")
    >>> allowed(rules, "topic", "onyx.deliver.s1", "Write"), allowed(rules, "topic", "onyx.src.news", "Write")
    (True, False)
    >>> allowed([Rule("topic", "t", "literal", ("Write",), "deny")], "topic", "t", "Describe")
    False
    """
    rules = list(rules)
    ops = {operation} | ({"Read", "Write", "Create", "Delete", "Alter"} if operation == "Describe" else set())
    granted = any(r.effect == "allow" and r.allows(resource, name, op) for r in rules for op in ops)
    return granted and not any(r.effect == "deny" and r.allows(resource, name, operation) for r in rules)


def _topic(name: str, pattern: str, *operations: str, effect: str = "allow") -> Rule:
    return Rule("topic", name, pattern, operations, effect)


def _group(name: str, pattern: str, *operations: str) -> Rule:
    return Rule("group", name, pattern, operations)


TEMPLATES: dict[str, tuple[Rule, ...]] = {
    # A publisher, once per source it writes.
    "publisherSource": (_topic(topics.SOURCE_PREFIX + "{source}", "literal", "Write", "Describe"),),
    # A subscriber: its own topic (a literal name, so s1 never reads s10's) and namespace, and groups.
    "subscriber": (_topic(topics.DELIVER_PREFIX + "{id}", "literal", "Read", "Describe"),
                   _topic(topics.DELIVER_PREFIX + "{id}.", "prefix", "Read", "Describe"),
                   _group("{id}", "prefix", "Read", "Describe")),
    # ... and once per other topic it claimed.
    "subscriberTopic": (_topic("{topic}", "literal", "Read", "Describe"),),
    # Per operator-allowed delivery topic prefix: brokers deliver there ...
    "brokerDeliveryPrefix": (_topic("{prefix}", "prefix", "Write", "Describe"),),
    # ... and the registration service creates, reads (SSE, webhooks) and backfills such topics.
    "registryDeliveryPrefix": (_topic("{prefix}", "prefix", "Create", "Read", "Write", "Describe"),),
}
"""Rules of principals the overlay config does not name, with the placeholders the chart fills."""


def _fill(template: str, **values: str) -> list[Rule]:
    return [r.fill(**values) for r in TEMPLATES[template]]


def brokers_never_write(overlay: Overlay) -> list[str]:
    """Prefixes of the overlay's own topic families (:data:`broker.topics.INTERNAL`) none of
    whose topics a broker writes: denied to brokers outright, so no delivery can land there."""
    written = {t for b in topology(overlay).brokers for t in b.writes}
    return [e.prefix for e in topics.INTERNAL if not any(t.startswith(e.prefix) for t in written)]


def broker_rules(overlay: Overlay, broker: str, delivery_prefixes: Sequence[str] = ()) -> list[Rule]:
    """Broker ``broker``'s rules (see the module docstring)."""
    plan = topology(overlay).broker(broker)
    state = topics.state_topic(broker)
    rules = [_topic(t, "literal", "Read", "Describe") for t in plan.reads]
    # Sources registered later over the API (POST /sources) may be rooted at any broker.
    rules.append(_topic(topics.SOURCE_PREFIX, "prefix", "Read", "Describe"))
    rules += [_topic(t, "literal", "Write", "Describe") for t in plan.writes]
    # The broker job creates its state log when it is missing (in Kubernetes its KafkaTopic exists first).
    rules.append(_topic(state, "literal", "Create"))
    # Deliveries: every subscriber's onyx.deliver.<id> (and its namespace), and the operator-allowed prefixes.
    rules.append(_topic(topics.DELIVER_PREFIX, "prefix", "Write", "Describe"))
    rules += [_group(SPARK_GROUP_PREFIX, "prefix", "Read", "Describe"), _group(STATE_READER_GROUP, "literal", "Describe")]
    rules += [_topic(p, "prefix", "Write", effect="deny") for p in brokers_never_write(overlay)]
    # Last, as the chart adds them (chart values, not the overlay's).
    for prefix in delivery_prefixes:
        rules += _fill("brokerDeliveryPrefix", prefix=prefix)
    return rules


def application_rules(overlay: Overlay, brokers: Sequence[str], delivery_prefixes: Sequence[str] = ()) -> list[Rule]:
    """The rules of one Spark application serving ``brokers``: a broker's own with one broker;
    with several (``onyx up``'s one streaming query), what any of them may do, since their
    Kafka source, their executors' producer and their state-log reader are shared by them all
    (its deny rules are every broker's, so no broker's gains a topic the overlay keeps to itself).

    >>> from routing.overlay import builtin
    >>> rules = application_rules(builtin("figure4"), ["b1", "b4"])
    >>> allowed(rules, "topic", "onyx.broker.b5", "Write"), allowed(rules, "topic", "onyx.profiles", "Write")
    (True, False)
    """
    out: list[Rule] = []
    for b in brokers:
        out += [r for r in broker_rules(overlay, b, delivery_prefixes) if r not in out]
    return out


def registry_rules(overlay: Overlay, delivery_prefixes: Sequence[str] = ()) -> list[Rule]:
    """The registration service's rules (see the module docstring)."""
    # Control packets, the catalog; it creates these topics when missing (in Kubernetes their
    # KafkaTopics exist first).
    rules = [_topic(topics.BROKER_PREFIX, "prefix", "Write", "Create", "Describe"),
             _topic(topics.CATALOG, "literal", "Write", "Create", "Describe")]
    # The profile and metadata logs, which it also reads: the first to recover, the second because
    # every instance of the service replicates through it.
    rules += [_topic(t, "literal", "Read", "Write", "Create", "Describe") for t in (topics.PROFILES, topics.METADATA)]
    # The console lists the dead letters; a webhook's failed delivery goes there.
    rules.append(_topic(topics.DEAD_LETTER, "literal", "Read", "Write", "Describe"))
    # Delivery topics: created when handed out, read for SSE and webhooks, written by a backfill.
    rules.append(_topic(topics.DELIVER_PREFIX, "prefix", "Create", "Read", "Write", "Describe"))
    # A backfill waits until the root brokers' state logs show the profile, and takes the sources' end offsets.
    rules += [_topic(topics.STATE_PREFIX, "prefix", "Read", "Describe"),
              _topic(topics.SOURCE_PREFIX, "prefix", "Describe")]
    rules.append(_group(SERVICE_GROUP_PREFIX, "prefix", "Read", "Describe"))
    for prefix in delivery_prefixes:
        rules += _fill("registryDeliveryPrefix", prefix=prefix)
    return rules


def archive_rules(overlay: Overlay) -> list[Rule]:
    """The archive writer's rules: every source (those registered later too: it subscribes to
    ``onyx.src.*`` by pattern) and the profile log (profile lifetimes); it writes nothing."""
    return [_topic(topics.SOURCE_PREFIX, "prefix", "Read", "Describe"),
            _topic(topics.PROFILES, "literal", "Read", "Describe"),
            _group(SPARK_GROUP_PREFIX, "prefix", "Read", "Describe"),
            # Deny wins over any allow: no topic can ever be written with its credentials.
            _topic("*", "literal", "Write", effect="deny")]


def monitor_rules() -> list[Rule]:
    """The local overlay's watcher (``onyx up``'s lag of every broker, :meth:`LocalOverlay.lag
    <broker.local.cluster.LocalOverlay.lag>`): it asks for the end offsets of the brokers' inbound
    and the source topics and reads no record (the chart has no such watcher)."""
    return [_topic(topics.BROKER_PREFIX, "prefix", "Describe"), _topic(topics.SOURCE_PREFIX, "prefix", "Describe")]


def publisher_rules(sources: Iterable[str]) -> list[Rule]:
    """A publisher of ``sources``: it writes their topics, nothing else."""
    return [r for s in sources for r in _fill("publisherSource", source=s)]


def subscriber_rules(subscriber_id: str, claimed: Iterable[str] = ()) -> list[Rule]:
    """Subscriber ``subscriber_id``: its own delivery topic and namespace, the topics it claimed
    (``claimed``), its consumer groups."""
    rules = _fill("subscriber", id=subscriber_id)
    rules += [r for t in claimed for r in _fill("subscriberTopic", topic=t)]
    return rules


def _strimzi(rules: Iterable[Rule]) -> list[dict]:
    return [r.to_strimzi() for r in rules]


def chart_values(overlay: Overlay) -> dict:
    """The chart's ``overlay.access`` block: each broker's, the registration service's and the
    archive writer's rules (without the operator-allowed prefixes, which are chart values), and
    :data:`TEMPLATES` for the rest, as Strimzi ACLs.

    >>> from routing.overlay import builtin
    >>> block = chart_values(builtin("figure4"))
    >>> sorted(block), sorted(block["templates"]) == sorted(TEMPLATES)
    (['archive', 'brokers', 'registry', 'templates'], True)
    """
    return {"brokers": {b: _strimzi(broker_rules(overlay, b)) for b in overlay.brokers},
            "registry": _strimzi(registry_rules(overlay)),
            "archive": _strimzi(archive_rules(overlay)),
            "templates": {name: _strimzi(rules) for name, rules in TEMPLATES.items()}}
