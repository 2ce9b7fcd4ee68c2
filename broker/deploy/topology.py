"""What an overlay needs from Kafka and Kubernetes: its topics, and what each broker reads and writes.

A deployment is generated from the same overlay config that ``onyx up`` runs locally,
and the topic names come from :mod:`broker.topics`, so the two can never drift:

* a broker **reads** its inbound topic, the source topics of the sources rooted at it,
  and the compacted catalog and profile topics;
* a broker **writes** the inbound topics of its children (messages flow down every
  broadcast tree) and of its parents (queries and routing updates flow up them), its
  delivery topic and the dead-letter topic.

Who may touch which of these topics (Kafka's ACLs) is :mod:`broker.deploy.acls`'s.

Kubernetes object names allow neither ``.`` nor ``_`` nor capitals, so every broker and
topic also gets a ``key``: a DNS-label-safe name part, equal to the id when the id is
already safe and otherwise the lowercased id with a short hash appended, so that
``B1`` and ``b1`` can never collide.

>>> from routing.overlay import builtin
>>> plan = topology(builtin("figure4"))
>>> [b.id for b in plan.brokers]
['b1', 'b2', 'b3', 'b4', 'b5', 'b6']
>>> plan.broker("b4").writes
('onyx.broker.b2', 'onyx.broker.b5', 'onyx.broker.b6', 'onyx.state.b4', 'onyx.deliver.b4', 'onyx.dead-letter')
>>> [(t.kind, t.key) for t in plan.topics][:3]
[('source', 'src-news'), ('broker', 'broker-b1'), ('broker', 'broker-b2')]
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from broker import topics
from routing.overlay import Overlay

_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")

TOPIC_KINDS = ("source", "broker", "state", "delivery", "deadLetter", "catalog", "profiles", "metadata")
"""Kinds of topics; each is a key under ``topics`` in the chart's values (partitions, retention, compaction)."""


def k8s_key(ident: str) -> str:
    """A DNS-label-safe name part for a broker or source id (see the module docstring)."""
    if _DNS_LABEL.match(ident):
        return ident
    base = re.sub(r"[^a-z0-9-]", "-", ident.lower()).strip("-")
    digest = hashlib.sha1(ident.encode()).hexdigest()[:6]
    return f"{base}-{digest}" if base else digest


@dataclass(frozen=True)
class Topic:
    """A Kafka topic the deployment needs: real ``name``, its ``kind`` and a Kubernetes-safe ``key``."""

    name: str
    kind: str
    key: str


@dataclass(frozen=True)
class BrokerPlan:
    """One broker: its id, Kubernetes-safe key and the topics it reads and writes."""

    id: str
    key: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True)
class Topology:
    """Everything a deployment of one overlay needs, in a stable order."""

    name: str
    brokers: tuple[BrokerPlan, ...]
    topics: tuple[Topic, ...]

    def broker(self, broker_id: str) -> BrokerPlan:
        for plan in self.brokers:
            if plan.id == broker_id:
                return plan
        raise KeyError(broker_id)


def _neighbours_in_trees(overlay: Overlay, broker: str) -> list[str]:
    """Children and parents of ``broker`` over every broadcast tree, sorted, without repeats."""
    linked: set[str] = set()
    for root in overlay.roots:
        tree = overlay.tree(root)
        linked.update(tree.children.get(broker, []))
        parent = tree.parent.get(broker)
        if parent is not None:
            linked.add(parent)
    return sorted(linked)


def broker_plan(overlay: Overlay, broker: str) -> BrokerPlan:
    """The topics ``broker`` reads and writes in ``overlay``."""
    rooted = sorted(s for s, root in overlay.sources.items() if root == broker)
    reads = (topics.broker_topic(broker), *map(topics.source_topic, rooted), topics.state_topic(broker),
             topics.CATALOG, topics.PROFILES)
    writes = (
        *(topics.broker_topic(n) for n in _neighbours_in_trees(overlay, broker)),
        topics.state_topic(broker),
        topics.delivery_topic(broker),
        topics.DEAD_LETTER,
    )
    return BrokerPlan(broker, k8s_key(broker), reads, writes)


def topology(overlay: Overlay) -> Topology:
    """Brokers with their reads/writes, and every topic any of them (or a publisher) uses."""
    needed = [Topic(topics.source_topic(s), "source", f"src-{k8s_key(s)}") for s in sorted(overlay.sources)]
    needed += [Topic(topics.broker_topic(b), "broker", f"broker-{k8s_key(b)}") for b in overlay.brokers]
    needed += [Topic(topics.state_topic(b), "state", f"state-{k8s_key(b)}") for b in overlay.brokers]
    needed += [Topic(topics.delivery_topic(b), "delivery", f"deliver-{k8s_key(b)}") for b in overlay.brokers]
    needed += [
        Topic(topics.DEAD_LETTER, "deadLetter", "dead-letter"),
        Topic(topics.CATALOG, "catalog", "catalog"),
        Topic(topics.PROFILES, "profiles", "profiles"),
        Topic(topics.METADATA, "metadata", "metadata"),
    ]
    brokers = tuple(broker_plan(overlay, b) for b in overlay.brokers)
    return Topology(overlay.name, brokers, tuple(needed))
