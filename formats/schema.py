"""Element and attribute names declared by a source's schema (DTD or XML Schema),
the seed of its :class:`formats.Dictionary`.

Only names are read: no DTD entity is expanded and no ``xs:include``/``xs:import``
is followed, so names hidden behind parameter entities or other schema documents
are learned from messages instead (or escaped inline).

>>> schema_names(b'<!ELEMENT nitf (head, body)> <!ATTLIST nitf version CDATA #IMPLIED>')
['nitf', 'version']
"""

from __future__ import annotations

from formats.dtd import attlist_bodies, attribute_names, element_names
from formats.errors import FormatError
from formats.message import parse_xml
from formats.names import check_name

_XS = "{http://www.w3.org/2001/XMLSchema}"
_XML_NS = "{http://www.w3.org/XML/1998/namespace}"


def schema_names(schema: bytes | str) -> list[str]:
    """Clark names declared by a DTD or an XML Schema document, in declaration order,
    without duplicates. Names that cannot be given a namespace (DTD prefixes other
    than ``xml:``) are left out. Reading takes time linear in the schema's length
    (:mod:`formats.dtd`; lxml for XML Schema), whatever the text: it is untrusted.

    >>> schema_names("<!ELEMENT \\udcff ANY>")
    Traceback (most recent call last):
    ...
    formats.errors.FormatError: schema text holds a lone surrogate ('\\udcff' at character 11): no Unicode text does
    """
    data = _utf8(schema) if isinstance(schema, str) else bytes(schema)
    if data.lstrip().startswith((b"<!", b"<?xml")) and b"<!ELEMENT" in data:
        names = _dtd_names(data)
    else:
        names = _xsd_names(data)
    return list(dict.fromkeys(names))


def _utf8(text: str) -> bytes:
    # A JSON body's "\ud800" escape makes such a str; it has no UTF-8 form.
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ascii(text[exc.start])
        raise FormatError(f"schema text holds a lone surrogate ({bad} at character {exc.start + 1}): "
                          "no Unicode text does") from None


def _dtd_names(data: bytes) -> list[str]:
    found = element_names(data)
    for body in attlist_bodies(data):
        found.extend(attribute_names(body))
    names = []
    for raw in found:
        name = raw.decode("utf-8", "replace")
        if name.startswith("xml:"):
            name = _XML_NS + name[4:]
        try:
            names.append(check_name(name))
        except FormatError:
            continue  # a parameter entity or a prefixed name: not a name we can code
    return names


def _xsd_names(data: bytes) -> list[str]:
    root = parse_xml(data)
    if root.tag != _XS + "schema":
        raise FormatError("schema is neither a DTD nor an XML Schema (xs:schema) document")
    target = root.get("targetNamespace")
    defaults = {
        _XS + "element": root.get("elementFormDefault", "unqualified"),
        _XS + "attribute": root.get("attributeFormDefault", "unqualified"),
    }
    names = []
    for decl in root.iter(_XS + "element", _XS + "attribute"):
        local = decl.get("name")
        if local is None:
            continue  # a reference (ref="...") to a declaration seen elsewhere
        is_global = decl.getparent() is root
        qualified = is_global or decl.get("form", defaults[decl.tag]) == "qualified"
        name = f"{{{target}}}{local}" if qualified and target else local
        try:
            names.append(check_name(name))
        except FormatError:
            raise FormatError(f"schema declares an invalid name {local!r}") from None
    return names
