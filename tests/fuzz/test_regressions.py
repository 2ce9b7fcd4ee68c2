"""What fuzzing found, one test each, with the input it found (the inputs are also in
the corpus, ``tests/fuzz/corpus/<target>/regress-*``, so every fuzzing run starts
from them). Before each fix the input crashed registration or matching with an
exception other than ProfileError / MessageError / FormatError, or took more than the
per-input CPU limit (:mod:`tests.fuzz.limit`, which these tests hold them to as well)."""

from __future__ import annotations

import pytest

import formats
from formats import FormatError, Message
from bench.schema import ADVERSARIAL
from tests.fuzz import run
from tests.fuzz.limit import within_limit
from tests.fuzz.targets import TARGETS
from yfilter import Engine, ProfileError, validate


def _refused(text: str) -> ProfileError:
    """The error validate and Engine.add (both runtimes) refuse ``text`` with."""
    with pytest.raises(ProfileError) as info:
        validate(text)
    for runtime in Engine.RUNTIMES:
        with pytest.raises(ProfileError) as added:
            Engine(runtime=runtime).add("p", text)
        assert (str(added.value), added.value.column) == (str(info.value), info.value.column)
    return info.value


def test_lone_surrogate_in_a_profile_is_a_profile_error() -> None:
    # Was UnicodeEncodeError from the C matcher's intern() at Engine.add (validate
    # accepted it): no UTF-8 form. A JSON body's "\udcf5" escape gives such a str.
    err = _refused("//em[. = '\udcf5p']")
    assert err.column == 11 and "lone surrogate" in str(err)
    assert _refused("for $n in $msg/a return <r>\ud800</r>").column == 28


@pytest.mark.parametrize("text, column", [
    ("for $n in $msg/nitf return <r>{$n/body/p}\x01</r>", 42),
    ("for $n in $msg/nitf return <r a='x\x00'/>", 35),
])
def test_control_character_in_a_constructor_is_a_profile_error(text: str, column: int) -> None:
    # Was accepted, then every matching message raised ValueError from lxml while the
    # result was built (Engine.run): the character cannot be written in XML.
    err = _refused(text)
    assert err.column == column and "not allowed in XML" in str(err)


@pytest.mark.parametrize("text, column", [("//met\x1c[@content > 0]", 6), ("/a\xa0/b", 3),
                                          ("\x85for $n in $msg/a return <r/>", 1)])
def test_only_xpath_whitespace_separates_tokens(text: str, column: int) -> None:
    # Python's \s also matched \x1c-\x1f, \x85, \xa0, ...: profiles that are no XPath
    # (lxml refuses them) were accepted.
    assert _refused(text).column == column
    assert Engine().add("p", "/a \t\r\n/b") is None


@pytest.mark.parametrize("text", ["//p[position() > ''][@x]", "/a[position() = " + "1" * 400 + "]",
                                  "/a[@x < " + "1" * 400 + "]", "/a[" + "9" * 400 + "]"])
def test_nan_and_infinite_numbers_compile(text: str) -> None:
    # Was ValueError (NaN) / OverflowError (a 400-digit literal) from the canonical
    # text of the number, at validate and Engine.add.
    validate(text)
    native, python = Engine(), Engine(runtime="python")
    for engine in (native, python):
        engine.add("p", text)
    for xml in (b"<a x='1'><p x='2'/><p x='3'/></a>", b"<a/>"):
        assert native.match(xml) == python.match(xml)


def test_nan_position_never_holds() -> None:
    engine = Engine()
    engine.add("p", "//p[position() > '']")
    assert engine.match(b"<a><p/><p/></a>") == frozenset()


@pytest.mark.parametrize("text, column", [
    ("//*[starts-withhaae/temd/@name = 'a']//p[e!=(@name< 'a')]", 45),
    ("/a[(b = 1) = c]", 4),
    ("for $n in $msg/a where $n/b = ($n/c = 1) return <r/>", 31),
])
def test_a_parenthesised_comparison_is_not_compared(text: str, column: int) -> None:
    # Was AttributeError in the compiler: a comparison in parentheses went through as
    # an operand of another comparison.
    err = _refused(text)
    assert err.column == column and "cannot be compared" in str(err)


def test_every_regression_input_is_in_the_corpus() -> None:
    found = sorted(p.name for p in run.CORPUS.glob("*/regress-*"))
    assert found, "the inputs fuzzing found belong in the corpus"
    for path in run.CORPUS.glob("*/regress-*"):
        TARGETS[path.parent.name](path.read_bytes())


def test_an_element_without_namespace_inside_a_default_namespace_is_not_serialized() -> None:
    # A stream payload (found by the payload target) whose root 'x' has no namespace
    # but declares xmlns="urn:n": to_xml wrote <x xmlns="urn:n">, which reads back as
    # {urn:n}x, so the XML a broker forwarded was not the message it matched. The
    # same for a child without namespace under a parent's default namespace.
    blob = (run.CORPUS / "payload" / "regress-unnamespaced-in-default-namespace").read_bytes()[2:]
    msg = formats.decode("stream", blob)
    assert msg.tags[0] == "x" and msg.nsmaps[0] == {None: "urn:n"}
    with pytest.raises(FormatError, match=r"element 0 \('x'\) has no namespace inside the default namespace"):
        msg.to_xml()
    child = Message(["{urn:n}a", "b"], [1, 2], nsmaps=[{None: "urn:n"}, {}], texts=["", ""], tails=["", ""])
    with pytest.raises(FormatError, match=r"element 1 \('b'\) has no namespace"):
        child.to_xml()
    # An undeclared default namespace (xmlns="") is what XML says for that.
    xml = b'<a xmlns="urn:u"><b xmlns=""><c/></b></a>'
    assert Message.from_xml(xml).to_xml() == xml


def test_a_schema_with_a_lone_surrogate_is_a_format_error() -> None:
    # Was UnicodeEncodeError from str.encode in schema_names (POST /sources answered
    # 500): a JSON body's "\udcff" escape gives such a str.
    text = (run.CORPUS / "schema" / "regress-lone-surrogate").read_bytes().decode("utf-8", "surrogateescape")
    with pytest.raises(FormatError, match="lone surrogate"):
        formats.learn_dictionary("s", [], schema=text, train_zstd=False)


@pytest.mark.parametrize("kind", ADVERSARIAL)
def test_adversarial_dtds_are_read_within_the_limit(kind: str) -> None:
    # The reported attack and its kin (bench.schema.ADVERSARIAL): the regular
    # expressions that read DTDs backtracked, 0.2 s of CPU on the 4 KB corpus input
    # (regress-attlist-name-without-gt), 0.4-50 s on most of these at 64 KB;
    # formats.dtd reads each in under 10 ms (bench.schema).
    data = ADVERSARIAL[kind](64_000)
    within_limit(lambda: formats.schema_names(data))


def test_many_attributes_in_a_constructor_are_parsed_within_the_limit() -> None:
    # Found measuring validate at the service's profile cap (100,000 characters),
    # beyond the inputs libFuzzer makes up: each attribute of a FLWR constructor was
    # checked against the ones before it by a scan (these 80,000 characters: 0.8 s of
    # CPU, 20 ms now).
    text = "for $n in $msg/a return <r " + " ".join(f"a{i}=''" for i in range(9000)) + "/>"
    within_limit(lambda: validate(text))
    assert _refused("for $n in $msg/a return <r a='' b='' a=''/>").column == 38
