"""The backbone's tables (paper section 3.3.4, Figures 4, 7, 8 and 9), through SQLAlchemy.

``FilterData`` holds every resource of every registered document, one row per property value
plus the ``rdf#subject`` row (Figure 4); ``num`` is the value's numeric reading and ``doc`` the
document it came from (both additions: comparisons convert once, updates diff per document).
The filter's join phase needs the whole store, not just the new document: a join rule's other
side may be any resource registered earlier (section 3.4).

The paper omits "tables that store which rules an LMR registered"; here they are
``Subscriptions`` (one row per rule an LMR subscribed, with its repository), ``SubscriptionRules``
(the end rules a subscription's ``or`` split into) and ``RuleUses`` (every atomic rule in a
subscription's dependency trees: the reference count that removes unused atomic rules).
``Materialized`` keeps the current result of every atomic rule over the whole store (section 3.4:
"the results of atomic rules join rules depend on are materialized"); ``FilterInput`` and
``BatchResources`` are scratch tables of one filter run and one batch.

>>> sorted(t for t in METADATA.tables if t.startswith("FilterRules"))
['FilterRules', 'FilterRules_CON', 'FilterRules_EQ', 'FilterRules_GE', 'FilterRules_GT', 'FilterRules_LE', 'FilterRules_LT', 'FilterRules_NE']
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

from catalog.decompose import TABLES

METADATA = MetaData()

FILTER_DATA = Table(
    "FilterData", METADATA,
    Column("uri_reference", Text, nullable=False), Column("class", String(200), nullable=False),
    Column("property", String(200), nullable=False), Column("value", Text, nullable=False),
    Column("num", Float), Column("doc", Text, nullable=False),
    Index("fd_uri", "uri_reference", "property"), Index("fd_value", "class", "property", "value"),
    Index("fd_num", "class", "property", "num"), Index("fd_ref", "property", "value"), Index("fd_doc", "doc"))

DOCUMENTS = Table("Documents", METADATA, Column("uri", Text, primary_key=True))

SCHEMAS = Table("Schemas", METADATA, Column("seq", Integer, primary_key=True), Column("text", Text, nullable=False))

STRONG_PROPERTIES = Table("StrongProperties", METADATA, Column("property", String(200), primary_key=True))

ATOMIC_RULES = Table(
    "AtomicRules", METADATA,
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Column("text", Text, nullable=False, unique=True),
    Column("group", Integer), Column("type", String(200), nullable=False), Column("depth", Integer, nullable=False))

RULE_DEPENDENCIES = Table(
    "RuleDependencies", METADATA,
    Column("source", Integer, nullable=False), Column("target", Integer, primary_key=True, autoincrement=False),
    Column("param", Integer, primary_key=True, autoincrement=False), Column("group", Integer, nullable=False),
    Index("dep_source", "source", "group"), Index("dep_group", "group", "param", "target"))

JOIN_INPUTS = Table(
    "JoinInputs", METADATA,
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Column("group", Integer, nullable=False),
    Column("source1", Integer, nullable=False), Column("source2", Integer, nullable=False),
    Column("pair", BigInteger, nullable=False), Index("ji_pair", "group", "pair"))
"""``RuleDependencies`` again, one row per join rule with both inputs: the join phase finds the
rule joining two given results with one index probe, however many rules share one input.
``pair`` is ``source1 * 2**32 + source2``: one indexed value, so that no planner probes by the
first input alone (PostgreSQL did, estimating one row, and a popular first input matched every
rule of the group)."""

PAIR_SHIFT = 2 ** 32
"""``JoinInputs.pair = source1 * PAIR_SHIFT + source2`` (rule ids stay below 2**31)."""

INPUT_GROUPS = Table(
    "InputGroups", METADATA,
    Column("source", Integer, primary_key=True, autoincrement=False),
    Column("group", Integer, primary_key=True, autoincrement=False))
"""Which rule groups an atomic rule is an input of, once per pair: the join phase's "which groups
are due" reads a few rows per new result's rule, where ``RuleDependencies`` holds a row per
dependent rule (every PATH rule depends on ``search CycleProvider c register c``)."""

RULE_GROUPS = Table(
    "RuleGroups", METADATA,
    Column("group", Integer, primary_key=True, autoincrement=False), Column("text", Text, nullable=False, unique=True),
    Column("left_param", Integer, nullable=False), Column("left_property", String(200), nullable=False),
    Column("op", String(10), nullable=False), Column("right_param", Integer, nullable=False),
    Column("right_property", String(200), nullable=False), Column("register_param", Integer, nullable=False))

FILTER_RULES = {None: Table(TABLES[None], METADATA, Column("rule_id", Integer, primary_key=True, autoincrement=False),
                            Column("class", String(200), nullable=False), Index("fr_class", "class"))}
for _op, _name in TABLES.items():
    if _op is not None:
        FILTER_RULES[_op] = Table(
            _name, METADATA, Column("rule_id", Integer, primary_key=True, autoincrement=False),
            Column("class", String(200), nullable=False), Column("property", String(200), nullable=False),
            Column("value", Text, nullable=False), Column("num", Float),
            Index(f"{_name.lower()}_value", "class", "property", "value"),
            Index(f"{_name.lower()}_num", "class", "property", "num"))

RESULT_OBJECTS = Table(
    "ResultObjects", METADATA,
    Column("run", Integer, nullable=False), Column("iteration", Integer, nullable=False),
    Column("uri_reference", Text, nullable=False), Column("rule_id", Integer, nullable=False),
    Column("fresh", Boolean, nullable=False),
    Index("ro_step", "run", "iteration", "rule_id"), Index("ro_pair", "rule_id", "uri_reference", "run"))

MATERIALIZED = Table(
    "Materialized", METADATA,
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Column("uri_reference", Text, primary_key=True),
    Index("mat_uri", "uri_reference", "rule_id"))

SUBSCRIPTIONS = Table(
    "Subscriptions", METADATA,
    Column("sub_id", Integer, primary_key=True), Column("lmr", String(200), nullable=False, index=True),
    Column("text", Text, nullable=False), Column("type", String(200), nullable=False))

SUBSCRIPTION_RULES = Table(
    "SubscriptionRules", METADATA,
    Column("sub_id", Integer, primary_key=True, autoincrement=False),
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Index("sr_rule", "rule_id"))

RULE_USES = Table(
    "RuleUses", METADATA,
    Column("sub_id", Integer, primary_key=True, autoincrement=False),
    Column("rule_id", Integer, primary_key=True, autoincrement=False), Index("ru_rule", "rule_id"))

REPOSITORIES = Table("Repositories", METADATA, Column("name", String(200), primary_key=True))

FILTER_INPUT = Table("FilterInput", METADATA, Column("uri_reference", Text, primary_key=True))

BATCH_RESOURCES = Table("BatchResources", METADATA, Column("uri_reference", Text, primary_key=True),
                        Column("change", String(10), nullable=False))

NEW_RULES = Table("NewRules", METADATA, Column("rule_id", Integer, primary_key=True, autoincrement=False))

SHIP_ROOTS = Table("ShipRoots", METADATA, Column("lmr", String(200), primary_key=True),
                   Column("uri_reference", Text, primary_key=True))
