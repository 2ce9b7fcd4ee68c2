"""Subgoals: the constant selections of a condition (thesis section 3.3), each on one
*column* of the concept's element, and their negations (section 5.3).

A column is what a subgoal reads, with how many values XPath finds there:

* ``single`` — an attribute ``@a``: no value or one (absent attributes make
  ``not(@a = 'x')`` differ from ``@a != 'x'``);
* ``first`` — the first node of a path, which ``contains(path, 'x')`` reads: no value or one;
* ``one`` — the element's string value ``.``: exactly one;
* ``multi`` — a path to child elements or text nodes (``hl1``, ``head/pubdata/@type``,
  ``text()``): any number of values, and a comparison holds when *some* value passes
  (XPath's existential semantics), so its negation holds when *every* value fails;
* ``time`` — the item's time, given by the source: exactly one number, never in the XPath text.

A literal (:class:`Lit`) is an atom or its negation; its text is the atom's XPath or
``not(...)`` of it. The thesis' complementary operators (``=``/``!=``, ``<``/``>=``, ...)
are the same as ``not(...)`` only where a value is known to be there and to be a number;
:mod:`cache.conjunct` decides where that holds.

>>> a = Atom(Column("@year", SINGLE), "<=", 1800.0, "1800")
>>> a.text(), Lit(a, False).text()
('@year <= 1800', 'not(@year <= 1800)')
>>> a.values(negated=True).numbers.lo, a.complement().text()
(1800.0, '@year > 1800')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cache.numbers import NEGATED, compare
from cache.values import EVERY, ValueSet

SINGLE, FIRST, ONE, MULTI, TIME = "single", "first", "one", "multi", "time"
CONTAINS, EXISTS = "contains", "exists"

_STRING_NEGATED = {"=": "!=", "!=": "="}


@dataclass(frozen=True, slots=True)
class Column:
    """What a subgoal reads: ``path`` (canonical XPath; ``''`` for the time) and ``kind``."""

    path: str
    kind: str


@dataclass(frozen=True, slots=True)
class Atom:
    """``column op value``: ``op`` a comparison (on numbers when ``value`` is a float, on
    strings when it is a str), ``contains`` (``value`` the substring) or ``exists``;
    ``literal`` is the value's XPath text as written."""

    column: Column
    op: str
    value: str | float | None
    literal: str
    # Both value sets and the hash, worked out once: build-ranges asks for them over and over.
    _sets: tuple = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sets", (self._values(False), self._values(True)))
        object.__setattr__(self, "_hash", hash((self.column, self.op, self.value, self.literal)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, float)

    def values(self, negated: bool = False) -> ValueSet | None:
        """The values of one node for which the atom holds (``negated``: fails);
        ``None`` when there are none."""
        return self._sets[negated]

    def _values(self, negated: bool) -> ValueSet | None:
        if self.op == EXISTS:
            return None if negated else EVERY
        if self.op == CONTAINS:
            return EVERY.restrict_strings("!~=" if negated else "~=", self.value)
        if self.numeric:
            numbers = compare(self.op, self.value, negated)
            return None if numbers is None else ValueSet(numbers=numbers)
        return EVERY.restrict_strings(_STRING_NEGATED[self.op] if negated else self.op, self.value)

    def complement(self) -> "Atom | None":
        """The thesis' negated subgoal (``A != c`` for ``A = c``, ``A >= c`` for
        ``A < c``, ...), true of a present value exactly when this atom is false (of a
        number, for the numeric ones); ``None`` where XPath has no such operator."""
        if self.op in (CONTAINS, EXISTS):
            return None
        op = NEGATED[self.op] if self.numeric else _STRING_NEGATED.get(self.op)
        return None if op is None else Atom(self.column, op, self.value, self.literal)

    def text(self) -> str:
        if self.op == EXISTS:
            return self.column.path
        if self.op == CONTAINS:
            return f"contains({self.column.path}, {self.literal})"
        return f"{self.column.path} {self.op} {self.literal}"


@dataclass(frozen=True, slots=True)
class Lit:
    """An atom (``positive``) or its negation."""

    atom: Atom
    positive: bool = True
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.atom, self.positive)))

    def __hash__(self) -> int:
        return self._hash

    def negate(self) -> "Lit":
        return Lit(self.atom, not self.positive)

    def values(self) -> ValueSet | None:
        return self.atom.values(negated=not self.positive)

    def text(self) -> str:
        return self.atom.text() if self.positive else f"not({self.atom.text()})"
