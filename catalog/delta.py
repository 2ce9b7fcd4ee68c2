"""What a backbone sends a local repository (the "message format LMR-ward" the paper leaves
open): after a batch of documents, a subscription or a schema, one :class:`Delta` per repository
it concerns. In process it is handed over as an object; :meth:`Delta.to_json` /
:meth:`Delta.from_json` are its form on a Kafka topic.

>>> from catalog.document import Resource
>>> d = Delta(upserts={"doc.rdf#host": Resource("doc.rdf#host", "CycleProvider", {"serverPort": ("5874",)})},
...           matched={(1, 5, "doc.rdf#host")})
>>> Delta.from_json(d.to_json()) == d, d.empty()
(True, False)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from catalog.document import Resource


@dataclass
class Delta:
    """``upserts``: resources to store or refresh (rule matches and what strong references
    ship along); ``deleted``: resources gone from the backbone; ``matched`` / ``unmatched``:
    (subscription, end rule, resource) results gained and lost; ``subscribed``: new
    subscriptions (id -> (text, type)); ``unsubscribed``: ended ones; ``schemas``: RDF Schema
    documents to add."""

    upserts: dict[str, Resource] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    matched: set[tuple[int, int, str]] = field(default_factory=set)
    unmatched: set[tuple[int, int, str]] = field(default_factory=set)
    subscribed: dict[int, tuple[str, str]] = field(default_factory=dict)
    unsubscribed: set[int] = field(default_factory=set)
    schemas: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not any((self.upserts, self.deleted, self.matched, self.unmatched, self.subscribed,
                        self.unsubscribed, self.schemas))

    def to_json(self) -> str:
        return json.dumps({
            "upserts": [[r.uri, r.cls, {k: list(v) for k, v in r.props.items()}] for r in self.upserts.values()],
            "deleted": sorted(self.deleted), "matched": sorted(self.matched), "unmatched": sorted(self.unmatched),
            "subscribed": {str(k): list(v) for k, v in self.subscribed.items()},
            "unsubscribed": sorted(self.unsubscribed), "schemas": self.schemas})

    @classmethod
    def from_json(cls, text: str) -> "Delta":
        d = json.loads(text)
        return cls({u: Resource(u, c, {k: tuple(v) for k, v in p.items()}) for u, c, p in d["upserts"]},
                   set(d["deleted"]), {tuple(m) for m in d["matched"]}, {tuple(m) for m in d["unmatched"]},
                   {int(k): tuple(v) for k, v in d["subscribed"].items()}, set(d["unsubscribed"]), d["schemas"])
