"""The registration service as a Metadata Provider (MDV sections 2.2 and 4): it holds Onyx's
metadata documents on a :class:`catalog.Backbone`, runs the publish & subscribe filter on every
change, and delivers what changed for whom — each broker's repository on its inbound topic
(``catalog`` packets, :mod:`broker.metadata.packets`), users' metadata subscriptions on a topic
of theirs.

Replication: every change is written to the compacted log ``onyx.metadata`` (key: the document's
URI, value: its RDF/XML, a tombstone when it is deleted; ``subscription:<id>`` records for users'
subscriptions) before it is filtered. A provider that starts reads the log to its end
(:meth:`MetadataProvider.replay`), so any instance holds every document and subscription; the
instance a change is made at delivers it. A provider keeps its filter in memory and starts
afresh each time: its first delivery to each broker repository is a full load that replaces what
the repository held (``reset``).

Sources are filtered as they are registered (a broker must know a source before its first
message); profiles' documents are collected and filtered in batches every
:data:`~broker.config.METADATA_BATCH_S` seconds (section 4's batched registration), off the
registration's path.

>>> from routing.overlay import builtin
>>> from broker.metadata.documents import source_document
>>> sent = []
>>> class Sender:
...     def send(self, topic, packet): sent.append((topic, packet))
>>> mdp = MetadataProvider(Sender(), builtin("figure4"))
>>> mdp.start()
>>> mdp.publish([source_document("news", "News", "b2", None, None, None, None)])
>>> sorted({t for t, (k, v, h) in sent if t.startswith("onyx.broker.")})
['onyx.broker.b1', 'onyx.broker.b2', 'onyx.broker.b3', 'onyx.broker.b4', 'onyx.broker.b5', 'onyx.broker.b6']
>>> sub = mdp.subscribe("search Source s register s where s.rootBroker.brokerId = 'b2'", "alerts", "s1")
>>> json.loads(sent[-1][1][1])["matched"]
['urn:onyx:sources:news#source']
>>> mdp.stop()
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from broker import config, topics
from broker.packets import send_all
from broker.metadata import packets
from broker.metadata.broker_lmr import lmr_name, rules
from broker.metadata.documents import Document, broker_document, tree_document
from broker.metadata.onyx_schema import ONYX_SCHEMA
from catalog import Backbone, Delta
from routing.overlay import Overlay

log = logging.getLogger("onyx.metadata")

SUBSCRIPTION_KEY = "subscription:"
"""Key prefix of a user subscription's record on the metadata log."""

Packet = tuple[bytes, bytes | None, list[tuple[str, bytes]]]

@dataclass(frozen=True)
class UserSubscription:
    """A user's metadata subscription: its rule, the topic its changes go to, its owner."""

    id: str
    rule: str
    topic: str
    subscriber_id: str

    @property
    def lmr(self) -> str:
        return f"user-{self.id}"

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "rule": self.rule, "topic": self.topic, "subscriber_id": self.subscriber_id})


def change_record(sub: UserSubscription, delta: Delta) -> Packet:
    """What a user's subscription topic gets: the resources that came or changed (class and
    properties), the ones deleted, and the registered results gained and lost, keyed
    ``metadata:<subscription id>``."""
    body = {"subscription_id": sub.id,
            "upserts": {u: {"class": r.cls, "properties": r.as_dict()} for u, r in sorted(delta.upserts.items())},
            "deleted": sorted(delta.deleted),
            "matched": sorted({u for _, _, u in delta.matched}),
            "unmatched": sorted({u for _, _, u in delta.unmatched})}
    return f"metadata:{sub.id}".encode(), json.dumps(body).encode(), [("onyx-metadata-subscription", sub.id.encode())]


class MetadataProvider:
    """The provider of one registration service over ``sender`` (where the log records and
    deliveries go) for ``overlay``."""

    def __init__(self, sender, overlay: Overlay, batch_s: float = config.METADATA_BATCH_S) -> None:
        self.sender = sender
        self.overlay = overlay
        self.batch_s = batch_s
        self.backbone = Backbone(batch_size=2**62, batch_period=None)  # batches are closed by flush()
        self.backbone.register_schema(ONYX_SCHEMA)
        self.lock = threading.RLock()
        self.xml: dict[str, str] = {}  # document -> the RDF/XML it was registered with
        self.users: dict[str, UserSubscription] = {}
        self.user_subs: dict[str, int] = {}  # user subscription id -> its rule's id at the backbone
        self.outbox: list[tuple[str, Packet]] = []  # deliveries not yet sent (a failed send keeps them)
        self.live = False  # deliveries are made once started (a replay delivers nothing)
        self._fresh: set[str] = set()  # repositories whose next delta starts a full load
        self._queued: dict[str, Document | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._visible: Callable[[str, str], bool] | None = None

    def restrict(self, visible: Callable[[str, str], bool]) -> None:
        """Deliver to a user's subscription only the resources ``visible(subscriber id,
        resource URI)`` allows: another tenant's profiles and unreadable sources are left out
        of what a subscription's topic gets (the tenant model of the registration service)."""
        self._visible = visible

    # -- replication ----------------------------------------------------------------------

    def replay(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Apply records of the metadata log (key, value) in order, delivering nothing (another
        instance did); returns how many. Documents the provider does not know are read from
        their RDF/XML."""
        n = 0
        with self.lock:
            for key, value in records:
                n += 1
                name = key.decode()
                if name.startswith(SUBSCRIPTION_KEY):
                    self._replay_subscription(name[len(SUBSCRIPTION_KEY):], value)
                elif value is None:
                    if name in self.xml:
                        self.backbone.delete_document(name)
                        del self.xml[name]
                elif self.xml.get(name) != value.decode():
                    self.backbone.register_document(name, value.decode())
                    self.xml[name] = value.decode()
            self._flush()
        return n

    def _replay_subscription(self, sub_id: str, value: bytes | None) -> None:
        if value is None:
            self._drop_user(sub_id)
        elif sub_id not in self.users:
            body = json.loads(value)
            self._add_user(UserSubscription(sub_id, body["rule"], body["topic"], body["subscriber_id"]))

    # -- start, stop ----------------------------------------------------------------------

    def start(self, documents: Sequence[Document] | None = None) -> None:
        """Bring the overlay's documents (its brokers and trees) up to date — and, given
        ``documents`` (every source and profile the service's database holds), the others too:
        what the log held beyond them is deleted — subscribe every broker's repository by its
        rules and send each its full load; then deliver changes as they come."""
        with self.lock:
            overlay_docs = [broker_document(b) for b in self.overlay.brokers]
            overlay_docs += [tree_document(r, [(p, c) for p, cs in sorted(self.overlay.tree(r).children.items())
                                               for c in cs]) for r in self.overlay.brokers]
            wanted = {d.uri: d for d in [*overlay_docs, *(documents or ())]}
            self._write([d for d in wanted.values() if self.xml.get(d.uri) != d.xml],
                        [] if documents is None else [u for u in self.xml if u not in wanted])
            self.live = True
            for broker in self.overlay.brokers:
                name = lmr_name(broker)
                self._fresh.add(name)
                self.backbone.connect(name, lambda delta, b=broker: self._to_broker(b, delta))  # sends the schema
            for broker in self.overlay.brokers:
                self.backbone.subscribe_many(lmr_name(broker), rules(broker))
            self._send()
        self._thread = threading.Thread(target=self._batches, name="onyx-metadata-batches", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Filter what is queued, send it, and stop the batch thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.flush_queue()

    # -- changes --------------------------------------------------------------------------

    def publish(self, documents: Sequence[Document] = (), deleted: Sequence[str] = ()) -> None:
        """Register (or update) ``documents`` and delete ``deleted`` now: written to the log,
        filtered, delivered before this returns
        (the sender's error if Kafka fails: what was not
        sent is sent with the next change)."""
        with self.lock:
            self._write(documents, deleted)
            self._send()

    def queue(self, documents: Sequence[Document] = (), deleted: Sequence[str] = ()) -> None:
        """Register ``documents`` and delete ``deleted`` with the next batch."""
        with self.lock:
            self._queued.update({d.uri: d for d in documents})
            self._queued.update({u: None for u in deleted})

    def flush_queue(self) -> None:
        """Filter the queued documents as one batch and deliver the changes."""
        with self.lock:
            if not self._queued:
                return
            queued, self._queued = self._queued, {}
            try:
                self._write([d for d in queued.values() if d is not None], [u for u, d in queued.items() if d is None])
                self._send()
            except Exception:
                log.warning("metadata batch of %d documents not sent; trying again", len(queued), exc_info=True)
                self._queued = {**queued, **self._queued}

    def _batches(self) -> None:
        while not self._stop.wait(self.batch_s):
            self.flush_queue()
            with self.lock:
                try:
                    self._send()  # deliveries a failed send left behind
                except Exception:
                    log.warning("metadata deliveries not sent; trying again", exc_info=True)

    def _write(self, documents: Sequence[Document], deleted: Sequence[str]) -> None:
        """Log, then filter: the documents that change anything, and the deletions of held ones."""
        documents = [d for d in documents if self.xml.get(d.uri) != d.xml]
        deleted = [u for u in deleted if u in self.xml]
        if not documents and not deleted:
            return
        send_all(self.sender, [(topics.METADATA, (d.uri.encode(), d.xml.encode(), [])) for d in documents]
                 + [(topics.METADATA, (u.encode(), None, [])) for u in deleted])
        for d in documents:
            self.backbone.register_resources(d.uri, d.resources)
            self.xml[d.uri] = d.xml
        for u in deleted:
            self.backbone.delete_document(u)
            del self.xml[u]
        self._flush()

    def _flush(self) -> None:
        if self.backbone.pending:
            self.backbone.flush()

    # -- deliveries -----------------------------------------------------------------------

    def _to_broker(self, broker: str, delta: Delta) -> None:
        if not self.live:
            return
        name = lmr_name(broker)
        reset = name in self._fresh
        self._fresh.discard(name)
        for i, part in enumerate(packets.split(delta)):
            self.outbox.append((topics.broker_topic(broker), packets.packet(part, reset=reset and i == 0)))

    def _to_user(self, sub_id: str, delta: Delta) -> None:
        sub = self.users.get(sub_id)
        if not self.live or sub is None:
            return
        if self._visible is not None:
            seen = functools.lru_cache(maxsize=None)(lambda uri: self._visible(sub.subscriber_id, uri))
            delta = Delta(upserts={u: r for u, r in delta.upserts.items() if seen(u)},
                          deleted={u for u in delta.deleted if seen(u)},
                          matched={m for m in delta.matched if seen(m[2])},
                          unmatched={m for m in delta.unmatched if seen(m[2])})
        if delta.upserts or delta.deleted or delta.matched or delta.unmatched:
            self.outbox.append((sub.topic, change_record(sub, delta)))

    def _send(self) -> None:
        if not self.outbox:
            return
        out, self.outbox = self.outbox, []
        try:
            send_all(self.sender, out)
        except Exception:
            self.outbox = out + self.outbox
            raise

    # -- users' subscriptions -------------------------------------------------------------

    def subscribe(self, rule: str, topic: str, subscriber_id: str) -> UserSubscription:
        """A user's subscription: what ``rule`` matches now goes to ``topic`` at once, every
        change of it later. :class:`catalog.RuleError` for a bad rule (nothing registered)."""
        with self.lock:
            sub = UserSubscription(secrets.token_hex(8), rule, topic, subscriber_id)
            self._add_user(sub)
            try:
                send_all(self.sender, [(topics.METADATA, ((SUBSCRIPTION_KEY + sub.id).encode(),
                                                          sub.to_json().encode(), []))])
            except Exception:
                self._drop_user(sub.id)
                raise
            self._send()
            return sub

    def unsubscribe(self, sub_id: str) -> None:
        """End a user's subscription (:class:`KeyError` if there is none)."""
        with self.lock:
            if sub_id not in self.users:
                raise KeyError(sub_id)
            send_all(self.sender, [(topics.METADATA, ((SUBSCRIPTION_KEY + sub_id).encode(), None, []))])
            self._drop_user(sub_id)

    def _add_user(self, sub: UserSubscription) -> None:
        self.users[sub.id] = sub
        self.backbone.connect(sub.lmr, lambda delta, s=sub.id: self._to_user(s, delta))
        try:
            self.user_subs[sub.id] = self.backbone.subscribe(sub.lmr, sub.rule)
        except Exception:
            self.backbone.disconnect(sub.lmr)
            del self.users[sub.id]
            raise

    def _drop_user(self, sub_id: str) -> None:
        sub = self.users.pop(sub_id, None)
        if sub is not None:
            self.backbone.unsubscribe(sub.lmr, self.user_subs.pop(sub_id))
            self.backbone.disconnect(sub.lmr)
