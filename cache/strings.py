"""build-ranges for strings (thesis section 5.1, Fig. 13) with similarity (section 5.4,
Table 4, the ``!~=`` erratum fixed).

A range is the half-open interval ``[lo, hi)`` of strings, the set ``uneq`` of values
excluded by ``!=``, the set ``sim`` of substrings every value contains (``~=``, XPath
``contains``) and the set ``unsim`` of substrings no value contains (``!~=``, XPath
``not(contains(...))``). The successor ``c + 1`` of a string is ``c`` followed by the
smallest character, so ``A = c`` is the point ``[c, c + 1)``. A step that leaves no value
gives ``None`` (the thesis' NULL); every step keeps the range minimal (the thesis' rules
i-vi: a point carries no sets, and no set holds an element another constraint already
implies), so two ranges are equal exactly when their constraints are.

>>> r = StrRange().restrict(">=", "a").restrict("<=", "a")
>>> r.is_point, r.lo
(True, 'a')
>>> StrRange().restrict("=", "a").restrict("!=", "a") is None
True
>>> StrRange().restrict("~=", "Gogh").restrict("~=", "van Gogh").sim
frozenset({'van Gogh'})

An unsatisfiable answer (``None``) is always right; a range that is not ``None`` may still
be empty where an interval and substrings interplay, which the thesis does not handle
either: callers treat "not ``None``" as "perhaps satisfiable", the conservative side.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

SMALLEST = "\0"
"""The smallest character: ``successor(c) = c + SMALLEST``."""



def successor(c: str) -> str:
    """The next string after ``c`` in lexicographic order (section 5.1).

    >>> successor("a") > "a" and not "a" < "a\\0" < successor("a")
    True
    """
    return c + SMALLEST


@dataclass(frozen=True, slots=True)
class StrRange:
    """``([lo, hi), uneq, sim, unsim)``; ``hi=None`` is +infinity, and ``lo=''`` is the
    smallest string, so ``StrRange()`` allows every string."""

    lo: str = ""
    hi: str | None = None
    uneq: frozenset[str] = field(default_factory=frozenset)
    sim: frozenset[str] = field(default_factory=frozenset)
    unsim: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_point(self) -> bool:
        """``min + 1 = max``: the range is the single value ``lo``."""
        return self.hi is not None and self.hi == successor(self.lo)

    def restrict(self, op: str, c: str) -> "StrRange | None":
        """The range after reading the subgoal ``A op c`` (Fig. 13, Table 4); ``None``
        if no value is left."""
        if op == "=":
            return self._equal(c)
        if op == "!=":
            return self._unequal(c)
        if op == "~=":
            return self._similar(c)
        if op == "!~=":
            return self._unsimilar(c)
        if op == ">":
            return self._bounds(max(self.lo, successor(c)), self.hi)
        if op == ">=":
            return self._bounds(max(self.lo, c), self.hi)
        if op == "<":
            return self._bounds(self.lo, c if self.hi is None else min(self.hi, c))
        if op == "<=":
            return self._bounds(self.lo, successor(c) if self.hi is None else min(self.hi, successor(c)))
        raise ValueError(f"unknown string operator {op!r}")

    def meet(self, other: "StrRange") -> "StrRange | None":
        """The values both ranges allow: ``other``'s constraints read into this one."""
        if other == _ALL or other == self:
            return self
        out: StrRange | None = self
        steps = [(">=", other.lo)] if other.lo else []
        steps += [("<", other.hi)] if other.hi is not None else []
        steps += [("!=", z) for z in sorted(other.uneq)] + [("~=", x) for x in sorted(other.sim)]
        steps += [("!~=", y) for y in sorted(other.unsim)]
        for op, c in steps:
            out = out.restrict(op, c)
            if out is None:
                return None
        return out

    def allows(self, value: str) -> bool:
        """Does ``value`` satisfy every constraint of the range?"""
        return (self.lo <= value and (self.hi is None or value < self.hi) and value not in self.uneq
                and all(x in value for x in self.sim) and not any(y in value for y in self.unsim))

    # -- Table 4, one operator each --------------------------------------------------------

    def _equal(self, c: str) -> "StrRange | None":
        return StrRange(c, successor(c)) if self.allows(c) else None

    def _unequal(self, c: str) -> "StrRange | None":
        if self.is_point:
            return None if self.lo == c else self
        # Only a value the range could still hold is worth remembering (Table 4).
        return replace(self, uneq=self.uneq | {c}) if self.allows(c) else self

    def _similar(self, c: str) -> "StrRange | None":
        if self.is_point:
            return self if c in self.lo else None
        if any(y in c for y in self.unsim):
            return None                       # a value containing c contains y too
        if any(c in x for x in self.sim):
            return self                       # implied by a longer substring already required
        return replace(self, sim=frozenset({x for x in self.sim if x not in c} | {c}),
                       uneq=frozenset(z for z in self.uneq if c in z))

    def _unsimilar(self, c: str) -> "StrRange | None":
        if self.is_point:
            return None if c in self.lo else self
        if any(c in x for x in self.sim):
            return None                       # every value contains x, hence c
        # Erratum: Table 4 writes "y not containing c"; the redundant case is y inside c
        # (a value without y has no c either), so c is added only when no y is in it.
        if any(y in c for y in self.unsim):
            return self
        return replace(self, unsim=frozenset({y for y in self.unsim if c not in y} | {c}),
                       uneq=frozenset(z for z in self.uneq if c not in z))

    def _bounds(self, lo: str, hi: str | None) -> "StrRange | None":
        if hi is not None and lo >= hi:
            return None
        if hi is not None and hi == successor(lo):
            # A point: it must meet every set, and then the sets say nothing more (rule i).
            return StrRange(lo, hi) if self.allows(lo) else None
        return replace(self, lo=lo, hi=hi, uneq=frozenset(z for z in self.uneq if lo <= z and (hi is None or z < hi)))


_ALL = StrRange()
