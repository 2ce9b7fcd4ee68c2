"""A broker's Local Metadata Repository (MDV section 2.2): the rules it subscribes by at the
provider — itself, the links of every broadcast tree that reach it, the sources whose trees it
is in (its own as root among them), the profiles it hosts — and the repository itself, kept in
the broker's control state from the ``catalog`` packets of its inbound topic. What the broker
acts on follows from what the repository holds: every source it learns gets its root's tree
and its name dictionary.

>>> rules("b3")[3]
"search Source s, Link l register s where s.rootBroker = l.tree and l.child.brokerId = 'b3'"
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.metadata import packets
from broker.metadata.documents import decode_dictionary
from broker.metadata.onyx_schema import broker_of
from catalog import LocalRepository


def rules(broker: str) -> list[str]:
    """The subscription rules of ``broker``'s repository (MDV's rule language, section 2.3)."""
    b = broker.replace("'", "")
    return [f"search Broker b register b where b.brokerId = '{b}'",
            f"search Link l register l where l.child.brokerId = '{b}' or l.parent.brokerId = '{b}'",
            f"search Source s register s where s.rootBroker.brokerId = '{b}'",
            f"search Source s, Link l register s where s.rootBroker = l.tree and l.child.brokerId = '{b}'",
            f"search Profile p register p where p.hostBroker.brokerId = '{b}'"]


def lmr_name(broker: str) -> str:
    """The repository's name at the provider."""
    return f"lmr-{broker}"


@dataclass(frozen=True)
class SourceInfo:
    """What a broker needs of a source: its root broker and its name dictionary (JSON form)."""

    source: str
    root: str
    dictionary: dict | None


class BrokerRepository:
    """Broker ``broker``'s repository, on an in-memory SQLite database (a broker rebuilds it, as
    all its state, from the packets of its state log)."""

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self.lmr = LocalRepository(lmr_name(broker))

    def apply(self, body: dict) -> list[SourceInfo]:
        """Apply a ``catalog`` packet's body; returns the sources it brought (new or changed).
        :class:`ValueError` for a packet that is not a metadata delta."""
        delta = packets.read(body)
        if body.get("reset"):
            self.lmr = LocalRepository(lmr_name(self.broker))
        self.lmr.apply(delta)
        out = []
        for res in delta.upserts.values():
            if res.cls != "Source":
                continue
            dictionary = None
            ref = res.props.get("dictionary")
            if ref and ref[0] in delta.upserts:
                d = delta.upserts[ref[0]]
                dictionary = decode_dictionary(d.props.get("entry", ()), res.props["sourceId"][0],
                                               int(d.props["version"][0])).to_json()
            out.append(SourceInfo(res.props["sourceId"][0], broker_of(res.props["rootBroker"][0]), dictionary))
        return out

    def query(self, rule: str) -> set[str]:
        """The URI references ``rule`` registers on this repository's data (MDV: a query at an LMR)."""
        return self.lmr.query(rule)

    def resources(self) -> dict[str, dict[str, list[str]]]:
        return self.lmr.resources()
