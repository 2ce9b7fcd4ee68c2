"""The public condition: parsed once into a minimal disjunctive normal form, and
match-type between two of them (thesis sections 3.3-3.4 and 5.1-5.4).

>>> q = Condition.parse("@year >= 1700 and @year <= 1900 and contains(@artist, 'Gogh')")
>>> c = Condition.parse("@year <= 1800")
>>> match_type(q, c)
'overlapping'
>>> match_type("@year >= 1700 and @year >= 1600", "@year >= 1700")
'exact'
>>> str(Condition.parse("not(@a != 'x' or @b)"))
"not(@a != 'x') and not(@b)"
"""

from __future__ import annotations

from cache import defaults
from cache.conjunct import TRUE_TEXT, Conjunct, satisfiable, simplify, text
from cache.match import condition_match, disjoint_dnf
from cache.parse import to_dnf

FALSE_TEXT = f"not({TRUE_TEXT})"
"""XPath predicate text that no element satisfies (the empty disjunction)."""


class Condition:
    """A condition as the cache reasons about it: :attr:`dnf`, its satisfiable
    conjunctions in minimal form, without duplicates (``str()`` is their XPath text,
    which selects exactly the elements the parsed text selects), and :attr:`parts`, the
    same made pairwise disjoint (what the cache looks up, and its new regions)."""

    __slots__ = ("dnf", "parts")

    def __init__(self, dnf: tuple[Conjunct, ...]) -> None:
        self.dnf = dnf
        self.parts = tuple(disjoint_dnf(dnf, defaults.MAX_CONJUNCTS))

    @classmethod
    def parse(cls, text: str) -> "Condition":
        """Read XPath predicate text (see :mod:`cache.parse` for what is accepted); raise
        a :class:`cache.errors.ConditionError` naming the construct and the column (also
        when it has more than :data:`cache.defaults.MAX_CONJUNCTS` conjunctions, overlapping
        or made disjoint)."""
        conjuncts = (simplify(conj) for conj in to_dnf(text) if satisfiable(conj))
        return cls(tuple(dict.fromkeys(conjuncts)))

    def __str__(self) -> str:
        return " or ".join(text(conj) for conj in self.dnf) or FALSE_TEXT

    def __repr__(self) -> str:
        return f"Condition.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and set(self.dnf) == set(other.dnf)

    def __hash__(self) -> int:
        return hash(frozenset(self.dnf))


def as_condition(condition: "Condition | str") -> Condition:
    return condition if isinstance(condition, Condition) else Condition.parse(condition)


def match_type(q: "Condition | str", c: "Condition | str") -> str:
    """How the items of ``q`` relate to those of ``c``: ``'exact'`` (the same),
    ``'containing'`` (``c`` contains ``q``), ``'contained'`` (``q`` contains ``c``),
    ``'overlapping'`` or ``'disjoint'``. Sound: an answer other than ``'overlapping'``
    is always true; ``'overlapping'`` may hide a relation build-ranges cannot see."""
    return condition_match(as_condition(q).dnf, as_condition(c).dnf)
