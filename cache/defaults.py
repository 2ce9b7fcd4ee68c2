"""Every default of the semantic cache, in one place (thesis ``002`` values where it
gives one; it gives none for sizes and lifetimes, section 4.5 leaves them to experiments).

>>> CAPACITY_BYTES
67108864
"""

from __future__ import annotations

CAPACITY_BYTES = 64 << 20
"""What the regions may hold: their items' bytes plus :data:`REGION_OVERHEAD_BYTES` each."""

REGION_OVERHEAD_BYTES = 256
"""Bytes a region costs beyond its items (its description), so that empty regions,
which still answer queries, are not free and cannot pile up without bound."""

MAX_AGE_SECONDS = 3600.0
"""Coherence (section 4.5): a region collected (T_K) longer ago than this is dropped."""

MAX_IDLE_SECONDS = 900.0
"""Coherence (section 4.5): a region not used (T_L) for longer than this is dropped."""

MAX_CONJUNCTS = 256
"""A condition whose disjunctive normal form has more conjunctions is refused."""

MAX_PARTS = 64
"""Remainder parts one conjunction of a query may split into during a lookup: a region
that would split it further gives way instead (:mod:`cache.lookup`)."""

MAX_MATCH_CALLS = 4096
"""match-type calls one lookup may make: past them it stops, and what is left of the
query is fetched but not kept as regions (it may overlap regions not looked at), so that
a lookup stays bounded however many overlapping regions a concept holds."""
