"""RDF documents (paper section 2.1): RDF/XML read with rdflib into resources, each with one class,
a URI reference (document URI + ``#`` + ``rdf:ID``: ``doc.rdf#host``) and properties whose values
are literals or URI references. Nested, same-document and cross-document references are the same
thing. A document defines only resources of its own URI; references may point anywhere.

>>> from catalog.schema import FIGURE_1_SCHEMA, Schema
>>> schema = Schema(); schema.add(FIGURE_1_SCHEMA)
>>> res = parse_document("doc.rdf", FIGURE_1, schema)
>>> sorted(res), res["doc.rdf#host"].props["serverInformation"]
(['doc.rdf#host', 'doc.rdf#info'], ('doc.rdf#info',))
>>> res["doc.rdf#info"]
Resource(uri='doc.rdf#info', cls='ServerInformation', props={'cpu': ('600',), 'memory': ('92',)})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

import rdflib
from rdflib.namespace import RDF

from catalog import defaults
from catalog.errors import DocumentError
from catalog.names import local_name
from catalog.schema import Schema

FIGURE_1 = """<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="urn:onyx:objectglobe#">
<CycleProvider rdf:ID="host">
  <serverHost>pirates.uni-passau.de</serverHost>
  <serverPort>5874</serverPort>
  <serverInformation>
    <ServerInformation rdf:ID="info" memory="92" cpu="600" />
  </serverInformation>
</CycleProvider>
</rdf:RDF>"""
"""The paper's Figure 1 (``doc.rdf``), in the namespace of :data:`catalog.schema.FIGURE_1_SCHEMA`."""

_STANDIN = "http://onyx.invalid/_/"
"""rdflib resolves ``rdf:ID`` and relative references only against hierarchical URIs; documents
named ``doc.rdf`` or ``urn:...`` are parsed under this stand-in base, which is mapped back."""


@dataclass
class Resource:
    """One resource: its URI reference, class and property values (sorted, as RDF has no order)."""

    uri: str
    cls: str
    props: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, list[str]]:
        """``property -> values``, as :meth:`catalog.LocalRepository.resources` gives it."""
        return {name: list(values) for name, values in self.props.items()}


def _base(doc_uri: str) -> tuple[str, callable]:
    if urlsplit(doc_uri).scheme in ("http", "https", "file"):
        return doc_uri, str
    return _STANDIN + quote(doc_uri, safe="/"), lambda u: unquote(u[len(_STANDIN):]) if u.startswith(_STANDIN) else u


def parse_document(doc_uri: str, rdf_xml: str, schema: Schema) -> dict[str, Resource]:
    """The resources ``rdf_xml`` defines, checked against ``schema``; :class:`DocumentError` for
    anything else (no DTD is read: a DOCTYPE is refused)."""
    if "#" in doc_uri or not doc_uri.strip():
        raise DocumentError(f"document URI {doc_uri!r} must be non-empty and have no fragment")
    if len(rdf_xml.encode()) > defaults.MAX_DOCUMENT_BYTES:
        raise DocumentError(f"document {doc_uri} is larger than {defaults.MAX_DOCUMENT_BYTES} bytes")
    if "<!DOCTYPE" in rdf_xml or "<!ENTITY" in rdf_xml:
        raise DocumentError(f"document {doc_uri}: DTDs and entities are not accepted")
    base, unmap = _base(doc_uri)
    graph = rdflib.Graph()
    try:
        graph.parse(data=rdf_xml, format="xml", publicID=base)
    except Exception as exc:  # rdflib raises parser-specific classes: report them all alike
        raise DocumentError(f"document {doc_uri} is not RDF/XML: {exc}") from None
    resources: dict[str, Resource] = {}
    for subject in set(graph.subjects()):
        if not isinstance(subject, rdflib.URIRef):
            raise DocumentError(f"document {doc_uri}: a resource without rdf:ID (every resource needs a URI reference)")
        uri = unmap(str(subject))
        if len(uri) > defaults.MAX_VALUE_CHARS:
            raise DocumentError(f"document {doc_uri}: a URI reference longer than {defaults.MAX_VALUE_CHARS} characters")
        if not uri.startswith(doc_uri + "#"):
            raise DocumentError(f"document {doc_uri} describes {uri}, which is not a resource of this document")
        resources[uri] = _resource(graph, subject, uri, schema, unmap)
    return resources


def _resource(graph: rdflib.Graph, subject, uri: str, schema: Schema, unmap) -> Resource:
    types = [local_name(str(t)) for t in graph.objects(subject, RDF.type)]
    if len(types) != 1 or types[0] not in schema.classes:
        raise DocumentError(f"resource {uri} needs exactly one class of the schema (has {types or 'none'})")
    cls = types[0]
    values: dict[str, list[str]] = {}
    for predicate, obj in graph.predicate_objects(subject):
        if predicate == RDF.type:
            continue
        name = local_name(str(predicate))
        prop = schema.property(cls, name)
        if prop is None:
            raise DocumentError(f"resource {uri}: class {cls} has no property {name}")
        if isinstance(obj, rdflib.BNode):
            raise DocumentError(f"resource {uri}: {name} holds a resource without rdf:ID (every resource needs a URI reference)")
        if prop.range is not None and not isinstance(obj, rdflib.URIRef):
            raise DocumentError(f"resource {uri}: {name} references a {prop.range}, not a literal")
        if prop.range is None and not isinstance(obj, rdflib.Literal):
            raise DocumentError(f"resource {uri}: {name} is a literal property, not a reference")
        values.setdefault(name, []).append(unmap(str(obj)) if prop.range else str(obj))
    for name, vals in values.items():
        if any(len(v) > defaults.MAX_VALUE_CHARS for v in vals):
            raise DocumentError(f"resource {uri}: a value of {name} is longer than {defaults.MAX_VALUE_CHARS} characters")
        if len(vals) > 1 and not schema.properties[name].set_valued:
            raise DocumentError(f"resource {uri}: {name} is single-valued but has {len(vals)} values")
    return Resource(uri, cls, {name: tuple(sorted(vals)) for name, vals in sorted(values.items())})
