"""Every default of the catalog, in one place (MDV, paper ``001``, where it gives one)."""

from __future__ import annotations

DATABASE_URL = "sqlite://"
"""Where a :class:`~catalog.Backbone` or :class:`~catalog.LocalRepository` keeps its tables when
no URL is given: an in-memory SQLite database private to the object."""

BATCH_SIZE = 1
"""Documents (registrations, updates, deletes) a backbone collects before it runs the filter
(section 4: the filter may run per document or per batch). 1: every change is filtered at once."""

BATCH_PERIOD_S: float | None = None
"""Seconds a collected change may wait before its batch is filtered even if not full (checked on
every call and by :meth:`~catalog.Backbone.flush_due`); ``None``: only the size closes a batch."""

MDV_NAMESPACE = "urn:onyx:mdv#"
"""Namespace of the schema extensions: ``mdv:reference`` ("strong" | "weak") and ``mdv:setValued``."""

DEFAULT_REFERENCE = "weak"
"""A reference property whose schema says nothing is weak: what it references is never shipped
along (section 2.4 leaves the choice to the schema designer; weak can never ship the database)."""

SUBJECT = "rdf#subject"
"""The property of the one ``FilterData`` row per resource whose value is its own URI reference
(section 3.2), which lets rules name a resource (``c = 'doc.rdf#host'``) and join on identity."""

MAX_RULE_CHARS = 2000
"""Longest rule text accepted (keeps every atomic rule's text within an index entry of any
database: PostgreSQL's B-tree takes about 2,700 bytes)."""

MAX_DISJUNCTS = 64
"""Most rules one text with ``or`` may split into (section 2.3: ``or`` is split into several
rules); more is refused rather than multiplied out."""

MAX_DOCUMENT_BYTES = 10_000_000
"""Largest RDF/XML document accepted."""

MAX_VALUE_CHARS = 1000
"""Longest literal or URI reference a document may hold: values are indexed (``FilterData``'s
value index), and an index entry of PostgreSQL's B-tree takes about 2,700 bytes."""

ANALYZE_AFTER_RULES = 1000
"""After a registration of at least this many rules at once the backbone has the database
gather statistics (``ANALYZE``), so the planner knows the rule tables' sizes at once rather
than after its next automatic pass (SQLite has none)."""
