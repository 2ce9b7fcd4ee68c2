"""The rule language's syntax tree (paper section 2.3): ``search Extension e, ... register e
where Predicates``, an extension being a schema class or another subscription rule
(``rule(7)``), predicates comparisons ``X op Y`` of constants and paths joined by ``and`` /
``or``. Every node keeps the character offset it starts at, for :class:`~catalog.RuleError`.

>>> Path("c", (Step("serverInformation", False, 2), Step("memory", False, 20)), 0).text()
'c.serverInformation.memory'
"""

from __future__ import annotations

from dataclasses import dataclass

OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "contains")
"""Comparison operators, as section 2.3 lists them."""

ORDERED = ("<", "<=", ">", ">=")
"""Operators that compare numbers only (section 3.3.4)."""


@dataclass(frozen=True)
class Step:
    """``.name`` in a path; ``any``: written ``name?`` (the any operator on a set-valued property)."""

    name: str
    any: bool
    pos: int


@dataclass(frozen=True)
class Path:
    """A variable followed by property accesses: ``c``, ``c.serverInformation.memory``."""

    var: str
    steps: tuple[Step, ...]
    pos: int

    def text(self) -> str:
        return self.var + "".join(f".{s.name}{'?' if s.any else ''}" for s in self.steps)


@dataclass(frozen=True)
class Const:
    """A constant: ``str`` for a quoted string, ``float`` for a number."""

    value: str | float
    pos: int


@dataclass(frozen=True)
class Comparison:
    left: Path | Const
    op: str
    right: Path | Const
    pos: int


@dataclass(frozen=True)
class And:
    items: tuple


@dataclass(frozen=True)
class Or:
    items: tuple


@dataclass(frozen=True)
class Binding:
    """``Class var`` or ``rule(N) var`` in the search clause (``extension`` a str or an int)."""

    extension: str | int
    var: str
    pos: int


@dataclass(frozen=True)
class Rule:
    bindings: tuple[Binding, ...]
    register: str
    register_pos: int
    where: Comparison | And | Or | None
    text: str
