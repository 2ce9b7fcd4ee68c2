"""The small AST of filtering profiles.

Names are resolved at parse time: element and attribute names are Clark names
(``'{uri}local'`` or ``'local'``), ``'*'`` is the wildcard. Every node can print
itself back as XPath text (``str(node)``); that text, with names in Clark form, is
the canonical key under which identical profiles share everything.

>>> from yfilter.parser import parse
>>> str(parse("$msg/nitf [ head/pubdata/@edition.area = 'SF' ]"))
"/nitf[head/pubdata/@edition.area = 'SF']"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

CHILD = "/"
DESCENDANT = "//"


def quote(s: str) -> str:
    """XPath string literal for ``s`` (XPath 1.0 has no escapes; pick the free quote)."""
    return f"'{s}'" if "'" not in s else f'"{s}"'


def number_text(x: float) -> str:
    """A number as canonical text: an integer without ``.0``; otherwise Python's repr,
    also for the infinities (a literal of 309 digits) and NaN (``position() > ''``),
    which have no integer form.

    >>> number_text(3.0), number_text(0.5), number_text(float("inf")), number_text(float("nan"))
    ('3', '0.5', 'inf', 'nan')
    """
    return str(int(x)) if abs(x) < 1e15 and x == int(x) else repr(x)


@dataclass(frozen=True, slots=True)
class Literal:
    value: str

    def __str__(self) -> str:
        return quote(self.value)


@dataclass(frozen=True, slots=True)
class Number:
    value: float

    def __str__(self) -> str:
        return number_text(self.value)


@dataclass(frozen=True, slots=True)
class Position:
    def __str__(self) -> str:
        return "position()"


@dataclass(frozen=True, slots=True)
class Step:
    """One location step: ``axis`` is ``'/'`` (child) or ``'//'`` (descendant-or-self
    then child), ``test`` a Clark name or ``'*'``."""

    axis: str
    test: str
    preds: tuple["Expr", ...] = ()

    def __str__(self) -> str:
        return self.axis + self.test + "".join(f"[{p}]" for p in self.preds)


@dataclass(frozen=True, slots=True)
class AttrTail:
    name: str

    def __str__(self) -> str:
        return "@" + self.name


@dataclass(frozen=True, slots=True)
class TextTail:
    def __str__(self) -> str:
        return "text()"


Tail = Union[AttrTail, TextTail, None]


@dataclass(frozen=True, slots=True)
class RelPath:
    """A path relative to the context element: ``steps`` (possibly none, meaning
    ``.``) and an optional final ``@a`` / ``text()``."""

    steps: tuple[Step, ...]
    tail: Tail = None

    def __str__(self) -> str:
        if not self.steps:
            return str(self.tail) if self.tail is not None else "."
        first, rest = self.steps[0], self.steps[1:]
        head = (".//" if first.axis == DESCENDANT else "") + str(first)[len(first.axis):]
        out = head + "".join(str(s) for s in rest)
        return out + (f"/{self.tail}" if self.tail is not None else "")


@dataclass(frozen=True, slots=True)
class Path:
    """An absolute path (a whole filtering profile)."""

    steps: tuple[Step, ...]
    tail: Tail = None

    def __str__(self) -> str:
        out = "".join(str(s) for s in self.steps)
        return out + (f"/{self.tail}" if self.tail is not None else "")


@dataclass(frozen=True, slots=True)
class Call:
    """``contains(a, b)`` or ``starts-with(a, b)``."""

    name: str
    args: tuple["Operand", ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


Operand = Union[RelPath, Literal, Number, Position, Call]


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Operand
    right: Operand

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True, slots=True)
class Not:
    item: "Expr"

    def __str__(self) -> str:
        return f"not({self.item})"


@dataclass(frozen=True, slots=True)
class And:
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return " and ".join(f"({i})" if isinstance(i, Or) else str(i) for i in self.items)


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return " or ".join(str(i) for i in self.items)


# A predicate expression. A bare Number is only valid as a whole predicate ([2]).
Expr = Union[Or, And, Not, Compare, RelPath, Call, Number]
