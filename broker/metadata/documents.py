"""Onyx's metadata as RDF/XML documents of :data:`~broker.metadata.onyx_schema.ONYX_SCHEMA`
(MDV section 2.1: metadata is registered as whole documents; registering a document again
under its URI is an update). One document per broker, per broadcast tree (its links), per
source (the source, its schema and its dictionary) and per profile.

>>> from catalog import Backbone
>>> from broker.metadata.onyx_schema import ONYX_SCHEMA
>>> mdp = Backbone(); mdp.register_schema(ONYX_SCHEMA)
>>> doc = source_document("news", "News", "b2", None, 12.5, None, None)
>>> mdp.register_document(doc.uri, doc.xml)
>>> mdp.rows("FilterData", "property", "value")[:3]
[('name', 'News'), ('rate', '12.5'), ('rdf#subject', 'urn:onyx:sources:news#source')]
>>> decode_dictionary(dictionary_entries(["a", "b"]), "news", 1).names
('a', 'b')
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple
from xml.sax.saxutils import escape, quoteattr

from broker.metadata.onyx_schema import broker_doc, broker_uri, profile_doc, source_doc, tree_doc
from catalog.document import Resource
from formats.dictionary import Dictionary
from formats.schema import schema_names

_HEAD = ('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
         'xmlns:o="urn:onyx:schema#">')
_ENTRY_DIGITS = 6



class Document(NamedTuple):
    """A document: its URI, its RDF/XML (what the metadata log carries) and its resources
    (what :func:`catalog.document.parse_document` reads from that XML)."""

    uri: str
    xml: str
    resources: dict[str, Resource]


def _resource(doc: str, cls: str, rid: str, literals: Sequence[tuple[str, object]],
              refs: Sequence[tuple[str, str]] = ()) -> tuple[str, Resource]:
    literals = [(p, str(v)) for p, v in literals if v is not None]
    body = "".join(f"<o:{p}>{escape(v)}</o:{p}>" for p, v in literals)
    body += "".join(f"<o:{p} rdf:resource={quoteattr(u)}/>" for p, u in refs)
    props: dict[str, list[str]] = {}
    for p, v in [*literals, *refs]:
        props.setdefault(p, []).append(v)
    uri = f"{doc}#{rid}"
    return (f'<o:{cls} rdf:ID="{rid}">{body}</o:{cls}>',
            Resource(uri, cls, {k: tuple(sorted(v)) for k, v in sorted(props.items())}))


def _document(doc: str, resources: Iterable[tuple[str, Resource]]) -> Document:
    parts = list(resources)
    return Document(doc, f'{_HEAD}{"".join(x for x, _ in parts)}</rdf:RDF>', {r.uri: r for _, r in parts})


def broker_document(broker: str, location: str | None = None) -> Document:
    """One broker of the overlay."""
    return _document(broker_doc(broker), [_resource(broker_doc(broker), "Broker", "broker", [("brokerId", broker),
                                                                           ("location", location)])])


def tree_document(root: str, links: Iterable[tuple[str, str]]) -> Document:
    """The broadcast tree rooted at ``root``: one ``Link`` per (parent, child) edge."""
    return _document(tree_doc(root), [
        _resource(tree_doc(root), "Link", f"{parent}-{child}", [],
                  [("tree", broker_uri(root)), ("parent", broker_uri(parent)), ("child", broker_uri(child))])
        for parent, child in links])


def dictionary_entries(names: Sequence[str]) -> list[str]:
    """A dictionary's names as the set-valued ``entry`` property: ``"000003 name"`` keeps the
    code (the position) of each name, which a set does not."""
    return [f"{i:0{_ENTRY_DIGITS}d} {name}" for i, name in enumerate(names)]


def decode_dictionary(entries: Iterable[str], source: str, version: int) -> Dictionary:
    """The :class:`~formats.dictionary.Dictionary` a ``Dictionary`` resource describes."""
    names = [e[_ENTRY_DIGITS + 1:] for e in sorted(entries)]
    return Dictionary(source, version, names)


def source_document(source: str, name: str, root: str, schema: str | None, rate: float | None,
                    size: int | None, dictionary: Dictionary | None) -> Document:
    """A source, with its schema (kind, digest, the names it declares) and the name
    dictionary learnt from it, which brokers need to decode dictionary-encoded formats."""
    from broker import topics

    resources, refs = [], [("rootBroker", broker_uri(root))]
    doc = source_doc(source)
    if schema is not None:
        data = schema.encode()
        kind = "dtd" if b"<!ELEMENT" in data else "xsd"
        resources.append(_resource(doc, "Schema", "schema", [("kind", kind), ("sha256", hashlib.sha256(data).hexdigest()),
                                                         ("bytes", len(data))]
                                   + [("declares", n) for n in schema_names(schema)]))
        refs.append(("schema", f"{doc}#schema"))
    if dictionary is not None:
        resources.append(_resource(doc, "Dictionary", "dictionary", [("version", dictionary.version)]
                                   + [("entry", e) for e in dictionary_entries(dictionary.names)]))
        refs.append(("dictionary", f"{doc}#dictionary"))
    resources.insert(0, _resource(doc, "Source", "source", [("sourceId", source), ("name", name),
                                                        ("topic", topics.source_topic(source)), ("rate", rate),
                                                        ("size", size)], refs))
    return _document(doc, resources)


def profile_document(profile: str, version: int, host: str) -> Document:
    """A profile: its id, version and host broker (its text and delivery topic stay private)."""
    return _document(profile_doc(profile), [_resource(profile_doc(profile), "Profile", "profile", [("profileId", profile),
                                                                              ("profileVersion", version)],
                                                      [("hostBroker", broker_uri(host))])])
