"""A Local Metadata Repository (paper section 2.2): it holds what its subscription rules select
at the backbone (plus what strong references ship along), keeps it up to date from the deltas
the backbone sends, collects what nothing holds any more (:mod:`catalog.gc`), and answers
queries on its own data only.

>>> from catalog import Backbone
>>> from catalog.schema import FIGURE_1_SCHEMA
>>> from catalog.document import FIGURE_1
>>> mdp = Backbone(); mdp.register_schema(FIGURE_1_SCHEMA)
>>> lmr = LocalRepository("lmr-b1", backbone=mdp)
>>> rule = lmr.subscribe("search CycleProvider c register c where c.serverInformation.memory > 64")
>>> mdp.register_document("doc.rdf", FIGURE_1)
>>> sorted(lmr.resources()), lmr.resources()["doc.rdf#info"]
(['doc.rdf#host', 'doc.rdf#info'], {'cpu': ['600'], 'memory': ['92']})
>>> lmr.query("search ServerInformation s register s where s.cpu >= 600")
{'doc.rdf#info'}
>>> lmr.unsubscribe(rule); lmr.resources()
{}
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from catalog.backbone import Backbone
from catalog.db import open_database
from catalog.delta import Delta
from catalog.document import Resource
from catalog.gc import collect
from catalog.local_tables import (HELD, HELD_PROPERTIES, LOCAL_SCHEMAS, LOCAL_SUBSCRIPTIONS, MATCHES, METADATA,
                                  STRONG_EDGES)
from catalog.normalize import normalize
from catalog.parser import parse
from catalog.query import query_select
from catalog.schema import Schema
from catalog.values import number


class _Tables:
    """The collector's view of the repository's tables, inside one transaction."""

    def __init__(self, con: Connection) -> None:
        self.con = con

    def held(self, uri: str) -> bool:
        return self.con.execute(select(HELD.c.uri_reference).where(HELD.c.uri_reference == uri)).first() is not None

    def rooted(self, uri: str) -> bool:
        return self.con.execute(select(MATCHES.c.sub_id).where(MATCHES.c.uri_reference == uri).limit(1)).first() is not None

    def referrers(self, uri: str) -> set[str]:
        return set(self.con.execute(select(STRONG_EDGES.c.src).where(STRONG_EDGES.c.dst == uri)).scalars())

    def referenced(self, uri: str) -> set[str]:
        return set(self.con.execute(select(STRONG_EDGES.c.dst).where(STRONG_EDGES.c.src == uri)).scalars())

    def remove(self, uri: str) -> None:
        for table, col in ((HELD, "uri_reference"), (HELD_PROPERTIES, "uri_reference"), (STRONG_EDGES, "src"),
                           (MATCHES, "uri_reference")):
            self.con.execute(delete(table).where(table.c[col] == uri))


class LocalRepository:
    """An LMR named ``name`` on its own database (``url``; ``None``: in-memory SQLite),
    subscribed at ``backbone`` (in process; over Kafka a consumer hands :meth:`apply` the
    deltas of its topic instead)."""

    def __init__(self, name: str, url: str | None = None, backbone: Backbone | None = None) -> None:
        self.name = name
        self.engine = open_database(url, METADATA)
        self.schema = Schema()
        with self.engine.connect() as con:
            for text in con.execute(select(LOCAL_SCHEMAS.c.text).order_by(LOCAL_SCHEMAS.c.seq)).scalars():
                self.schema.add(text)
        self.backbone = backbone
        if backbone is not None:
            backbone.connect(name, self.apply)

    def _backbone(self) -> Backbone:
        if self.backbone is None:
            raise RuntimeError(f"repository {self.name} has no backbone to subscribe at")
        return self.backbone

    def subscribe(self, rule: str) -> int:
        """Register a subscription rule at the backbone; returns its id. What it matches arrives
        before this returns. :class:`RuleError` for a bad rule."""
        return self._backbone().subscribe(self.name, rule)

    def subscribe_many(self, rules: list[str]) -> list[int]:
        """Register several rules in one go (all or none)."""
        return self._backbone().subscribe_many(self.name, rules)

    def unsubscribe(self, rule_id: int) -> None:
        """End a subscription; what only it held is collected."""
        self._backbone().unsubscribe(self.name, rule_id)

    def apply(self, delta: Delta) -> set[str]:
        """Bring the repository up to date with a delta (applying one twice changes nothing);
        returns what the collector removed."""
        with self.engine.begin() as con:
            for text in delta.schemas:
                if text not in self.schema.texts:
                    self.schema.add(text)
                    con.execute(insert(LOCAL_SCHEMAS).values(text=text))
            tables = _Tables(con)
            suspects: set[str] = set()
            for uri in delta.deleted:
                suspects |= tables.referenced(uri)
                tables.remove(uri)
            for res in delta.upserts.values():
                suspects |= self._store(con, tables, res)
            known = set(con.execute(select(LOCAL_SUBSCRIPTIONS.c.sub_id)).scalars())
            for sub, (text, type_) in delta.subscribed.items():
                if sub not in known:
                    con.execute(insert(LOCAL_SUBSCRIPTIONS).values(sub_id=sub, text=text, type=type_))
            for sub, rule, uri in delta.unmatched:
                con.execute(delete(MATCHES).where(MATCHES.c.sub_id == sub, MATCHES.c.rule_id == rule,
                                                  MATCHES.c.uri_reference == uri))
                suspects.add(uri)
            # A delta read twice from a topic (at-least-once) must change nothing the second time.
            fresh = delta.matched - self._matches(con, {u for _, _, u in delta.matched})
            if fresh:
                con.execute(insert(MATCHES), [{"sub_id": s, "rule_id": r, "uri_reference": u} for s, r, u in sorted(fresh)])
            for sub in delta.unsubscribed:
                suspects |= set(con.execute(select(MATCHES.c.uri_reference).where(MATCHES.c.sub_id == sub)).scalars())
                con.execute(delete(MATCHES).where(MATCHES.c.sub_id == sub))
                con.execute(delete(LOCAL_SUBSCRIPTIONS).where(LOCAL_SUBSCRIPTIONS.c.sub_id == sub))
            return collect(tables, suspects)

    @staticmethod
    def _matches(con: Connection, uris: set[str]) -> set[tuple[int, int, str]]:
        found: set[tuple[int, int, str]] = set()
        ordered = sorted(uris)
        for i in range(0, len(ordered), 500):
            found |= {tuple(r) for r in con.execute(select(MATCHES.c.sub_id, MATCHES.c.rule_id, MATCHES.c.uri_reference)
                                                    .where(MATCHES.c.uri_reference.in_(ordered[i:i + 500])))}
        return found

    def _store(self, con: Connection, tables: _Tables, res: Resource) -> set[str]:
        """Store or replace one resource; returns what it referenced strongly before and now
        (each may have lost or gained a referrer)."""
        before = tables.referenced(res.uri)
        for table in (HELD, HELD_PROPERTIES, STRONG_EDGES):
            con.execute(delete(table).where(table.c[("src" if table is STRONG_EDGES else "uri_reference")] == res.uri))
        con.execute(insert(HELD).values(uri_reference=res.uri, **{"class": res.cls}))
        rows, edges = [], set()
        for name, values in res.props.items():
            prop = self.schema.properties.get(name)
            for v in values:
                rows.append({"uri_reference": res.uri, "property": name, "value": v,
                             "num": number(v) if prop is not None and prop.range is None else None})
                if prop is not None and prop.reference == "strong":
                    edges.add(v)
        if rows:
            con.execute(insert(HELD_PROPERTIES), rows)
        if edges:
            con.execute(insert(STRONG_EDGES), [{"src": res.uri, "dst": d} for d in sorted(edges)])
        return before | edges | {res.uri}

    def resources(self) -> dict[str, dict[str, list[str]]]:
        """What the repository holds: uri -> property -> values (sorted)."""
        out: dict[str, dict[str, list[str]]] = {}
        with self.engine.connect() as con:
            for uri in con.execute(select(HELD.c.uri_reference)).scalars():
                out[uri] = {}
            for uri, prop, value in con.execute(select(HELD_PROPERTIES.c.uri_reference, HELD_PROPERTIES.c.property,
                                                       HELD_PROPERTIES.c.value)):
                out[uri].setdefault(prop, []).append(value)
        return {u: {p: sorted(v) for p, v in sorted(props.items())} for u, props in sorted(out.items())}

    def subscriptions(self) -> dict[int, str]:
        """This repository's subscriptions: id -> rule text."""
        with self.engine.connect() as con:
            return dict(con.execute(select(LOCAL_SUBSCRIPTIONS.c.sub_id, LOCAL_SUBSCRIPTIONS.c.text)).all())

    def query(self, text: str) -> set[str]:
        """The URI references a rule registers on this repository's data alone; ``rule(N)``
        names one of its subscriptions. :class:`RuleError` for a bad rule."""
        with self.engine.connect() as con:
            types = dict(con.execute(select(LOCAL_SUBSCRIPTIONS.c.sub_id, LOCAL_SUBSCRIPTIONS.c.type)).all())
            conjuncts = normalize(parse(text), self.schema, types.get)
            return set(con.execute(query_select(conjuncts, self.engine.dialect.name)).scalars())
