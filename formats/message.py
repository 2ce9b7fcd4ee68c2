"""The decoded form of a message that every wire format produces and the engine walks.

A :class:`Message` is a flat, preorder table of the document's elements, so that
consumers iterate plain lists instead of parsing: element ``i`` has a name, a depth,
its attributes, the text before its first child, the text after its end tag, the
index one past its last descendant and its parent's index. Attributes also come as
flat columns (``attr_counts``, ``attr_names``, ``attr_values``). A message decoded
from a binary payload builds only names and depths at once; the other columns are
built when first read (:meth:`Message.lazy`), so a receiver matching path-only
profiles never pays for texts, attributes or tree links.

>>> m = Message.from_xml(b"<a x='1'>hi<b/>there</a>")
>>> m.tags, m.depths, m.ends, m.texts, m.tails
(['a', 'b'], [1, 2], [2, 2], ['hi', ''], ['', 'there'])
>>> m.to_xml()
b'<a x="1">hi<b/>there</a>'

What is kept is the infoset the engine needs: elements, attributes, text and their
order, plus namespace declarations. Comments, processing instructions, the DOCTYPE
and the XML declaration are not kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import chain, islice, repeat

from lxml import etree

from formats.errors import FormatError

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Messages larger than this are refused before parsing."""

MAX_DEPTH = 256
"""Elements nested deeper than this are refused (libxml2's own limit is far higher)."""


def _secure_parser() -> etree.XMLParser:
    # Untrusted input: no DTD loaded, no entity substituted, no network, no huge trees.
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=False,
        remove_pis=False,
        collect_ids=False,
    )


def parse_xml(data: bytes | str) -> etree._Element:
    """Securely parse XML text into an lxml element (the parse behind
    :meth:`Message.from_xml`); :class:`FormatError` if malformed or too large."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise FormatError(
            f"message of {len(data)} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes"
        )
    try:
        return etree.fromstring(data, _secure_parser())
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"malformed XML: {exc}") from None


class _Lazy:
    """A column computed on first use and then stored on the instance, where later
    reads find it as a plain attribute (no ``__set__``: the instance wins)."""

    def __init__(self, compute: Callable[["Message"], list]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, m: "Message | None", owner: type) -> "list | _Lazy":
        if m is None:
            return self
        value = m.__dict__[self.name] = self.compute(m)
        return value


class Message:
    """An XML message as a preorder element table (see the module docstring).

    Names use lxml's Clark notation: ``'{uri}local'`` for a namespaced element or
    attribute, ``'local'`` otherwise. ``nsmaps[i]`` holds only the namespace
    declarations made on element ``i`` (prefix -> uri; ``None`` is the default).

    A decoder may leave columns to be computed on first use (see :meth:`lazy`), so
    that a receiver that only walks names and depths never builds the others.
    """

    def __init__(
        self,
        tags: list[str] | None = None,
        depths: list[int] | None = None,
        attrs: list[dict[str, str]] | None = None,
        texts: list[str] | None = None,
        tails: list[str] | None = None,
        ends: list[int] | None = None,
        parents: list[int] | None = None,
        nsmaps: list[dict[str | None, str]] | None = None,
    ) -> None:
        self.tags = [] if tags is None else tags
        self.depths = [] if depths is None else depths
        self.texts = [] if texts is None else texts
        self.tails = [] if tails is None else tails
        for name, column in (("attrs", attrs), ("ends", ends), ("parents", parents), ("nsmaps", nsmaps)):
            if column is not None:
                self.__dict__[name] = column

    @classmethod
    def lazy(
        cls,
        tags: list[str],
        depths: list[int],
        text_nodes: Callable[[], tuple[list[str], list[str]]],
        attributes: Callable[[], tuple[Sequence[int], list[str], list[str]]] | None = None,
        nsmaps: dict[int, dict[str | None, str]] | None = None,
    ) -> "Message":
        """A message of which only names and depths are built now: ``text_nodes()``
        gives the texts and tails, and ``attributes()`` the attribute count of each
        element with all names and all values in document order (no attributes if
        ``None``), on first use; namespace declarations come sparsely (element ->
        declarations); ends and parents follow from ``depths``. The caller has
        validated what the builders will read (they must not fail) and that
        ``depths`` describe one tree (``depths[0] == 1``, each next at least 2 and at
        most one more than the last).

        >>> m = Message.lazy(["a", "b"], [1, 2], lambda: (["", "x"], ["", ""]),
        ...                  lambda: ([0, 2], ["p", "q"], ["1", "2"]))
        >>> m.ends, m.parents, m.texts, m.attrs
        ([2, 2], [-1, 0], ['', 'x'], [{}, {'p': '1', 'q': '2'}])
        """
        m = cls.__new__(cls)
        m.__dict__ = {"tags": tags, "depths": depths, "_text_nodes": text_nodes, "_attributes": attributes,
                      "_ns": nsmaps}
        return m

    @_Lazy
    def texts(self) -> list[str]:
        """Per element, the text before its first child (``''`` if none)."""
        texts, self.__dict__["tails"] = self.__dict__["_text_nodes"]()
        return texts

    @_Lazy
    def tails(self) -> list[str]:
        """Per element, the text after its end tag (``''`` for the root)."""
        self.__dict__["texts"], tails = self.__dict__["_text_nodes"]()
        return tails

    def _attribute_columns(self) -> tuple[Sequence[int], list[str], list[str]] | None:
        """Counts, names and values of a lazy message's attributes (built once)."""
        d = self.__dict__
        columns = d.get("_attr_columns")
        if columns is None:
            build = d.get("_attributes")
            if build is None:
                return None
            columns = d["_attr_columns"] = build()
        return columns

    @_Lazy
    def attrs(self) -> list[dict[str, str]]:
        """Attributes per element: name -> value."""
        columns = self._attribute_columns()
        if columns is None:
            return [{} for _ in self.tags]
        counts, names, values = columns
        # Each element's map takes its count of pairs off one shared iterator, in C.
        pairs = zip(names, values)
        return list(map(dict, map(islice, repeat(pairs), counts)))

    @_Lazy
    def attr_counts(self) -> Sequence[int]:
        """The number of attributes of each element (with :attr:`attr_names` and
        :attr:`attr_values`, the attributes as flat columns)."""
        columns = self._attribute_columns()
        return columns[0] if columns is not None else list(map(len, self.attrs))

    @_Lazy
    def attr_names(self) -> list[str]:
        """The names of all attributes, element after element (a flat column)."""
        columns = self._attribute_columns()
        return columns[1] if columns is not None else list(chain.from_iterable(self.attrs))

    @_Lazy
    def attr_values(self) -> list[str]:
        """The values of all attributes, in the order of :attr:`attr_names`."""
        columns = self._attribute_columns()
        return columns[2] if columns is not None else list(chain.from_iterable(map(dict.values, self.attrs)))

    @_Lazy
    def nsmaps(self) -> list[dict[str | None, str]]:
        """Namespace declarations made on each element: prefix -> URI."""
        sparse = self.__dict__.get("_ns") or {}
        return [dict(sparse[i]) if i in sparse else {} for i in range(len(self.tags))]

    @_Lazy
    def ends(self) -> list[int]:
        """Per element, the index one past its last descendant."""
        return subtree_ends(self.parents)

    @_Lazy
    def parents(self) -> list[int]:
        """Per element, its parent's index (``-1`` for the root)."""
        return tree_parents(self.depths)

    def __len__(self) -> int:
        return len(self.tags)

    def children(self, i: int) -> list[int]:
        """Indexes of the child elements of element ``i``, in document order."""
        out = []
        j = i + 1
        end = self.ends[i]
        ends = self.ends
        while j < end:
            out.append(j)
            j = ends[j]
        return out

    def string_value(self, i: int) -> str:
        """XPath string-value of element ``i``: all descendant text in document order
        (a descendant's tail comes after its own descendants' text).

        >>> Message.from_xml(b"<a>1<b>2<c>3</c>4</b>5</a>").string_value(0)
        '12345'
        """
        texts, tails, ends = self.texts, self.tails, self.ends
        end = ends[i]
        parts = [texts[i]]
        open_: list[int] = []  # the descendants whose subtree has not ended yet
        for j in range(i + 1, end):
            while open_ and ends[open_[-1]] <= j:
                parts.append(tails[open_.pop()])
            parts.append(texts[j])
            open_.append(j)
        while open_:
            parts.append(tails[open_.pop()])
        return "".join(parts)

    @classmethod
    def from_xml(cls, data: bytes | str) -> "Message":
        """Parse XML text into a message; raises :class:`FormatError` if it is
        malformed, too large, too deep, or uses entity references."""
        # Text without "xmlns" declares no namespace: no element needs its nsmap read.
        declares = b"xmlns" in data if isinstance(data, (bytes, bytearray)) else "xmlns" in data
        return cls.from_element(parse_xml(data), namespaces=declares)

    @classmethod
    def from_element(cls, root: etree._Element, namespaces: bool = True) -> "Message":
        """Build a message from a parsed lxml element (comments and PIs dropped);
        ``namespaces=False`` when the document is known to declare none."""
        tags: list[str] = []
        depths: list[int] = []
        attrs: list[dict[str, str]] = []
        texts: list[str] = []
        tails: list[str] = []
        parents: list[int] = []
        nsmaps: list[dict[str | None, str]] = []
        index: dict[etree._Element, int] = {}
        for node in root.iter():
            tag = node.tag
            if not isinstance(tag, str):
                if isinstance(node, etree._Entity):
                    raise FormatError(f"entity reference &{node.name}; is not allowed in messages")
                # Comment or PI: dropped, its tail text stays where it was.
                if node.tail:
                    prev = node.getprevious()
                    while prev is not None and not isinstance(prev.tag, str):
                        prev = prev.getprevious()
                    if prev is None:
                        texts[index[node.getparent()]] += node.tail
                    else:
                        tails[index[prev]] += node.tail
                continue
            i = len(tags)
            index[node] = i
            parent_el = node.getparent()
            if parent_el is None:
                p, depth = -1, 1
            else:
                p = index[parent_el]
                depth = depths[p] + 1
                if depth > MAX_DEPTH:
                    raise FormatError(f"element nesting deeper than the limit of {MAX_DEPTH}")
            tags.append(tag)
            depths.append(depth)
            items = node.items()  # much cheaper than the .attrib proxy
            attrs.append(dict(items) if items else {})
            text = node.text
            texts.append(text if text else "")
            tails.append(node.tail or "" if p >= 0 else "")
            parents.append(p)
            if namespaces:
                ns = node.nsmap
                parent_ns = parent_el.nsmap if parent_el is not None else {}
                nsmaps.append({k: u for k, u in ns.items() if parent_ns.get(k) != u} if ns else {})
            else:
                nsmaps.append({})
        ends = [i + 1 for i in range(len(tags))]
        for i in range(len(tags) - 1, 0, -1):
            p = parents[i]
            if ends[i] > ends[p]:
                ends[p] = ends[i]
        return cls(tags, depths, attrs, texts, tails, ends, parents, nsmaps)

    def to_xml(self) -> bytes:
        """Serialize back to XML text (UTF-8, no declaration): the bytes lxml writes for
        :meth:`to_element`, written straight from the columns when no namespace is
        declared (the common case, twice as fast); through lxml otherwise, or when a name
        or string is not allowed in XML (which lxml reports)."""
        fast = self._fast_xml()
        return fast if fast is not None else etree.tostring(self.to_element(), encoding="utf-8")

    def _fast_xml(self) -> bytes | None:
        if not self.tags or any(self.nsmaps):
            return None
        tags, texts, tails, ends, attrs = self.tags, self.texts, self.tails, self.ends, self.attrs
        names = _XML_NAMES
        out: list[str] = []
        open_: list[int] = []
        for i, tag in enumerate(tags):
            while open_ and ends[open_[-1]] <= i:
                j = open_.pop()
                out.append(f"</{tags[j]}>")
                if tails[j]:
                    out.append(_escape_text(tails[j]))
            if tag not in names and not _name_ok(tag):
                return None
            head = "<" + tag
            a = attrs[i]
            if a:
                for k, v in a.items():
                    if k not in names:
                        if k.startswith(_XML_NS):  # xml:lang, xml:space: the prefix is always bound
                            if not _name_ok(k[len(_XML_NS):]):
                                return None
                            k = "xml:" + k[len(_XML_NS):]
                        elif not _name_ok(k):
                            return None
                    head += f' {k}="{_escape_attr(v)}"'
            if ends[i] == i + 1 and not texts[i]:
                out.append(head + "/>")
                if open_ and tails[i]:
                    out.append(_escape_text(tails[i]))
            else:
                out.append(head + ">")
                if texts[i]:
                    out.append(_escape_text(texts[i]))
                open_.append(i)
        while open_:
            j = open_.pop()
            out.append(f"</{tags[j]}>")
            if open_ and tails[j]:
                out.append(_escape_text(tails[j]))
        text = "".join(out)
        if _NOT_XML_CHAR.search(text):
            return None  # lxml refuses it, with the reason
        return text.encode("utf-8")

    def to_element(self) -> etree._Element:
        """Rebuild an lxml element tree; :class:`FormatError` if a name or string
        in the table is not allowed in XML."""
        if not self.tags:
            raise FormatError("empty message has no root element")
        nodes: list[etree._Element] = []
        defaults: list[str] = []  # per element, the default namespace in scope ('' none)
        try:
            for i, tag in enumerate(self.tags):
                p = self.parents[i]
                nsmap = self.nsmaps[i] or None
                # lxml writes an element without a namespace inside a default namespace
                # declaration as it is, which reads back in that namespace: only a
                # corrupted binary payload has one, so it is refused, not renamed.
                inherited = defaults[p] if p >= 0 else ""
                default = nsmap.get(None, inherited) if nsmap else inherited
                if default and tag[:1] != "{":
                    raise FormatError(f"element {i} ({tag!r}) has no namespace inside the default "
                                      f"namespace {default!r}: no XML text says that")
                defaults.append(default)
                if p < 0:
                    el = etree.Element(tag, self.attrs[i], nsmap=nsmap)
                else:
                    el = etree.SubElement(nodes[p], tag, self.attrs[i], nsmap=nsmap)
                if self.texts[i]:
                    el.text = self.texts[i]
                if self.tails[i]:
                    el.tail = self.tails[i]
                nodes.append(el)
        except (ValueError, TypeError) as exc:
            # lxml refuses control characters and bad names: the table did not come
            # from a parse (a corrupted binary payload, say), so it is a format error.
            raise FormatError(f"message cannot be serialized as XML: {exc}") from None
        return nodes[0]


_XML_NS = "{http://www.w3.org/XML/1998/namespace}"
_NAME = re.compile(r"[A-Za-z_\u00C0-\U000EFFFF][\w.\-\u00B7\u00C0-\U000EFFFF]*\Z")
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_XML_NAMES: set[str] = set()
"""Names :func:`_name_ok` has accepted (element and attribute names repeat a lot)."""


def _name_ok(name: str) -> bool:
    """Whether ``name`` is an XML name without a namespace (remembered when it is)."""
    if ":" in name or not _NAME.match(name):
        return False
    if len(_XML_NAMES) < 100_000:
        _XML_NAMES.add(name)
    return True


def _escape_text(s: str) -> str:
    """Character data as libxml2 writes it."""
    if "&" in s:
        s = s.replace("&", "&amp;")
    if "<" in s:
        s = s.replace("<", "&lt;")
    if ">" in s:
        s = s.replace(">", "&gt;")
    if "\r" in s:
        s = s.replace("\r", "&#13;")
    return s


def _escape_attr(s: str) -> str:
    """An attribute value (in double quotes) as libxml2 writes it."""
    s = _escape_text(s)
    if '"' in s:
        s = s.replace('"', "&quot;")
    if "\n" in s:
        s = s.replace("\n", "&#10;")
    if "\t" in s:
        s = s.replace("\t", "&#9;")
    return s


def tree_parents(depths: Sequence[int]) -> list[int]:
    """Parents of the elements of one tree given by preorder depths.

    >>> tree_parents([1, 2, 3, 2])
    [-1, 0, 1, 0]
    """
    # at[d] is the latest element seen at depth d: in preorder that is the open
    # element at depth d, the parent of the next element at depth d + 1.
    at = [-1] * (max(depths, default=0) + 1)
    parents: list[int] = []
    add = parents.append
    for i, d in enumerate(depths):
        add(at[d - 1])
        at[d] = i
    return parents


def subtree_ends(parents: Sequence[int]) -> list[int]:
    """Per element, one past its last descendant, from the preorder parents.

    >>> subtree_ends([-1, 0, 1, 0])
    [4, 3, 3, 4]
    """
    n = len(parents)
    ends = list(range(1, n + 1))
    # A subtree ends where its last child's does. Going backwards, children come
    # before their parent and the last child first: it is the one that finds its
    # parent's end still unset.
    for i, p in zip(range(n - 1, 0, -1), reversed(parents)):
        if ends[p] == p + 1:
            ends[p] = ends[i]
    return ends
