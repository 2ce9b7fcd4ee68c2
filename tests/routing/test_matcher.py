"""The atom engine of routing tables (:mod:`routing.matcher`)."""

from routing.matcher import AtomEngine, LinkMatcher


def test_warm_builds_what_routing_needs_even_when_no_atom_is_lazy(monkeypatch):
    """Single-atom conjunctions (transformation profiles' for paths) make no lazy atom;
    a worker warms its copies before freezing them, and the first message routed
    afterwards must not build the engine (issue 41)."""
    engine = AtomEngine()
    links = LinkMatcher(engine)
    links.add("b5", frozenset({"/nitf/head/title"}))
    links.add("b6", frozenset({"/nitf/body"}))
    engine.warm()
    assert engine.built
    builds = []
    real = AtomEngine._build
    monkeypatch.setattr(AtomEngine, "_build", lambda self: builds.append(1) or real(self))
    assert links.route(b"<nitf><head><title>t</title></head></nitf>") == {"b5"}
    assert builds == []
