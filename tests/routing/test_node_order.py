"""ONYX 4.3.1's dependency-aware priority in one broker (:class:`routing.node.Node`): a
link's transformation runs only for links the message is routed down,
and the local profiles come after every forward."""

from routing.node import Forward, Node
from routing.overlay import builtin
from routing.incremental import Transformation, need
from routing.table import Delta

T = "for $t in $msg/a/t return <t>{$t/text()}</t>"
U = "for $u in $msg/a/u return <u>{$u/text()}</u>"


def _b4() -> Node:
    """b4 of figure4 with a transformation profile below each of its links (b5, b6) and one
    of its own."""
    node = Node("b4", builtin("figure4"), bandwidth=1e4)
    for link, text in (("b5", T), ("b6", U)):
        node.collect("b1", link, Delta(f"q{link}", 1, node.query(text), need(text)))
    node.host("own", 1, T)
    return node


def test_a_link_not_routed_to_is_never_transformed(monkeypatch):
    node = _b4()
    cut = []
    real = Transformation.apply
    monkeypatch.setattr(Transformation, "apply", lambda self, m: cut.append(self.target) or real(self, m))
    forwards = node.forwards("b1", b"<a><t>x</t><b>long text</b></a>")
    assert [f.link for f in forwards] == ["b5"]
    assert cut == [node.tables["b1"].projection("b5")]  # b6's transformation never ran
    cut.clear()
    assert node.forwards("b1", b"<a><b>long text</b></a>") == [] and cut == []


def test_process_yields_every_forward_before_any_local_result():
    node = _b4()
    out = list(node.process("b1", b"<a><t>x</t><u>y</u><b>long text</b></a>"))
    kinds = [isinstance(o, Forward) for o in out]
    assert kinds == [True, True, False]
    assert [o.link for o in out[:2]] == ["b5", "b6"] and out[2] == ("own", [b"<t>x</t>"])
