"""Who holds what, and what to ship (paper section 2.4 and the open points of section 3.5).

An LMR holds the results of its subscriptions' end rules plus everything those reach by strong
references. The backbone keeps no list of holders: it derives them. A resource is held by an LMR
if some end-rule result of that LMR reaches it by strong references (a recursive query over the
strong ``FilterData`` rows, backwards from the resource). So a changed resource is re-shipped to
every LMR holding it, also one held only because a matched resource strongly references it
(the three-run protocol alone would leave that copy stale: no rule tests it), and a deleted one
is announced to its holders. What is shipped is the strong closure of the roots (forwards).
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from catalog import defaults
from catalog.document import Resource
from catalog.tables import (BATCH_RESOURCES, FILTER_DATA, MATERIALIZED, SHIP_ROOTS, STRONG_PROPERTIES,
                            SUBSCRIPTION_RULES, SUBSCRIPTIONS)

FD = FILTER_DATA


def holders(con: Connection, changes: tuple[str, ...]) -> set[tuple[str, str]]:
    """(lmr, resource) for every resource of this batch with a change in ``changes`` and every
    LMR holding it in the current state of the tables."""
    start = select(BATCH_RESOURCES.c.uri_reference.label("target"), BATCH_RESOURCES.c.uri_reference.label("uri")).where(
        BATCH_RESOURCES.c.change.in_(changes))
    anc = start.cte("ancestors", recursive=True)
    a = anc.alias("a")
    anc = anc.union(select(a.c.target, FD.c.uri_reference).where(
        FD.c.value == a.c.uri, FD.c.property == STRONG_PROPERTIES.c.property))
    q = select(SUBSCRIPTIONS.c.lmr, anc.c.target).distinct().where(
        MATERIALIZED.c.uri_reference == anc.c.uri, SUBSCRIPTION_RULES.c.rule_id == MATERIALIZED.c.rule_id,
        SUBSCRIPTIONS.c.sub_id == SUBSCRIPTION_RULES.c.sub_id)
    return {(row.lmr, row.target) for row in con.execute(q)}


def closure(con: Connection, roots: set[tuple[str, str]]) -> dict[str, dict[str, Resource]]:
    """lmr -> the existing resources its ``roots`` reach by strong references, roots included."""
    con.execute(delete(SHIP_ROOTS))
    if not roots:
        return {}
    con.execute(insert(SHIP_ROOTS), [{"lmr": lmr, "uri_reference": uri} for lmr, uri in sorted(roots)])
    clo = select(SHIP_ROOTS.c.lmr, SHIP_ROOTS.c.uri_reference.label("uri")).cte("closure", recursive=True)
    c = clo.alias("c")
    clo = clo.union(select(c.c.lmr, FD.c.value).where(
        FD.c.uri_reference == c.c.uri, FD.c.property == STRONG_PROPERTIES.c.property))
    rows = con.execute(select(clo.c.lmr, FD.c.uri_reference, FD.c["class"], FD.c.property, FD.c.value).where(
        FD.c.uri_reference == clo.c.uri))
    out: dict[str, dict[str, dict]] = {}
    for lmr, uri, cls, prop, value in rows:
        res = out.setdefault(lmr, {}).setdefault(uri, {"cls": cls, "props": {}})
        if prop != defaults.SUBJECT:
            res["props"].setdefault(prop, []).append(value)
    return {lmr: {uri: Resource(uri, r["cls"], {k: tuple(sorted(v)) for k, v in sorted(r["props"].items())})
                  for uri, r in found.items()} for lmr, found in out.items()}
