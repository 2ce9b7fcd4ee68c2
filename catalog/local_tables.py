"""A local repository's tables: ``Held`` (what it holds, with its class), ``HeldProperties``
(their values, numeric reading beside), ``Matches`` (which subscription's end rule matched
what), ``StrongEdges`` (the strong references between held resources: the reference counts of
the garbage collector) and ``LocalSubscriptions``.

>>> sorted(METADATA.tables)
['Held', 'HeldProperties', 'LocalSchemas', 'LocalSubscriptions', 'Matches', 'StrongEdges']
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text

METADATA = MetaData()

HELD = Table("Held", METADATA, Column("uri_reference", Text, primary_key=True),
             Column("class", String(200), nullable=False, index=True))

HELD_PROPERTIES = Table(
    "HeldProperties", METADATA, Column("uri_reference", Text, nullable=False),
    Column("property", String(200), nullable=False), Column("value", Text, nullable=False), Column("num", Float),
    Index("hp_uri", "uri_reference", "property"), Index("hp_value", "property", "value"))

MATCHES = Table(
    "Matches", METADATA, Column("sub_id", Integer, primary_key=True, autoincrement=False),
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Column("uri_reference", Text, primary_key=True),
    Index("m_uri", "uri_reference"))

STRONG_EDGES = Table("StrongEdges", METADATA, Column("src", Text, primary_key=True), Column("dst", Text, primary_key=True),
                     Index("se_dst", "dst"))

LOCAL_SUBSCRIPTIONS = Table(
    "LocalSubscriptions", METADATA, Column("sub_id", Integer, primary_key=True, autoincrement=False),
    Column("text", Text, nullable=False), Column("type", String(200), nullable=False))

LOCAL_SCHEMAS = Table("LocalSchemas", METADATA, Column("seq", Integer, primary_key=True), Column("text", Text, nullable=False))
