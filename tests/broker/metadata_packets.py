"""The ``catalog`` packets the metadata provider sends a broker when a source is registered,
for tests that give a broker state a source the way the running overlay does."""

from __future__ import annotations

from broker import topics
from broker.metadata.provider import MetadataProvider
from broker.registry.metadata_api import source_doc
from broker.registry.store import SourceRecord
from routing.overlay import builtin


class Recorder:
    """A sender that keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, topic: str, packet) -> None:
        self.sent.append((topic, packet))


def catalog_packets(source: SourceRecord, broker: str, overlay_name: str = "figure4") -> list:
    """Every packet ``broker``'s inbound topic gets from a fresh provider that registers ``source``."""
    sender = Recorder()
    mdp = MetadataProvider(sender, builtin(overlay_name))
    mdp.start()
    mdp.publish([source_doc(source)])
    mdp.stop()
    return [p for t, p in sender.sent if t == topics.broker_topic(broker)]
