"""lxml as the oracle: each profile evaluated one by one as ``boolean(xpath)``."""

from __future__ import annotations

import weakref

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


_PYTHON: "weakref.WeakKeyDictionary[Engine, tuple[dict, Engine]]" = weakref.WeakKeyDictionary()


def python_twin(engine: Engine) -> Engine:
    """An engine on the Python runtime with the same profiles as ``engine`` (kept
    while ``engine`` lives and its profiles stay the same)."""
    profiles = {pid: engine.profile(pid) for pid in engine.ids()}
    if engine.runtime == "python":
        return engine
    known = _PYTHON.get(engine)
    if known is None or known[0] != profiles:
        twin = Engine(engine._namespaces, runtime="python")
        twin.add_many(profiles)
        _PYTHON[engine] = known = (profiles, twin)
    return known[1]


def disagreements(engine: Engine, profiles: dict[str, str], xml: bytes,
                  namespaces: dict[str, str] | None = None) -> list[tuple]:
    """(profile, lxml, engine on the bytes, the Python runtime on the bytes, lxml on
    the Message, engine on the Message, the Python runtime on the Message) for every
    profile where the engine or the Python runtime differs from lxml.

    The bytes go through the engine (the C matcher, yfilter.native, on lxml's tree,
    without and with a session: the same runtime either way) and through an engine on
    the Python runtime with the same profiles (:func:`python_twin`). The decoded
    Message goes through the C matcher on its columns and the Python runtime on its
    table. Its oracle is lxml on the Message's own XML: a Message keeps no comments,
    so text split by one is merged there."""
    python = python_twin(engine)
    expected = lxml_matches(profiles, xml, namespaces)
    got_bytes = engine.match(xml)
    assert engine.match(xml, engine.start(xml)) == got_bytes  # a session changes nothing
    got_python = python.match(xml)
    msg = Message.from_xml(xml)
    expected_msg = lxml_matches(profiles, msg.to_xml(), namespaces)
    got_msg = engine.match(msg)
    assert engine.match(msg, engine.start(msg)) == got_msg
    got_msg_python = python.match(msg)
    out = []
    for pid in sorted((expected ^ got_bytes) | (expected ^ got_python) | (expected_msg ^ got_msg)
                      | (expected_msg ^ got_msg_python)):
        out.append((profiles[pid], pid in expected, pid in got_bytes, pid in got_python,
                    pid in expected_msg, pid in got_msg, pid in got_msg_python))
    return out
