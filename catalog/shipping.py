"""Who holds what, and what to ship (paper section 2.4 and the open points of section 3.5).

An LMR holds the results of its subscriptions' end rules plus everything those reach by strong
references. The backbone keeps no list of holders: it derives them. A resource is held by an LMR
if some end-rule result of that LMR reaches it by strong references (a recursive query over the
strong ``FilterData`` rows, backwards from the resource). So a changed resource is re-shipped to
every LMR holding it, also one held only because a matched resource strongly references it
(the three-run protocol alone would leave that copy stale: no rule tests it), and a deleted one
is announced to its holders. What is shipped is the strong closure of the roots (forwards).

>>> joiner("sqlite"), joiner("postgresql")
(' CROSS JOIN ', ' JOIN ')
"""

from __future__ import annotations

from sqlalchemy import delete, insert, text
from sqlalchemy.engine import Connection

from catalog import defaults
from catalog.document import Resource
from catalog.tables import SHIP_ROOTS


def joiner(dialect: str) -> str:
    """How the statements here join: in the order written (SQLite keeps a ``CROSS JOIN``'s order;
    PostgreSQL explicit joins' under ``join_collapse_limit = 1``, which the filter sets). Each
    starts from the batch's few rows; a planner that started from ``Subscriptions`` or the strong
    rows instead would pay for the size of the rule base or the store."""
    return " CROSS JOIN " if dialect == "sqlite" else " JOIN "


def holders(con: Connection, changes: tuple[str, ...]) -> set[tuple[str, str]]:
    """(lmr, resource) for every resource of this batch with a change in ``changes`` and every
    LMR holding it in the current state of the tables."""
    j = joiner(con.dialect.name)
    marks = ", ".join(f":c{i}" for i in range(len(changes)))
    sql = (f'WITH RECURSIVE ancestors(target, uri) AS ('
           f'SELECT uri_reference, uri_reference FROM "BatchResources" WHERE change IN ({marks}) UNION '
           f'SELECT a.target, fd.uri_reference FROM ancestors a CROSS JOIN "StrongProperties" sp{j}"FilterData" fd '
           f'ON fd.property = sp.property AND fd.value = a.uri) '
           f'SELECT DISTINCT s.lmr, a.target FROM ancestors a{j}"Materialized" m ON m.uri_reference = a.uri'
           f'{j}"SubscriptionRules" sr ON sr.rule_id = m.rule_id{j}"Subscriptions" s ON s.sub_id = sr.sub_id')
    rows = con.execute(text(sql), {f"c{i}": c for i, c in enumerate(changes)})
    return {(lmr, target) for lmr, target in rows}


def closure(con: Connection, roots: set[tuple[str, str]]) -> dict[str, dict[str, Resource]]:
    """lmr -> the existing resources its ``roots`` reach by strong references, roots included."""
    con.execute(delete(SHIP_ROOTS))
    if not roots:
        return {}
    con.execute(insert(SHIP_ROOTS), [{"lmr": lmr, "uri_reference": uri} for lmr, uri in sorted(roots)])
    j = joiner(con.dialect.name)
    sql = (f'WITH RECURSIVE closure(lmr, uri) AS (SELECT lmr, uri_reference FROM "ShipRoots" UNION '
           f'SELECT c.lmr, fd.value FROM closure c{j}"FilterData" fd ON fd.uri_reference = c.uri'
           f'{j}"StrongProperties" sp ON sp.property = fd.property) '
           f'SELECT c.lmr, fd.uri_reference, fd.class, fd.property, fd.value FROM closure c'
           f'{j}"FilterData" fd ON fd.uri_reference = c.uri')
    out: dict[str, dict[str, dict]] = {}
    for lmr, uri, cls, prop, value in con.execute(text(sql)):
        res = out.setdefault(lmr, {}).setdefault(uri, {"cls": cls, "props": {}})
        if prop != defaults.SUBJECT:
            res["props"].setdefault(prop, []).append(value)
    return {lmr: {uri: Resource(uri, r["cls"], {k: tuple(sorted(v)) for k, v in sorted(r["props"].items())})
                  for uri, r in found.items()} for lmr, found in out.items()}


def end_results(con: Connection, lost: bool) -> list[tuple[int, str, str, int]]:
    """(rule, resource, lmr, subscription) of the end rules' results this batch lost for good
    (run 1's candidates not materialized again) or gained (fresh in runs 2 and 3 and no
    candidate: a candidate that came back was held all along)."""
    j = joiner(con.dialect.name)
    if lost:
        cond = ('ro.run = 1 AND NOT EXISTS (SELECT 1 FROM "Materialized" m WHERE m.rule_id = ro.rule_id '
                'AND m.uri_reference = ro.uri_reference)')
    else:
        cond = ('ro.run IN (2, 3) AND ro.fresh = :yes AND NOT EXISTS (SELECT 1 FROM "ResultObjects" w '
                'WHERE w.run = 1 AND w.rule_id = ro.rule_id AND w.uri_reference = ro.uri_reference)')
    sql = (f'SELECT DISTINCT ro.rule_id, ro.uri_reference, s.lmr, s.sub_id FROM "ResultObjects" ro'
           f'{j}"SubscriptionRules" sr ON sr.rule_id = ro.rule_id{j}"Subscriptions" s ON s.sub_id = sr.sub_id '
           f'WHERE {cond}')
    return [tuple(r) for r in con.execute(text(sql), {} if lost else {"yes": True})]
