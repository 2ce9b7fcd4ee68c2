"""Schema descriptions that drive the generators: which children, attributes and
text each element may have.

>>> s = Schema.nitf()
>>> s.root, [c.name for c in s.elements["hedline"].children]
('nitf', ['hl1', 'hl2'])

:meth:`Schema.from_documents` derives one from real documents (the corpus tests
generate profiles from each document's own vocabulary); names there are Clark
names and ``namespaces`` gives each namespace a prefix for writing profiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from lxml import etree


@dataclass(frozen=True)
class Child:
    name: str
    min: int
    max: int | None  # None: unbounded
    weight: float = 1.0  # scales the probability that an optional child appears


@dataclass
class ElementSpec:
    name: str
    children: list[Child] = field(default_factory=list)
    attrs: dict[str, list[str]] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)


@dataclass
class Schema:
    root: str
    elements: dict[str, ElementSpec]
    namespaces: dict[str, str] = field(default_factory=dict)  # prefix -> uri

    @classmethod
    def from_dict(cls, d: dict) -> "Schema":
        els = {}
        for name, spec in d["elements"].items():
            els[name] = ElementSpec(
                name,
                [Child(*c) for c in spec.get("children", [])],
                {a: list(v) for a, v in spec.get("attrs", {}).items()},
                list(spec.get("text", [])),
            )
        for spec in els.values():
            for c in spec.children:
                if c.name not in els:
                    raise ValueError(f"{spec.name} has undeclared child {c.name}")
        return cls(d["root"], els, dict(d.get("namespaces", {})))

    @classmethod
    def nitf(cls) -> "Schema":
        """The NITF-like schema that ships with the project."""
        from yfilter.generators.nitf import NITF
        return cls.from_dict(NITF)

    @classmethod
    def from_documents(cls, roots: Iterable[etree._Element]) -> "Schema":
        """The vocabulary of real documents: observed children (with the most
        repeats seen), attribute values and text nodes of each element name."""
        els: dict[str, ElementSpec] = {}
        maxrep: dict[tuple[str, str], int] = {}
        uris: list[str] = []
        root_name = None
        for root in roots:
            root_name = root_name or root.tag
            for el in root.iter(etree.Element):
                spec = els.setdefault(el.tag, ElementSpec(el.tag))
                counts: dict[str, int] = {}
                for c in el.iterchildren(etree.Element):
                    counts[c.tag] = counts.get(c.tag, 0) + 1
                for tag, n in counts.items():
                    k = (el.tag, tag)
                    maxrep[k] = max(maxrep.get(k, 0), n)
                for a, v in el.attrib.items():
                    vals = spec.attrs.setdefault(a, [])
                    if v not in vals:
                        vals.append(v)
                texts = [el.text] + [c.tail for c in el]
                for t in texts:
                    if t and t.strip() and t not in spec.text and len(spec.text) < 20:
                        spec.text.append(t)
                for name in [el.tag, *el.attrib]:
                    if name.startswith("{"):
                        uri = name[1:].split("}", 1)[0]
                        if uri not in uris:
                            uris.append(uri)
        for (parent, tag), n in maxrep.items():
            els[parent].children.append(Child(tag, 0, n))
        namespaces = {}
        for i, uri in enumerate(uris):
            if uri == "http://www.w3.org/XML/1998/namespace":
                continue
            namespaces[f"ns{i}"] = uri
        return cls(root_name, els, namespaces)

    def qname(self, clark: str) -> str:
        """A Clark name written with this schema's prefixes (``xml:`` built in)."""
        if not clark.startswith("{"):
            return clark
        uri, local = clark[1:].split("}", 1)
        if uri == "http://www.w3.org/XML/1998/namespace":
            return "xml:" + local
        for p, u in self.namespaces.items():
            if u == uri:
                return f"{p}:{local}"
        raise KeyError(uri)
