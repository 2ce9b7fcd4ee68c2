"""Conditions applied to items with lxml: an item is an XML document (what the source
returned for it) that belongs to ``concept[condition]`` when XPath's
``boolean(concept[condition])`` is true on it (for ``/painting`` items that is the
painting itself; for archived messages, "some ``/nitf/head/pubdata`` of the message").
This is the probe of the thesis (section 5.2: the query applied to a region's data) and
how remainder data is assigned to the new regions (section 5.5).

>>> probe = Probe("/painting", "@year <= 1800")
>>> probe(parse_item(b"<painting year='1750'/>")), probe(parse_item(b"<painting/>"))
(True, False)
>>> parse_item(b"<painting") is None
True
"""

from __future__ import annotations

from lxml import etree

from yfilter.document import parse_xml
from yfilter.errors import MessageError


def parse_item(xml: bytes) -> etree._Element | None:
    """The item's tree (parsed as untrusted input: no DTD, no entities, no network), or
    ``None`` when it is not well-formed XML (it then belongs to no region)."""
    try:
        return parse_xml(xml)
    except MessageError:
        return None


class Probe:
    """``boolean(concept[condition])`` compiled once."""

    __slots__ = ("_xpath",)

    def __init__(self, concept: str, condition: str) -> None:
        self._xpath = etree.XPath(f"boolean({concept}[{condition}])")

    def __call__(self, root: etree._Element | None) -> bool:
        return root is not None and bool(self._xpath(root))
