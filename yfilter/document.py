"""The two shapes a message arrives in, behind one small interface the operators use.

* :class:`TableDoc` wraps a decoded :class:`formats.Message` (the preorder element
  table); nodes are table indexes. This is the fast path for the binary formats:
  nothing is parsed.
* :class:`TreeDoc` wraps an lxml tree parsed from XML text; nodes are lxml elements.
  Walking lxml's own tree costs less than building a ``Message`` first (measured:
  parse+iter 74 us vs ``Message.from_xml`` 275 us per corpus document), and it keeps
  text nodes exactly as XPath sees them (a comment splits a text node).

Both expose: ``tag``, ``attr``, ``attr_items``, ``text_nodes`` (a sequence of the
element's text-node children, in order), ``string_value``, ``children``,
``descendants``, ``named_children`` and ``named_descendants`` (those with a name
test, ``'*'`` for any), ``contents`` (the values and names the document holds, a
:class:`Contents`), ``preceding_siblings`` (element siblings before a node, any
order) and ``order`` (document-order key).
"""

from __future__ import annotations

import threading
from itertools import accumulate, compress
from typing import Iterable, Iterator

from lxml import etree

from formats.message import MAX_MESSAGE_BYTES, Message
from yfilter.errors import MessageError
from yfilter.operators import attr_atom

_local = threading.local()


def _parser() -> etree.XMLParser:
    # lxml parsers are not thread-safe: one per thread. Same policy as formats:
    # untrusted input, so no DTD loading, no entity substitution, no network.
    p = getattr(_local, "parser", None)
    if p is None:
        p = _local.parser = etree.XMLParser(resolve_entities=False, no_network=True,
                                            load_dtd=False, huge_tree=False,
                                            collect_ids=False)
    return p


def parse_xml(data: bytes | bytearray | memoryview | str) -> etree._Element:
    """Parse untrusted XML text into an lxml tree or raise :class:`MessageError`.

    libxml2 itself refuses nesting deeper than 256 (``formats.message.MAX_DEPTH``)
    without ``huge_tree``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, bytes):
        data = bytes(data)
    if len(data) > MAX_MESSAGE_BYTES:
        raise MessageError(f"message of {len(data)} bytes exceeds the limit of "
                           f"{MAX_MESSAGE_BYTES} bytes")
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise MessageError(f"malformed XML: {exc}") from None
    if root.getroottree().docinfo.internalDTD is not None:
        # Entities are never substituted; a document that still uses one is refused
        # rather than matched against text it does not really contain.
        for ent in root.iter(etree.Entity):
            raise MessageError(f"entity reference &{ent.name}; is not allowed in messages")
    return root


class Contents:
    """What a document holds, for necessary tests (:class:`yfilter.operators.Need`):
    ``base``, its attributes (as :func:`~yfilter.operators.attr_atom`), text nodes (and ``''``, which an
    empty CDATA section may be) and element names in one set (a text equal to a name
    can only let more through, never fewer), and the string-values of its elements
    (:meth:`selves`, computed on first use)."""

    __slots__ = ("base", "_values", "_selves")

    def __init__(self, attrs: set, texts: set, names: set, values) -> None:
        attrs.update(texts)
        attrs.update(names)
        attrs.add("")
        self.base = attrs
        self._values = values
        self._selves: set[str] | None = None

    def selves(self) -> set[str]:
        if self._selves is None:
            self._selves = set(self._values())
        return self._selves


class TableDoc:
    """A :class:`formats.Message` seen through the operator interface.

    Only names and depths are read up front (all a walk without predicates needs);
    the other columns are read from the message when first used, which for a
    decoded binary message is when they are built (``formats.Message.lazy``).
    """

    __slots__ = ("msg", "tags", "depths", "_text_nodes", "_attr_starts")

    def __init__(self, msg: Message) -> None:
        self.msg = msg
        self.tags, self.depths = msg.tags, msg.depths
        self._text_nodes: list[tuple[str, ...]] | None = None
        self._attr_starts: list[int] | None = None

    @property
    def attrs(self) -> list[dict[str, str]]:
        return self.msg.attrs

    @property
    def texts(self) -> list[str]:
        return self.msg.texts

    @property
    def tails(self) -> list[str]:
        return self.msg.tails

    @property
    def ends(self) -> list[int]:
        return self.msg.ends

    @property
    def parents(self) -> list[int]:
        return self.msg.parents

    def _text_node_column(self) -> list[tuple[str, ...]]:
        # Every element's text nodes at once (a walk with text predicates asks for
        # nearly every element's): its text, then the tails of its children.
        msg = self.msg
        tails = msg.tails
        tailed = list(compress(range(len(tails)), tails))
        if not tailed:  # no parent needed (and none built)
            return [(t,) if t else () for t in msg.texts]
        out = [[t] if t else [] for t in msg.texts]
        parents = msg.parents
        for j in tailed:
            out[parents[j]].append(tails[j])
        return list(map(tuple, out))  # shared between callers: immutable

    def tag(self, n: int) -> str:
        return self.tags[n]

    # Attributes are read from the message's flat columns: no per-element map is
    # built. A name repeated on one element (only a corrupted payload has one)
    # means its last value, as in the message's own maps.
    def _starts(self) -> list[int]:
        starts = self._attr_starts = list(accumulate(self.msg.attr_counts, initial=0))
        return starts

    def attr(self, n: int, name: str) -> str | None:
        starts = self._attr_starts or self._starts()
        o, e = starts[n], starts[n + 1]
        if o == e:
            return None
        names = self.msg.attr_names[o:e]
        if name not in names:
            return None
        return self.msg.attr_values[e - 1 - names[::-1].index(name)]

    def attr_items(self, n: int):
        starts = self._attr_starts or self._starts()
        o, e = starts[n], starts[n + 1]
        if o == e:
            return ()
        msg = self.msg
        if e - o == 1:
            return ((msg.attr_names[o], msg.attr_values[o]),)
        return dict(zip(msg.attr_names[o:e], msg.attr_values[o:e])).items()

    def text_nodes(self, n: int) -> tuple[str, ...]:
        column = self._text_nodes
        if column is None:
            column = self._text_nodes = self._text_node_column()
        return column[n]

    def string_value(self, n: int) -> str:
        depths = self.depths
        if n + 1 == len(depths) or depths[n + 1] <= depths[n]:  # childless: ends not needed
            return self.msg.texts[n]
        return self.msg.string_value(n)

    def children(self, n: int) -> Iterator[int]:
        ends = self.msg.ends
        j, end = n + 1, ends[n]
        while j < end:
            yield j
            j = ends[j]

    def descendants(self, n: int) -> Iterable[int]:
        return range(n + 1, self.msg.ends[n])

    def contents(self) -> "Contents":
        msg = self.msg
        texts = set(msg.texts)
        texts.update(msg.tails)
        # The flat columns (no per-element maps needed); a name a corrupted payload
        # repeats on one element adds an atom, which can only let more through.
        return Contents(set(map(attr_atom, msg.attr_names, msg.attr_values)), texts, set(self.tags),
                        self._string_values)

    def _string_values(self) -> list[str]:
        # Children first (reverse document order): each element's string-value is its
        # text, then each child's string-value and tail.
        texts, tails, ends = self.msg.texts, self.msg.tails, self.msg.ends
        out: list = [None] * len(texts)
        for i in range(len(texts) - 1, -1, -1):
            end = ends[i]
            if end == i + 1:
                out[i] = texts[i]
                continue
            parts = [texts[i]]
            j = i + 1
            while j < end:
                parts.append(out[j])
                parts.append(tails[j])
                j = ends[j]
            out[i] = "".join(parts)
        return out

    def named_children(self, n: int, test: str) -> Iterator[int]:
        tags, ends = self.tags, self.msg.ends
        j, end = n + 1, ends[n]
        while j < end:
            if test == "*" or tags[j] == test:
                yield j
            j = ends[j]

    def named_descendants(self, n: int, test: str) -> Iterable[int]:
        if test == "*":
            return range(n + 1, self.msg.ends[n])
        tags = self.tags
        return [j for j in range(n + 1, self.msg.ends[n]) if tags[j] == test]

    def preceding_siblings(self, n: int) -> Iterator[int]:
        p = self.msg.parents[n]
        if p < 0:
            return
        ends = self.msg.ends
        j = p + 1
        while j < n:
            yield j
            j = ends[j]

    def order(self, n: int) -> int:
        return n


class TreeDoc:
    """An lxml element tree seen through the operator interface."""

    __slots__ = ("root", "_order", "_preorder")

    def __init__(self, root: etree._Element) -> None:
        self.root = root
        self._order: dict[etree._Element, int] | None = None
        self._preorder: tuple | None = None

    def preorder(self) -> tuple[list[etree._Element], list[str], list[int]]:
        """The elements in document order, their tags and depths (the root's is 1)."""
        if self._preorder is None:
            nodes, tags, depths = [], [], []
            depth = {self.root.getparent(): 0}
            for e in self.root.iter(etree.Element):
                d = depth[e] = depth[e.getparent()] + 1
                nodes.append(e)
                tags.append(e.tag)
                depths.append(d)
            self._preorder = nodes, tags, depths
        return self._preorder

    @staticmethod
    def tag(n: etree._Element) -> str:
        return n.tag

    @staticmethod
    def attr(n: etree._Element, name: str) -> str | None:
        return n.get(name)

    @staticmethod
    def attr_items(n: etree._Element) -> list[tuple[str, str]]:
        return n.items()

    @staticmethod
    def text_nodes(n: etree._Element) -> list[str]:
        # .text is the text before the first child node, element or not; each child's
        # tail (comments and PIs included) is a text node of its own. An empty CDATA
        # section is an empty text node: lxml shows it as '' rather than None.
        text = n.text
        out = [] if text is None else [text]
        if not len(n):
            return out
        for c in n:
            if c.tail is not None:
                out.append(c.tail)
        return out

    @staticmethod
    def string_value(n: etree._Element) -> str:
        # All text and CDATA below, no comment or PI content, as XPath's string-value
        # (the same as joining itertext(), several times faster); without children
        # (comments and PIs count), just the element's text.
        if not len(n):
            return n.text or ""
        return etree.tostring(n, method="text", encoding="unicode", with_tail=False)

    @staticmethod
    def children(n: etree._Element) -> Iterator[etree._Element]:
        return n.iterchildren(etree.Element)

    @staticmethod
    def descendants(n: etree._Element) -> Iterator[etree._Element]:
        return n.iterdescendants(etree.Element)

    def contents(self) -> "Contents":
        nodes, tags, _ = self.preorder()
        return Contents({attr_atom(k, v) for e in nodes for k, v in e.items()},
                        set(self.root.itertext()), set(tags), self._string_values)

    def _string_values(self) -> list[str]:
        return [self.string_value(e) for e in self.preorder()[0]]

    @staticmethod
    def named_children(n: etree._Element, test: str) -> Iterator[etree._Element]:
        return n.iterchildren(etree.Element if test == "*" else test)

    @staticmethod
    def named_descendants(n: etree._Element, test: str) -> Iterator[etree._Element]:
        return n.iterdescendants(etree.Element if test == "*" else test)

    @staticmethod
    def preceding_siblings(n: etree._Element) -> Iterator[etree._Element]:
        return n.itersiblings(etree.Element, preceding=True)

    def order(self, n: etree._Element) -> int:
        if self._order is None:
            self._order = {e: i for i, e in enumerate(self.root.iter(etree.Element))}
        return self._order[n]
