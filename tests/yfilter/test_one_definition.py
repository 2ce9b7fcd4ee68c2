"""Opcodes and number semantics are defined once (yfilter/csrc: matcher.c's enums,
number.c's xpath_number) and read from there by the Python side; here they are
checked against each other, against a Python transcription of libxml2's
``xmlXPathStringEvalNumber`` and against lxml itself."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from yfilter import _matcher, native, values
from yfilter.compiler import Registry, compile_path
from yfilter.operators import (Always, AndP, AttrTest, Func, Nested, NotP, OrP, PosTest,
                               SelfTest, TextTest)
from yfilter.parser import parse

NAN = float("nan")
_BLANK = " \t\n\r"
MAX_FRAC = 20
_NUMBER = re.compile(r"(-?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]*))?$")


def transcribed_number(s: str) -> float:
    """libxml2's xmlXPathStringEvalNumber, transcribed (what yfilter.values.number
    was in Python before it became number.c's)."""
    m = _NUMBER.match(s.strip(_BLANK))
    if m is None:
        return NAN
    sign, whole, frac, esign, exp = m.groups()
    if not whole and not frac:
        return NAN
    ret = 0.0
    for ch in whole:
        ret = ret * 10 + (ord(ch) - 48)
    if frac:
        digits = frac.lstrip("0")
        n = len(frac) - len(digits)
        fraction = 0.0
        for ch in digits[:MAX_FRAC]:
            fraction = fraction * 10 + (ord(ch) - 48)
        n += min(len(digits), MAX_FRAC)
        ret += fraction / 10.0**n
    if exp is not None:
        e = min(int(exp), 1000000) if exp else 0
        e = -e if esign == "-" else e
        try:
            scale = 10.0**e
        except OverflowError:
            scale = float("inf")
        ret = ret * scale
    return -ret if sign else ret


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


_ROOT = etree.fromstring(b"<r/>")
_LXML_NUMBER = etree.XPath("number($s)")

_NUMERIC = st.text(alphabet="0123456789.-+eE \t\n\u0663x", max_size=30)


@settings(max_examples=2000, deadline=None)
@given(s=st.one_of(_NUMERIC, st.text(max_size=12),
                   st.builds(lambda w, f: f"{w}.{f}", st.integers(0, 10**30),
                             st.text(alphabet="0123456789", max_size=40))))
def test_number_is_one_function_and_agrees_with_libxml2(s):
    assert values.number is _matcher.number  # one definition, both runtimes call it
    got = values.number(s)
    assert _same(got, transcribed_number(s)), s
    try:
        lx = _LXML_NUMBER(_ROOT, s=s)
    except ValueError:  # a string XML cannot hold (a control character): no message has it
        return
    assert _same(got, lx), s


def test_named_numbers():
    for s, x in [("  12 ", 12.0), ("1e3", 1000.0), ("+1", NAN), ("1.5e-1", 0.15000000000000002),
                 ("", NAN), ("-.", NAN), ("-0.5", -0.5), ("\u0663", NAN), ("1e999999999", math.inf)]:
        assert _same(values.number(s), x) and _same(transcribed_number(s), x), s


def test_codes_come_from_the_c_module():
    codes = _matcher.CODES
    assert values.RELATIONS == codes["rel"] and set(values.RELATIONS) == set(values.OPS)
    assert native.AXES == codes["axis"] and native.FUNCTIONS == codes["fn"]
    ops = [native.OP_ALWAYS, native.OP_ATTR, native.OP_TEXT, native.OP_SELF, native.OP_POS,
           native.OP_NESTED, native.OP_FUNC, native.OP_NOT, native.OP_AND, native.OP_OR]
    assert ops == [codes["op"][k] for k in ("ALWAYS", "ATTR", "TEXT", "SELF", "POS", "NESTED",
                                            "FUNC", "NOT", "AND", "OR")]
    assert len(set(codes["op"].values())) == len(codes["op"])  # no two share a code
    assert [native.CMP_EXISTS, native.CMP_SEQ, native.CMP_SNE, native.CMP_NUM] == \
        [codes["cmp"][k] for k in ("EXISTS", "SEQ", "SNE", "NUM")]


def test_every_kind_of_predicate_has_native_code():
    """Each Pred class the compiler makes is emitted with its opcode."""
    seen: dict[type, int] = {}
    index = native.NativeIndex()
    real = index._m.emit

    def spy(words):
        seen.setdefault(type(current[-1]), words[0])
        return real(words)

    current = []
    index._m = type("M", (), {})()
    for name in ("intern", "add_number", "add_guard", "add_rel", "add_query"):
        setattr(index._m, name, getattr(real.__self__, name))
    index._m.emit = spy
    orig = index._pred

    def pred(p):
        current.append(p)
        try:
            return orig(p)
        finally:
            current.pop()

    index._pred = pred
    for text in ["/a[@x = '1']", "/a[text() = 'v']", "/a[. = 'v']", "/a[.]", "/a[2]",
                 "/a[b]", "/a[contains(., 'x')]", "/a[not(@x)]", "/a[@x and @y]",
                 "/a[@x or @y]", "/a[@x > 2]"]:
        index.add(compile_path(parse(text), Registry(), {}), {text})
    expected = {AttrTest: native.OP_ATTR, TextTest: native.OP_TEXT, SelfTest: native.OP_SELF,
                Always: native.OP_ALWAYS, PosTest: native.OP_POS, Nested: native.OP_NESTED,
                Func: native.OP_FUNC, NotP: native.OP_NOT, AndP: native.OP_AND, OrP: native.OP_OR}
    assert {k: seen.get(k) for k in expected} == expected
