"""The values one subgoal allows for one node: a string range (``=``, ``!=``,
``contains``) and a number range (what XPath's ``number()`` of the value may be) at once.

XPath reads one attribute both ways (``@a = '5'`` compares strings, ``@a = 5`` numbers),
so a set of values is the strings in :attr:`ValueSet.strings` whose ``number()`` is in
:attr:`ValueSet.numbers`. The two sides are reasoned about apart, which can only take an
empty set for a non-empty one (the conservative side), except where the strings are one
point: then its number decides, exactly.

>>> from cache.numbers import compare
>>> point = EVERY.restrict_strings("=", "1800")
>>> point.meet(ValueSet(numbers=compare(">", 1700))) is not None
True
>>> point.meet(ValueSet(numbers=compare(">", 1900))) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yfilter.values import number

from cache.numbers import EVERY as EVERY_NUMBER
from cache.numbers import NumRange
from cache.strings import StrRange


@dataclass(frozen=True, slots=True)
class ValueSet:
    strings: StrRange = field(default_factory=StrRange)
    numbers: NumRange = EVERY_NUMBER

    def meet(self, other: "ValueSet") -> "ValueSet | None":
        """The values both sets hold (``None``: certainly none)."""
        if other is EVERY:
            return self
        if self is EVERY:
            return other
        strings = self.strings.meet(other.strings)
        return None if strings is None else _checked(strings, self.numbers.meet(other.numbers))

    def restrict_strings(self, op: str, c: str) -> "ValueSet | None":
        """This set after the string subgoal ``op c`` (``None``: empty)."""
        strings = self.strings.restrict(op, c)
        return None if strings is None else _checked(strings, self.numbers)


def _checked(strings: StrRange, numbers: NumRange | None) -> ValueSet | None:
    if numbers is None or (strings.is_point and not numbers.allows(number(strings.lo))):
        return None
    return ValueSet(strings, numbers)


EVERY = ValueSet()
"""Every value."""
