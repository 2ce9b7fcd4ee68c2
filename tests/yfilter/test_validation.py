"""yfilter.validate refuses exactly what an engine refuses (the registration service used
to add every profile to a fresh Engine to validate it; now it calls validate), and what
it accepts a broker accepts too (its routing query and what it reads of a message)."""

from __future__ import annotations

import ast as pyast
import random
from pathlib import Path

import pytest

from routing.dnf import map_profile
from routing.incremental import need
from yfilter import Engine, ProfileError, validate
from yfilter.generators import ProfileGenerator, Schema
from yfilter.parser import MAX_NESTING

HERE = Path(__file__).resolve().parent
# Every string constant of the tests of the profile language: the refused profiles of
# their tables (with the message and column each must get), and accepted ones.
SOURCES = ["test_parser.py", "test_flwr.py", "test_steps.py", "test_engine_basic.py",
           "test_semantics.py"]
BAD = [
    "", " ", "/", "//", "/a[", "/a]", "/a[]", "/a[@]", "/a[@b=]", "/a['x']", "/a[1 and 2]", "/a/..", "/a/.",
    "a/b", "/a | /b", "/a/parent::b", "/a/b::c", "/a[b = c]", "/a[position()]", "/a[text() = ]",
    "/a[contains(@b)]", "/a[starts-with(@b, 'x', 'y')]", "/a[count(b) = 1]", "/a[@b = 'x]", '/a[@b = "x]',
    "$m/a", "$msg", "$msg/", "/p:a", "/a[@*]", "/a[1e3]", "/a#", "/a[b + 1 = 2]", "/a[. = 'x'", "/@a", "/text()",
    "//@a", "/a//@b", "/a/b[not()]", "/a/b[not(@c]",
    "for $n in $msg/nitf", "for $n in $msg/nitf return", "for $n in $msg/nitf return x",
    "for $msg in $msg/nitf return <r/>", "for $n in /nitf/@a return <r/>", "for $n in $msg/nitf return <r>",
    "for $n in $msg/nitf return <r></s>", "for $n in $msg/nitf return <r>{$m/a}</r>",
    "for $n in $msg/nitf return <r>{/a}</r>", "for $n in $msg/nitf return <r>{$n/a => nope()}</r>",
    "for $n in $msg/nitf return <r>{$n/a => drop()}</r>", "for $n in $msg/nitf return <r>{$n/a => rename('x')}</r>",
    "for $n in $msg/nitf return <r>{$n/a => project('/x')}</r>", "for $n in $msg/nitf where return <r/>",
    "for $n in $msg/nitf let $x := 1 return <r/>", "for $n in $msg/nitf return <r a='{$n/b => drop(\"c\")}'/>",
    "for $n in $msg/nitf return <r xmlns='u'/>", "for $n in $msg/nitf return <p:r/>", "for $n in $msg/nitf return <r/><s/>",
    "for $n in $msg/nitf where $n/a = 'x&y' return <r/>", "for $n in $msg/nitf (: c :) return <r/>",
    "for $n in $msg/nitf, $m in $msg/x return <r/>",
    "/a" + "[b" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1),
    "/a[" + "not(" * (MAX_NESTING + 1) + "b" + ")" * (MAX_NESTING + 1) + "]",
    "/a[" + "(" * 2000 + "b" + ")" * 2000 + "]",
    "for $n in $msg/a return " + "<r>" * (MAX_NESTING + 2) + "</r>" * (MAX_NESTING + 2),
    "for $n in $msg/a where " + "(" * 500 + "$n/b" + ")" * 500 + " return <r/>",
]


def _string_constants(path: Path) -> set[str]:
    tree = pyast.parse(path.read_text())
    return {n.value for n in pyast.walk(tree) if isinstance(n, pyast.Constant) and isinstance(n.value, str)
            and len(n.value) < 2000}


def _engine_refuses(text: str) -> bool:
    """The old validation of the registration service."""
    try:
        Engine().add("validation", text)
    except (ProfileError, RecursionError):
        return True
    return False


def _validate_refuses(text: str) -> bool:
    try:
        validate(text)
    except ProfileError as err:
        assert str(err)  # always a message, with its column where there is a position
        return True
    return False


def _mutants(texts: list[str], n: int, seed: int) -> list[str]:
    """Seeded damage to good profiles: a character dropped, doubled or replaced by one of
    the language's special characters, or the text cut short."""
    rng = random.Random(seed)
    specials = list("[]()/@*.=<>!'\"{}$,|&:; ") + ["//", "::", " and ", " or ", "not(", "text()", "return", "<x>"]
    out = []
    for _ in range(n):
        t = rng.choice(texts)
        if not t:
            continue
        i = rng.randrange(len(t))
        kind = rng.randrange(4)
        if kind == 0:
            out.append(t[:i] + t[i + 1:])
        elif kind == 1:
            out.append(t[:i] + t[i] + t[i:])
        elif kind == 2:
            out.append(t[:i] + rng.choice(specials) + t[i + 1:])
        else:
            out.append(t[:i])
    return out


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    texts = set(BAD)
    for name in SOURCES:
        texts |= _string_constants(HERE / name)
    generated = ProfileGenerator(Schema.nitf(), n_preds=(0, 2), p_star=0.1, p_desc=0.3, seed=7).batch(300)
    flwr = [t for t in texts if t.lstrip().startswith("for $")]
    texts |= set(generated)
    texts |= set(_mutants(sorted(texts) + generated + flwr * 3, 4000, seed=11))
    return sorted(texts)


def test_validate_refuses_exactly_what_an_engine_refuses(corpus):
    refused_by_engine = {t for t in corpus if _engine_refuses(t)}
    refused_by_validate = {t for t in corpus if _validate_refuses(t)}
    assert len(refused_by_engine) > 1000 and len(corpus) - len(refused_by_engine) > 1000  # both kinds, many
    assert set(BAD) <= refused_by_validate
    assert refused_by_engine - refused_by_validate == set()
    assert refused_by_validate - refused_by_engine == set()


def test_what_validate_accepts_a_broker_can_map_and_project(corpus):
    for text in corpus:
        if not _validate_refuses(text):
            map_profile(text)  # the routing query a host broker sends up (routing.node.Node.query)
            need(text)  # what the profile reads of a message (routing.incremental)


@pytest.mark.parametrize("text, message", [
    ("/nitf/head/parent::x", "unsupported axis 'parent::' at column 12"),
    ("/a" + "[b" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1),
     f"conditions nested more than {MAX_NESTING} deep (predicates, parentheses, not()) are not supported "
     f"at column {3 + 2 * MAX_NESTING + 1}"),
    ("for $n in $msg/a return " + "<r>" * (MAX_NESTING + 2) + "</r>" * (MAX_NESTING + 2),
     f"constructors nested more than {MAX_NESTING} deep are not supported at column {25 + 3 * (MAX_NESTING + 1)}"),
])
def test_refusals_name_the_position(text, message):
    with pytest.raises(ProfileError) as info:
        validate(text)
    assert str(info.value) == message
    with pytest.raises(ProfileError) as info:
        Engine().add("x", text)
    assert str(info.value) == message


def test_nesting_up_to_the_limit_is_accepted():
    validate("/a" + "[b" * MAX_NESTING + "]" * MAX_NESTING)
    validate("for $n in $msg/a return " + "<r>" * (MAX_NESTING + 1) + "</r>" * (MAX_NESTING + 1))
