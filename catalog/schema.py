"""The RDF Schema metadata must conform to (paper section 2), read from RDF/XML with rdflib, with
MDV's extension for references (section 2.4): a property whose ``rdfs:range`` is a class of the
schema is a reference, marked ``mdv:reference`` "strong" (what it references is always shipped
along with the resource) or "weak" (never); ``mdv:setValued`` "true" makes a property
set-valued (section 2.3: all elements of one type). Several schemas may be registered one after
the other; a name keeps the definition it got first.

>>> s = Schema()
>>> s.add(FIGURE_1_SCHEMA)
>>> s.properties["serverInformation"]
Property(name='serverInformation', domains=frozenset({'CycleProvider'}), range='ServerInformation', reference='strong', set_valued=False)
>>> s.property("CycleProvider", "memory") is None, sorted(s.strong)
(True, ['serverInformation'])
"""

from __future__ import annotations

from dataclasses import dataclass

import rdflib
from rdflib.namespace import RDF, RDFS, XSD

from catalog import defaults
from catalog.errors import SchemaError
from catalog.names import is_name, local_name

MDV = rdflib.Namespace(defaults.MDV_NAMESPACE)

FIGURE_1_SCHEMA = f"""<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:mdv="{defaults.MDV_NAMESPACE}"
         xml:base="urn:onyx:objectglobe">
  <rdfs:Class rdf:ID="CycleProvider"/>
  <rdfs:Class rdf:ID="ServerInformation"/>
  <rdf:Property rdf:ID="serverHost"><rdfs:domain rdf:resource="#CycleProvider"/></rdf:Property>
  <rdf:Property rdf:ID="serverPort"><rdfs:domain rdf:resource="#CycleProvider"/></rdf:Property>
  <rdf:Property rdf:ID="synthValue"><rdfs:domain rdf:resource="#CycleProvider"/></rdf:Property>
  <rdf:Property rdf:ID="serverInformation">
    <rdfs:domain rdf:resource="#CycleProvider"/><rdfs:range rdf:resource="#ServerInformation"/>
    <mdv:reference>strong</mdv:reference>
  </rdf:Property>
  <rdf:Property rdf:ID="memory"><rdfs:domain rdf:resource="#ServerInformation"/></rdf:Property>
  <rdf:Property rdf:ID="cpu"><rdfs:domain rdf:resource="#ServerInformation"/></rdf:Property>
</rdf:RDF>"""
"""The schema of the paper's Figure 1 (ObjectGlobe's cycle providers), with ``synthValue`` of
Figure 10's COMP rules; ``serverInformation`` strong, as section 2.4 argues it should be."""


@dataclass(frozen=True)
class Property:
    """One property: the classes it applies to (empty: any), the class it references (``None``:
    a literal), ``"strong"``/``"weak"`` for a reference, and whether it holds a set of values."""

    name: str
    domains: frozenset[str]
    range: str | None
    reference: str | None
    set_valued: bool


class Schema:
    """The registered classes and properties, by name."""

    def __init__(self) -> None:
        self.classes: set[str] = set()
        self.properties: dict[str, Property] = {}
        self.texts: list[str] = []

    @property
    def strong(self) -> frozenset[str]:
        """Names of the strong reference properties."""
        return frozenset(p.name for p in self.properties.values() if p.reference == "strong")

    def property(self, cls: str, name: str) -> Property | None:
        """The property ``name`` of instances of ``cls``, or ``None`` if they have none."""
        prop = self.properties.get(name)
        if prop is None or (prop.domains and cls not in prop.domains):
            return None
        return prop

    def add(self, rdfs_xml: str) -> None:
        """Register the classes and properties of an RDF Schema document (all or nothing)."""
        graph = rdflib.Graph()
        try:
            graph.parse(data=rdfs_xml, format="xml")
        except Exception as exc:  # rdflib raises parser-specific classes: report them all alike
            raise SchemaError(f"not an RDF/XML schema: {exc}") from None
        classes = {_name(c, "class") for c in graph.subjects(RDF.type, RDFS.Class)}
        if any(graph.triples((None, RDFS.subClassOf, None))):
            raise SchemaError("rdfs:subClassOf is not supported: every resource has exactly one class")
        known = self.classes | classes
        props = {}
        for subject in graph.subjects(RDF.type, RDF.Property):
            prop = _read_property(graph, subject, known)
            old = self.properties.get(prop.name)
            if old is not None and old != prop:
                raise SchemaError(f"property {prop.name} is registered already with another definition")
            props[prop.name] = prop
        self.classes = known
        self.properties.update(props)
        self.texts.append(rdfs_xml)


def _name(uri, what: str) -> str:
    name = local_name(str(uri))
    if not is_name(name) or name == defaults.SUBJECT:
        raise SchemaError(f"{what} {uri}: {name!r} cannot be used as a name in rules")
    return name


def _literal_range(uri) -> bool:
    return uri == RDFS.Literal or str(uri).startswith(str(XSD))


def _read_property(graph: rdflib.Graph, subject, classes: set[str]) -> Property:
    name = _name(subject, "property")
    domains = frozenset(local_name(str(d)) for d in graph.objects(subject, RDFS.domain))
    unknown = sorted(domains - classes)
    if unknown:
        raise SchemaError(f"property {name}: domain {unknown[0]} is not a class of the schema")
    ranges = list(graph.objects(subject, RDFS.range))
    if len(ranges) > 1:
        raise SchemaError(f"property {name} has {len(ranges)} ranges; at most one is allowed")
    target = None
    if ranges and not _literal_range(ranges[0]):
        target = local_name(str(ranges[0]))
        if target not in classes:
            raise SchemaError(f"property {name}: range {ranges[0]} is neither a literal type nor a class of the schema")
    marks = [str(m) for m in graph.objects(subject, MDV.reference)]
    if marks and target is None:
        raise SchemaError(f"property {name} is marked mdv:reference but its range is not a class")
    if len(marks) > 1 or (marks and marks[0] not in ("strong", "weak")):
        raise SchemaError(f"property {name}: mdv:reference must be one of \"strong\", \"weak\" (got {marks})")
    reference = (marks[0] if marks else defaults.DEFAULT_REFERENCE) if target else None
    flags = [str(m).strip().lower() for m in graph.objects(subject, MDV.setValued)]
    if any(f not in ("true", "false") for f in flags) or len(set(flags)) > 1:
        raise SchemaError(f"property {name}: mdv:setValued must be \"true\" or \"false\"")
    return Property(name, domains, target, reference, bool(flags) and flags[0] == "true")
