"""The RDF Schema of Onyx's metadata (MDV section 2: metadata are RDF resources of a schema
with strong and weak references), and the URI references of its resources.

A ``Source`` references its ``Schema`` and ``Dictionary`` strongly (a repository that holds a
source always holds what it needs to decode its messages, section 2.4) and its root ``Broker``
weakly; a ``Link`` of a broadcast tree references the tree's root, the parent and the child
weakly; a ``Profile`` references its host broker weakly (it holds no text and no delivery
topic: those are the subscriber's). Document URIs are ``urn:onyx:<kind>:<id>``; each document holds
its resources as fragments of it.

>>> source_uri("news"), broker_uri("b2"), link_uri("b1", "b2", "b4")
('urn:onyx:sources:news#source', 'urn:onyx:brokers:b2#broker', 'urn:onyx:trees:b1#b2-b4')
>>> from catalog.schema import Schema
>>> s = Schema(); s.add(ONYX_SCHEMA)
>>> s.properties["dictionary"].reference, s.properties["rootBroker"].reference, s.properties["entry"].set_valued
('strong', 'weak', True)
"""

from __future__ import annotations

from catalog.defaults import MDV_NAMESPACE


def _prop(name: str, domain: str, range_: str | None = None, reference: str | None = None,
          set_valued: bool = False) -> str:
    parts = [f'<rdfs:domain rdf:resource="#{domain}"/>']
    if range_:
        parts.append(f'<rdfs:range rdf:resource="#{range_}"/><mdv:reference>{reference}</mdv:reference>')
    if set_valued:
        parts.append("<mdv:setValued>true</mdv:setValued>")
    return f'  <rdf:Property rdf:ID="{name}">{"".join(parts)}</rdf:Property>'


_CLASSES = ("Broker", "Link", "Source", "Schema", "Dictionary", "Profile")
_PROPERTIES = [
    _prop("brokerId", "Broker"), _prop("location", "Broker"),
    _prop("tree", "Link", "Broker", "weak"), _prop("parent", "Link", "Broker", "weak"),
    _prop("child", "Link", "Broker", "weak"),
    _prop("sourceId", "Source"), _prop("name", "Source"), _prop("topic", "Source"), _prop("rate", "Source"),
    _prop("size", "Source"), _prop("rootBroker", "Source", "Broker", "weak"),
    _prop("schema", "Source", "Schema", "strong"), _prop("dictionary", "Source", "Dictionary", "strong"),
    _prop("kind", "Schema"), _prop("sha256", "Schema"), _prop("bytes", "Schema"),
    _prop("declares", "Schema", set_valued=True),
    _prop("version", "Dictionary"), _prop("entry", "Dictionary", set_valued=True),
    _prop("profileId", "Profile"), _prop("profileVersion", "Profile"), _prop("hostBroker", "Profile", "Broker", "weak"),
]

ONYX_SCHEMA = "\n".join([
    '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"',
    '         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"',
    f'         xmlns:mdv="{MDV_NAMESPACE}" xml:base="urn:onyx:schema">',
    *(f'  <rdfs:Class rdf:ID="{c}"/>' for c in _CLASSES),
    *_PROPERTIES,
    "</rdf:RDF>",
])
"""Onyx's metadata schema (RDF/XML with MDV's ``mdv:reference`` and ``mdv:setValued``)."""


def _doc(kind: str, key: str) -> str:
    return f"urn:onyx:{kind}:{key}"


def broker_doc(broker: str) -> str:
    return _doc("brokers", broker)


def tree_doc(root: str) -> str:
    return _doc("trees", root)


def source_doc(source: str) -> str:
    return _doc("sources", source)


def profile_doc(profile: str) -> str:
    return _doc("profiles", profile)


def broker_uri(broker: str) -> str:
    return f"{broker_doc(broker)}#broker"


def link_uri(root: str, parent: str, child: str) -> str:
    return f"{tree_doc(root)}#{parent}-{child}"


def source_uri(source: str) -> str:
    return f"{source_doc(source)}#source"


def profile_uri(profile: str) -> str:
    return f"{profile_doc(profile)}#profile"


def broker_of(uri: str) -> str:
    """The broker id of a broker's URI reference (:class:`ValueError` if it is none).

    >>> broker_of(broker_uri("b2"))
    'b2'
    """
    prefix, suffix = broker_uri(""), "#broker"
    doc = prefix[:-len(suffix)]
    if not uri.startswith(doc) or not uri.endswith(suffix) or len(uri) == len(prefix):
        raise ValueError(f"{uri!r} does not name a broker")
    return uri[len(doc):-len(suffix)]
