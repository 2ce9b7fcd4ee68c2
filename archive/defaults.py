"""Every default of the archive, in one place (thesis ``004`` values where it gives one)."""

from __future__ import annotations

PAGE_SIZE = 4096
"""Bytes per page (section 4.1: a 4 KB block, 4 B count + 2 B level, 4090 B data)."""

BUFFER_PAGES = 64
"""Pages the LRU buffer holds (section 4.2 used 120 for E-B+ and 12 for E-VT)."""

MVBT_D = 0.25
"""MVBT ``d`` as a fraction of a page's bytes (section 4.1.3; E-TT used 0.25)."""

MVBT_E = 0.5
"""MVBT ``e`` (section 4.1.3; E-TT used 0.5: bounds 0.375 and 0.875 of a page)."""

MIN_LOAD = 1 / 3
"""B+-tree minimum load ``b`` as a fraction of a page (section 4.1.2: ``b = B/3``)."""

SPLIT = "shortest"
"""B+-tree and MVBT leaf split strategy: ``"simple"``, ``"shortest"`` or ``"prefix"``."""

BULK_FILL = 1.0
"""Fill factor of bulk-loaded B+-tree pages (section 4.2: pages ~100% full)."""

RANGE_FILL = 0.75
"""Fill factor of the subtree a B+-tree range insert bulk-loads (section 4.1.4: ``f = cB``)."""

RITREE_TABLE_PREFIX = "ritree"
"""Table name prefix of the SQL RI-tree (``<prefix>_lower``, ``<prefix>_upper``, ...)."""

ARCHIVE_PAGE_SIZE = 16384
"""Archive model: pages of the partition archives, 16 KB as in the thesis' E-TT, so that
long paths and values fit."""

MAX_VALUE_CHARS = 200
"""Archive model: element values longer than this are not indexed (a profile comparing to a
longer literal is verified by a scan instead)."""

VERSION_BITS = 20
"""Archive model: a message's triples take versions ``seq << VERSION_BITS | i``."""

WRITER_CHUNK = 500
"""Archive writer: records archived (and flushed) per hold of a partition's lock; readers
wait for at most one chunk, not for a whole micro-batch (a writer catching up on a
backlog takes minutes over one)."""
