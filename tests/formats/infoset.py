"""Infoset comparison for round-trip tests: Clark names, attributes, character data
and order, from an lxml tree (comments and PIs skipped, their tails kept) or a
:class:`formats.Message`. Namespace prefixes are not compared: a document that binds
one URI to two prefixes may come back with the other prefix (same infoset)."""

from __future__ import annotations

from lxml import etree

from formats import Message
from formats.message import parse_xml


def infoset(node: etree._Element | Message | bytes) -> tuple:
    """A nested, comparable form of a document's element infoset."""
    if isinstance(node, Message):
        node = node.to_element()
    elif isinstance(node, (bytes, str)):
        node = parse_xml(node)
    content: list = []

    def add_text(s: str | None) -> None:
        if not s:
            return
        if content and isinstance(content[-1], str):
            content[-1] += s
        else:
            content.append(s)

    add_text(node.text)
    for child in node:
        if isinstance(child.tag, str):
            content.append(infoset(child))
        add_text(child.tail)
    return (node.tag, dict(node.attrib), tuple(content))


def table(m: Message) -> tuple:
    """Every column of the element table, for exact comparisons."""
    return (m.tags, m.depths, m.attrs, m.texts, m.tails, m.ends, m.parents, m.nsmaps)


def check_invariants(m: Message) -> None:
    """The table is one well-formed preorder tree (what the engine relies on)."""
    n = len(m.tags)
    assert n >= 1
    assert all(len(col) == n for col in table(m))
    assert m.depths[0] == 1 and m.parents[0] == -1 and m.ends[0] == n
    for i in range(1, n):
        p = m.parents[i]
        assert 0 <= p < i and m.depths[i] == m.depths[p] + 1
        assert i < m.ends[i] <= m.ends[p]
    for i in range(n):
        assert m.ends[i] == next((j for j in range(i + 1, n) if m.depths[j] <= m.depths[i]), n)
        assert all(isinstance(s, str) for s in (m.tags[i], m.texts[i], m.tails[i]))
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in m.attrs[i].items())
