"""lxml as the oracle: each profile evaluated one by one as ``boolean(xpath)``."""

from __future__ import annotations

from lxml import etree

from formats import Message
from yfilter import Engine


def strip_msg(profile: str) -> str:
    return profile[4:] if profile.startswith("$msg") else profile


def lxml_matches(profiles: dict[str, str], xml: bytes,
                 namespaces: dict[str, str] | None = None) -> frozenset[str]:
    root = etree.fromstring(xml)
    out = set()
    for pid, text in profiles.items():
        if etree.XPath(f"boolean({strip_msg(text)})", namespaces=namespaces or {})(root):
            out.add(pid)
    return frozenset(out)


def disagreements(engine: Engine, profiles: dict[str, str], xml: bytes,
                  namespaces: dict[str, str] | None = None) -> list[tuple]:
    """(profile, lxml, engine on the bytes, engine's Python runtime on the bytes, lxml
    on the Message, engine on the Message, its Python runtime on the Message) for every
    profile where the engine differs from lxml.

    The bytes go through the C matcher (yfilter.native) on lxml's tree and, in a
    session, through the Python runtime. The decoded Message goes through the C matcher
    on its columns and, in a session, through the Python runtime on its table. Its
    oracle is lxml on the Message's own XML: a Message keeps no comments, so text split
    by one is merged there."""
    expected = lxml_matches(profiles, xml, namespaces)
    got_bytes = engine.match(xml)
    got_python = engine.match(xml, engine.start(xml))
    msg = Message.from_xml(xml)
    expected_msg = lxml_matches(profiles, msg.to_xml(), namespaces)
    got_msg = engine.match(msg)
    got_msg_python = engine.match(msg, engine.start(msg))
    out = []
    for pid in sorted((expected ^ got_bytes) | (expected ^ got_python) | (expected_msg ^ got_msg)
                      | (expected_msg ^ got_msg_python)):
        out.append((profiles[pid], pid in expected, pid in got_bytes, pid in got_python,
                    pid in expected_msg, pid in got_msg, pid in got_msg_python))
    return out
