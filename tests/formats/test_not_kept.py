"""What a round trip does not keep, as documented in formats.message: comments,
processing instructions, the DOCTYPE and the XML declaration. The text around a
dropped comment or PI stays, joined; CDATA sections become plain text."""

from __future__ import annotations

import pytest

import formats

DOC = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<!DOCTYPE nitf>\n"
    b"<!-- before the root -->\n"
    b"<nitf><!-- inside -->a<?pi data?>b<p>x<!--c-->y</p><!--d-->z<![CDATA[<&>]]></nitf>\n"
    b"<?after the root?>"
)
EXPECTED = b"<nitf>ab<p>xy</p>z&lt;&amp;&gt;</nitf>"


@pytest.mark.parametrize("name", formats.available())
def test_comments_pis_doctype_and_declaration_are_not_kept(name, small_dictionary) -> None:
    decoded = formats.decode(name, formats.encode(name, DOC, dictionary=small_dictionary), dictionary=small_dictionary)
    out = decoded.to_xml()
    assert out == EXPECTED
    for construct in (b"<!--", b"<?", b"<!DOCTYPE", b"CDATA"):
        assert construct not in out


def test_the_module_documents_what_is_not_kept() -> None:
    doc = formats.message.__doc__ + formats.__doc__
    for construct in ("comments", "processing instructions", "DOCTYPE", "XML declaration"):
        assert construct in doc


def test_entity_declarations_are_refused_not_expanded() -> None:
    bomb = b'<!DOCTYPE a [<!ENTITY e "xxxxxxxx"><!ENTITY f "&e;&e;&e;&e;">]><a>&f;</a>'
    for name in formats.available():
        if name.startswith("text"):
            with pytest.raises(formats.FormatError):
                formats.decode(name, formats.encode(name, bomb))
        else:
            with pytest.raises(formats.FormatError):
                formats.encode(name, bomb)
