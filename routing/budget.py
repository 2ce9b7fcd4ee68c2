"""How big a routing table may be, and how big a set of atoms is in the engine.

A :class:`Budget` limits one routing table's view: distinct atoms, NFA states and
predicates (the engine's guards). :class:`SizeModel` counts the same measures for a
set of atoms the way :class:`yfilter.Engine` builds them — one state per distinct
step prefix, one more for the loop before each ``//`` step, one guard per distinct
name test with predicates — and prices a change before it is made, which is what the
generalization planner needs thousands of times per plan. Steps and predicates are
told apart by their text, so the model never counts less than the engine (which also
shares predicates written differently that mean the same): a table within budget by
the model is within budget in the engine. Routing tables report their size with it.

>>> m = SizeModel(["/a/b[@x = '1']", "/a//c"])
>>> m.size(), m.delta(remove=["/a/b[@x = '1']"], add=["/a/b"])
({'atoms': 2, 'nfa_states': 4, 'guards': 1}, {'atoms': 0, 'nfa_states': 0, 'guards': -1})
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

from routing import atoms as A

SIZE_KEYS = {"atoms": "atoms", "states": "nfa_states", "predicates": "guards"}
"""Budget field -> the key of the same measure in ``stats()`` dicts."""


class BudgetError(ValueError):
    """A budget that cannot be read or met."""


@dataclass(frozen=True)
class Budget:
    """Limits on one routing table's view: distinct atoms, NFA states and predicates
    (engine guards); ``None`` means no limit.

    >>> b = Budget.parse("atoms=500,states=2000")
    >>> b, b.fits({"atoms": 400, "nfa_states": 2100, "guards": 9})
    (Budget(atoms=500, states=2000, predicates=None), False)
    """

    atoms: int | None = None
    states: int | None = None
    predicates: int | None = None

    def __post_init__(self) -> None:
        for name in SIZE_KEYS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise BudgetError(f"budget {name} must be a non-negative integer, not {value!r}")

    def limits(self) -> dict[str, int]:
        """Size keys (as in ``stats()``) -> limit, for the limited measures."""
        return {key: getattr(self, name) for name, key in SIZE_KEYS.items() if getattr(self, name) is not None}

    def fits(self, size: Mapping[str, int]) -> bool:
        return all(size[key] <= limit for key, limit in self.limits().items())

    def scaled(self, factor: float) -> "Budget":
        """Every limit times ``factor``, rounded up."""
        return Budget(**{name: None if getattr(self, name) is None else math.ceil(getattr(self, name) * factor)
                         for name in SIZE_KEYS})

    def __str__(self) -> str:
        return ",".join(f"{name}={getattr(self, name)}" for name in SIZE_KEYS if getattr(self, name) is not None)

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """``"atoms=N,states=N,predicates=N"`` (any subset)."""
        values: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, value = part.partition("=")
            if name.strip() not in SIZE_KEYS or not value.strip().isdigit():
                raise BudgetError(f"cannot read budget part {part!r}: use atoms=N, states=N, predicates=N")
            values[name.strip()] = int(value)
        if not values:
            raise BudgetError("an empty budget limits nothing: give atoms=N, states=N and/or predicates=N")
        return cls(**values)


_AXIS = re.compile(r"^//?")


@lru_cache(maxsize=1 << 18)
def footprint(atom: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The NFA states and guards an atom needs in a shared engine."""
    steps = A.parse_atom(atom)
    pre = A.prefixes(atom)
    states, guards = [], []
    for i, step in enumerate(steps):
        if step.axis == "//":
            states.append("//" + (pre[i - 1] if i else ""))
        states.append(pre[i])
        if step.preds:
            guards.append(_AXIS.sub("", str(step)))
    return tuple(states), tuple(guards)


class SizeModel:
    """Distinct atoms, NFA states and guards of a set of atoms, kept up to date as
    atoms come and go."""

    def __init__(self, atoms: Iterable[str] = ()) -> None:
        self.atoms: set[str] = set()
        self._states: Counter[str] = Counter()
        self._guards: Counter[str] = Counter()
        for a in atoms:
            self.add(a)

    def add(self, atom: str) -> None:
        if atom not in self.atoms:
            self.atoms.add(atom)
            states, guards = footprint(atom)
            self._states.update(states)
            self._guards.update(guards)

    def remove(self, atom: str) -> None:
        self.atoms.remove(atom)
        states, guards = footprint(atom)
        for counter, keys in ((self._states, states), (self._guards, guards)):
            for k in keys:
                counter[k] -= 1
                if not counter[k]:
                    del counter[k]

    def size(self) -> dict[str, int]:
        return {"atoms": len(self.atoms), "nfa_states": len(self._states), "guards": len(self._guards)}

    def delta(self, remove: Iterable[str], add: Iterable[str]) -> dict[str, int]:
        """How :meth:`size` would change if ``remove`` (atoms of the set) went and
        ``add`` came."""
        remove = {a for a in remove if a in self.atoms}
        add = {a for a in add if a not in self.atoms or a in remove}
        both = remove & add
        remove, add = remove - both, add - both
        out = {"atoms": len(add) - len(remove)}
        for key, counter, part in (("nfa_states", self._states, 0), ("guards", self._guards, 1)):
            change: dict[str, int] = {}
            for a in remove:
                for k in footprint(a)[part]:
                    change[k] = change.get(k, 0) - 1
            for a in add:
                for k in footprint(a)[part]:
                    change[k] = change.get(k, 0) + 1
            # counters hold no zeros: a key is present iff something needs it
            out[key] = sum((counter.get(k, 0) + d > 0) - (k in counter) for k, d in change.items() if d)
        return out
