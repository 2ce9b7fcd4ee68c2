"""Can a pattern occur at most once per message? From a schema, else from messages.

PEP prefers patterns that occur at most once: two profiles comparing such a pattern
to different values are mutually exclusive. A repeated element breaks that (a
message with two ``pubdata`` elements can match ``SF`` and ``NY`` profiles alike).

* :class:`SchemaOccurrence` reads the bound from a content model: a DTD (through
  lxml's DTD parser) or a :class:`yfilter.generators.Schema`. A path is at most once
  when every child step's maximum occurrence multiplies to at most 1; ``//`` and
  ``*`` steps and ``ANY`` content are left undecided. ``text()`` on an element with
  mixed content can see several text nodes, so it is never at most once.
* :class:`MessageStats` counts how often each pattern occurs in sample messages
  (lxml XPath on the skeleton) and calls it at most once when no sample had more.

:func:`tier` orders patterns: 0 at most once, 1 unknown, 2 repeats.

>>> occ = SchemaOccurrence.from_dtd("<!ELEMENT m (a?, b*)> <!ELEMENT a EMPTY> <!ELEMENT b EMPTY>")
>>> occ.at_most_once(Pattern("/m/a", "@v")), occ.at_most_once(Pattern("/m/b", "@v")), occ.at_most_once(Pattern("/m//a", "@v"))
(True, False, None)
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from lxml import etree

from partitioning.errors import PartitioningError
from partitioning.predicates import Pattern

_STEP = re.compile(r"(//?)(\{[^}]*\}[^/{]+|[^/{]+)")
INF = math.inf


def steps(path: str) -> list[tuple[str, str]]:
    """``(axis, name test)`` of a skeleton; Clark names may hold ``/`` in their URI.

    >>> steps("/a//{http://x/y}b/*")
    [('/', 'a'), ('//', '{http://x/y}b'), ('/', '*')]
    """
    return _STEP.findall(path)


class Occurrence(Protocol):
    def at_most_once(self, pattern: Pattern) -> bool | None: ...


def tier(occurrence: Occurrence | None, pattern: Pattern) -> int:
    """0 when the pattern occurs at most once per message, 1 when unknown, 2 when it repeats."""
    known = occurrence.at_most_once(pattern) if occurrence is not None else None
    return 1 if known is None else (0 if known else 2)


class SchemaOccurrence:
    """Maximum occurrences of each child under each element, from a content model.

    ``children[parent][child]`` is the most ``child`` elements one ``parent`` may
    hold (``inf`` for unbounded); ``mixed`` names elements that hold text between
    child elements; ``open`` names elements whose content is ``ANY``."""

    def __init__(self, children: Mapping[str, Mapping[str, float]], mixed: Iterable[str] = (),
                 open_content: Iterable[str] = ()) -> None:
        self.children = {p: dict(c) for p, c in children.items()}
        self.mixed = frozenset(mixed)
        self.open = frozenset(open_content)

    @classmethod
    def from_dtd(cls, text: str) -> "SchemaOccurrence":
        """Read a DTD's element declarations (no entity is resolved, nothing is fetched)."""
        try:
            dtd = etree.DTD(io.StringIO(text))
        except etree.DTDParseError as exc:
            raise PartitioningError(f"cannot read the source's schema as a DTD: {exc}") from None
        children, mixed, open_content = {}, [], []
        for el in dtd.iterelements():
            if el.type == "any":
                open_content.append(el.name)
                continue
            children[el.name] = _maxima(el.content) if el.content is not None else {}
            if el.type == "mixed" and children[el.name]:
                mixed.append(el.name)
        return cls(children, mixed, open_content)

    @classmethod
    def from_schema(cls, schema) -> "SchemaOccurrence":
        """From a :class:`yfilter.generators.Schema` (what the generators and the
        simulator use): ``Child.max`` is the bound, ``None`` unbounded."""
        children, mixed = {}, []
        for name, spec in schema.elements.items():
            children[name] = {c.name: (INF if c.max is None else c.max) for c in spec.children}
            if spec.children and spec.text:
                mixed.append(name)
        return cls(children, mixed)

    def at_most_once(self, pattern: Pattern) -> bool | None:
        path = steps(pattern.path)
        if not path or path[0][0] != "/":
            return None
        count, parent = 1.0, path[0][1]  # the document element occurs once
        for axis, test in path[1:]:
            if axis != "/" or parent == "*" or parent not in self.children or parent in self.open:
                return None
            kids = self.children[parent]
            count *= sum(kids.values()) if test == "*" else kids.get(test, 0)
            parent = test
        if pattern.target == "text()" and parent in self.mixed:
            return False
        return count <= 1


def _maxima(node) -> dict[str, float]:
    """Most occurrences of each element name in a DTD content particle."""
    if node is None or node.type == "pcdata":
        out: dict[str, float] = {}
    elif node.type == "element":
        out = {node.name: 1.0}
    else:
        left, right = _maxima(node.left), _maxima(node.right)
        combine = (lambda a, b: a + b) if node.type == "seq" else max
        out = {k: combine(left.get(k, 0.0), right.get(k, 0.0)) for k in left.keys() | right.keys()}
    if node is not None and node.occur in ("mult", "plus"):
        out = {k: INF for k in out}
    return out


class MessageStats:
    """Occurrences of patterns in sample messages, counted on demand and cached."""

    def __init__(self, messages: Iterable[bytes | etree._Element], namespaces: Mapping[str, str] | None = None) -> None:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
        self.docs = [m if isinstance(m, etree._Element) else etree.fromstring(m, parser) for m in messages]
        self.prefixes = {uri: f"n{i}" for i, uri in enumerate(sorted(set((namespaces or {}).values())))}
        self._cache: dict[Pattern, int] = {}

    def most(self, pattern: Pattern) -> int:
        """The most times ``pattern`` occurred in one sample message."""
        if pattern not in self._cache:
            count = etree.XPath(f"count({self._xpath(pattern)})", namespaces={p: u for u, p in self.prefixes.items()})
            self._cache[pattern] = max((int(count(d)) for d in self.docs), default=0)
        return self._cache[pattern]

    def at_most_once(self, pattern: Pattern) -> bool | None:
        return None if not self.docs else self.most(pattern) <= 1

    def _name(self, clark: str) -> str:
        if not clark.startswith("{"):
            return clark
        uri, local = clark[1:].split("}", 1)
        if uri not in self.prefixes:
            self.prefixes[uri] = f"n{len(self.prefixes)}"
        return f"{self.prefixes[uri]}:{local}"

    def _xpath(self, pattern: Pattern) -> str:
        # The document node is the context, so the first step is written as is.
        out = "".join(axis + self._name(test) for axis, test in steps(pattern.path))
        if pattern.target.startswith("@"):
            return f"{out}/@{self._name(pattern.target[1:])}"
        return out + ("/text()" if pattern.target == "text()" else "")


class Combined:
    """The schema's answer when it has one, else the messages'."""

    def __init__(self, *sources: Occurrence | None) -> None:
        self.sources = [s for s in sources if s is not None]

    def at_most_once(self, pattern: Pattern) -> bool | None:
        for source in self.sources:
            known = source.at_most_once(pattern)
            if known is not None:
                return known
        return None
