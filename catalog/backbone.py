"""A Metadata Provider of MDV's backbone (paper sections 2.2 and 3): metadata is registered,
updated and deleted here, only as whole RDF documents; local repositories subscribe by rules;
after each batch of documents the filter finds what changed for which repository and sends each
a :class:`~catalog.delta.Delta`.

A batch (section 4: per document or periodically) runs the three filter runs of section 3.5 when
it updates or deletes anything: (1) the old versions of updated and deleted resources against the
old state give candidates; the changes are applied and the candidates dropped from the
materialized results; (2) the candidate resources are filtered again: what still holds comes back
(the "wrong candidates"); (3) the new and updated resources are filtered as an insert. A result
lost for good is a candidate that did not come back. A batch of inserts only runs (3).

A new subscription's atomic rules are evaluated over the whole store when they are created, and
the repository gets the result at once (the initial load, which the paper leaves open). On
unsubscribe the atomic rules no other subscription uses are removed (``RuleUses`` counts them).

>>> from catalog.schema import FIGURE_1_SCHEMA
>>> from catalog.document import FIGURE_1
>>> mdp = Backbone()
>>> mdp.register_schema(FIGURE_1_SCHEMA)
>>> got = []
>>> mdp.connect("lmr-1", got.append)
>>> sub = mdp.subscribe("lmr-1", "search CycleProvider c register c where c.serverInformation.memory > 64")
>>> mdp.register_document("doc.rdf", FIGURE_1)
>>> sorted(got[-1].upserts), got[-1].matched == {(sub, 3, "doc.rdf#host")}
(['doc.rdf#host', 'doc.rdf#info'], True)
"""

from __future__ import annotations

import time
from itertools import product
from typing import Callable

from sqlalchemy import delete, func, insert, select
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection

from catalog import defaults
from catalog.decompose import decompose
from catalog.delta import Delta
from catalog.document import Resource, parse_document
from catalog.db import open_database
from catalog.errors import DocumentError, SubscriptionError
from catalog.filter import Filter
from catalog.normalize import normalize
from catalog.parser import parse
from catalog.rulebase import RuleBase
from catalog.schema import Schema
from catalog.shipping import closure, end_results, holders
from catalog.tables import (ATOMIC_RULES, BATCH_RESOURCES, DOCUMENTS, FILTER_DATA, FILTER_INPUT, MATERIALIZED,
                            METADATA, REPOSITORIES, RESULT_OBJECTS, RULE_USES, SCHEMAS, STRONG_PROPERTIES,
                            SUBSCRIPTION_RULES, SUBSCRIPTIONS)
from catalog.values import number

RO, FD = RESULT_OBJECTS, FILTER_DATA


def _chunks(items: list, size: int = 500):
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Backbone:
    """One MDP on a database (``url``; ``None``: in-memory SQLite). ``batch_size`` documents (or
    ``batch_period`` seconds, see :meth:`flush_due`) make a batch; :meth:`flush` filters one now."""

    def __init__(self, url: str | None = None, *, batch_size: int = defaults.BATCH_SIZE,
                 batch_period: float | None = defaults.BATCH_PERIOD_S) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.engine = open_database(url, METADATA)
        self.filter = Filter(self.engine.dialect.name)
        self.batch_size, self.batch_period = batch_size, batch_period
        self.schema = Schema()
        self.pending: dict[str, dict[str, Resource] | None] = {}
        self.pending_since: float | None = None
        self.repositories: dict[str, Callable[[Delta], None]] = {}
        with self.engine.begin() as con:
            for text in con.execute(select(SCHEMAS.c.text).order_by(SCHEMAS.c.seq)).scalars():
                self.schema.add(text)
            self.rules = RuleBase(con)
            self.next_sub = (con.execute(select(func.max(SUBSCRIPTIONS.c.sub_id))).scalar() or 0) + 1

    # -- schema, repositories ---------------------------------------------------------------

    def register_schema(self, rdfs_xml: str) -> None:
        """Add the classes and properties of an RDF Schema (RDF/XML); :class:`SchemaError` if it
        cannot be read or redefines a registered name. Every repository gets it."""
        self.schema.add(rdfs_xml)
        with self.engine.begin() as con:
            con.execute(insert(SCHEMAS).values(text=rdfs_xml))
            con.execute(delete(STRONG_PROPERTIES))
            if self.schema.strong:
                con.execute(insert(STRONG_PROPERTIES), [{"property": p} for p in sorted(self.schema.strong)])
        for deliver in self.repositories.values():
            deliver(Delta(schemas=[rdfs_xml]))

    def connect(self, lmr: str, deliver: Callable[[Delta], None]) -> None:
        """Attach repository ``lmr``: ``deliver`` receives its deltas (first the schema). A
        name reconnects to its subscriptions; it cannot be attached twice at once."""
        if lmr in self.repositories:
            raise SubscriptionError(f"repository {lmr} is connected already")
        with self.engine.begin() as con:
            if not con.execute(select(REPOSITORIES).where(REPOSITORIES.c.name == lmr)).first():
                con.execute(insert(REPOSITORIES).values(name=lmr))
        self.repositories[lmr] = deliver
        if self.schema.texts:
            deliver(Delta(schemas=list(self.schema.texts)))

    def disconnect(self, lmr: str) -> None:
        """Detach repository ``lmr`` (its subscriptions stay; nothing is delivered to it)."""
        self.repositories.pop(lmr, None)

    # -- documents --------------------------------------------------------------------------

    def register_document(self, doc_uri: str, rdf_xml: str) -> None:
        """Register (or, for a known ``doc_uri``, update) a document; :class:`DocumentError` if
        it is not valid RDF/XML of the schema. Filtered when its batch closes."""
        self._queue(doc_uri, parse_document(doc_uri, rdf_xml, self.schema))

    def register_resources(self, doc_uri: str, resources: dict[str, Resource]) -> None:
        """:meth:`register_document` for a document its writer has as resources already (what
        :func:`~catalog.document.parse_document` gives for its RDF/XML): a service that builds
        its own documents skips reading them back, which is most of a registration's cost.
        :class:`DocumentError` for a resource outside the document or of a class the schema
        lacks."""
        for uri, res in resources.items():
            if not uri.startswith(doc_uri + "#") or res.uri != uri:
                raise DocumentError(f"document {doc_uri} cannot hold {uri}")
            if res.cls not in self.schema.classes:
                raise DocumentError(f"resource {uri}: {res.cls} is not a class of the schema")
        self._queue(doc_uri, resources)

    def documents(self) -> set[str]:
        """The URIs of the documents registered (those of the open batch included)."""
        with self.engine.connect() as con:
            stored = set(con.execute(select(DOCUMENTS.c.uri)).scalars())
        return (stored | {d for d, r in self.pending.items() if r is not None}) - {
            d for d, r in self.pending.items() if r is None}

    def delete_document(self, doc_uri: str) -> None:
        """Delete a document with all its resources; :class:`DocumentError` if there is none."""
        if self.pending.get(doc_uri) is None:
            with self.engine.connect() as con:
                if not con.execute(select(DOCUMENTS).where(DOCUMENTS.c.uri == doc_uri)).first():
                    raise DocumentError(f"no document {doc_uri} is registered")
        self._queue(doc_uri, None)

    def _queue(self, doc_uri: str, resources: dict[str, Resource] | None) -> None:
        self.pending[doc_uri] = resources
        if self.pending_since is None:
            self.pending_since = time.monotonic()
        if len(self.pending) >= self.batch_size:
            self.flush()
        else:
            self.flush_due()

    def flush_due(self) -> dict | None:
        """Filter the collected changes if the oldest waited ``batch_period`` seconds (a service
        calls this on a timer); returns :meth:`flush`'s report, or ``None``."""
        if self.pending and self.batch_period is not None and time.monotonic() - self.pending_since >= self.batch_period:
            return self.flush()
        return None

    def flush(self) -> dict:
        """Filter the collected changes now and deliver the deltas. Returns a report: documents,
        resources inserted / updated / deleted, the last iteration of each run, the seconds of
        the filter (its transaction: runs, deltas, commit) and in all (delivery included)."""
        pending, self.pending, self.pending_since = self.pending, {}, None
        t0 = time.perf_counter()
        with self.engine.begin() as con:
            report, deltas = self._batch(con, pending)
        report["filter_seconds"] = time.perf_counter() - t0
        for lmr, delta in deltas.items():
            if lmr in self.repositories and not delta.empty():
                self.repositories[lmr](delta)
        report["seconds"] = time.perf_counter() - t0
        return report

    def _stored(self, con: Connection, docs: list[str]) -> dict[str, Resource]:
        rows: dict[str, dict] = {}
        for chunk in _chunks(docs):
            for uri, cls, prop, value in con.execute(select(FD.c.uri_reference, FD.c["class"], FD.c.property,
                                                            FD.c.value).where(FD.c.doc.in_(chunk))):
                r = rows.setdefault(uri, {"cls": cls, "props": {}})
                if prop != defaults.SUBJECT:
                    r["props"].setdefault(prop, []).append(value)
        return {u: Resource(u, r["cls"], {k: tuple(sorted(v)) for k, v in sorted(r["props"].items())})
                for u, r in rows.items()}

    def _rows(self, res: Resource, doc: str) -> list[dict]:
        literal = {name for name in res.props if self.schema.properties[name].range is None}
        out = [{"uri_reference": res.uri, "class": res.cls, "property": defaults.SUBJECT, "value": res.uri,
                "num": None, "doc": doc}]
        for name, values in res.props.items():
            out += [{"uri_reference": res.uri, "class": res.cls, "property": name, "value": v,
                     "num": number(v) if name in literal else None, "doc": doc} for v in values]
        return out

    def _set_input(self, con: Connection, uris) -> None:
        con.execute(delete(FILTER_INPUT))
        if uris:
            con.execute(insert(FILTER_INPUT), [{"uri_reference": u} for u in sorted(uris)])

    def _batch(self, con: Connection, pending: dict) -> tuple[dict, dict[str, Delta]]:
        old = self._stored(con, list(pending))
        new = {u: r for resources in pending.values() if resources for u, r in resources.items()}
        inserted = new.keys() - old.keys()
        deleted = old.keys() - new.keys()
        updated = {u for u in new.keys() & old.keys() if new[u] != old[u]}
        report = {"documents": len(pending), "inserted": len(inserted), "updated": len(updated),
                  "deleted": len(deleted), "iterations": {}}
        con.execute(delete(RO))
        con.execute(delete(BATCH_RESOURCES))
        changes = [{"uri_reference": u, "change": c} for c, us in (("insert", inserted), ("update", updated),
                                                                   ("delete", deleted)) for u in sorted(us)]
        if changes:
            con.execute(insert(BATCH_RESOURCES), changes)
        gone: set[tuple[str, str]] = set()
        if updated or deleted:
            self.filter.keep_join_order(con)
            gone = holders(con, ("delete",))
            self._set_input(con, updated | deleted)
            report["iterations"][1] = self.filter.candidates(con)
        changed = sorted(updated | deleted)
        for chunk in _chunks(changed):
            con.execute(delete(FD).where(FD.c.uri_reference.in_(chunk)))
        rows = [row for u in sorted(inserted | updated) for row in self._rows(new[u], u.split("#", 1)[0])]
        if rows:
            con.execute(insert(FD), rows)
        stored_docs: set[str] = set()
        for chunk in _chunks(list(pending)):
            stored_docs |= set(con.execute(select(DOCUMENTS.c.uri).where(DOCUMENTS.c.uri.in_(chunk))).scalars())
        # one statement per kind, not per document: a batch of 20,000 spent half its time here
        for chunk in _chunks(sorted(d for d, r in pending.items() if r is None and d in stored_docs)):
            con.execute(delete(DOCUMENTS).where(DOCUMENTS.c.uri.in_(chunk)))
        added = [{"uri": d} for d, r in sorted(pending.items()) if r is not None and d not in stored_docs]
        if added:
            con.execute(insert(DOCUMENTS), added)
        if updated or deleted:
            self.filter.drop_candidates(con)
            self._set_input(con, set(con.execute(select(RO.c.uri_reference).distinct().where(RO.c.run == 1)).scalars()))
            report["iterations"][2] = self.filter.run(con, 2)
        self._set_input(con, inserted | updated)
        report["iterations"][3] = self.filter.run(con, 3)
        return report, self._deltas(con, gone)

    def _deltas(self, con: Connection, gone: set[tuple[str, str]]) -> dict[str, Delta]:
        """Per repository: end-rule results lost and gained, what to ship, what is gone."""
        deltas: dict[str, Delta] = {}
        for rule, uri, lmr, sub in end_results(con, lost=True):
            deltas.setdefault(lmr, Delta()).unmatched.add((sub, rule, uri))
        roots = set()
        for rule, uri, lmr, sub in end_results(con, lost=False):
            deltas.setdefault(lmr, Delta()).matched.add((sub, rule, uri))
            roots.add((lmr, uri))
        roots |= holders(con, ("insert", "update"))
        for lmr, found in closure(con, roots).items():
            deltas.setdefault(lmr, Delta()).upserts.update(found)
        for lmr, uri in gone:
            deltas.setdefault(lmr, Delta()).deleted.add(uri)
        return deltas

    # -- subscriptions ----------------------------------------------------------------------

    def _rule_type(self, con: Connection, sub: int) -> str | None:
        return con.execute(select(SUBSCRIPTIONS.c.type).where(SUBSCRIPTIONS.c.sub_id == sub)).scalar()

    def subscribe(self, lmr: str, text: str) -> int:
        """Register a subscription rule of repository ``lmr``; returns its id. The repository
        gets what the rule matches now at once. :class:`RuleError` for a bad rule (nothing of it
        stays behind)."""
        return self.subscribe_many(lmr, [text])[0]

    def subscribe_many(self, lmr: str, texts: list[str]) -> list[int]:
        """Register several rules of ``lmr`` in one transaction (all or none); their ids."""
        if lmr not in self.repositories:
            raise SubscriptionError(f"repository {lmr} is not connected")
        delta = Delta()
        try:
            with self.engine.begin() as con:
                subs, uses, ends = [], [], []
                for text in texts:
                    sub = self.next_sub + len(subs)
                    conjs = normalize(parse(text), self.schema, lambda n: self._rule_type(con, n))
                    mine: set[int] = set()
                    for conj in conjs:
                        bound = [v for v in conj.vars if v.rule is not None]
                        options = [con.execute(select(SUBSCRIPTION_RULES.c.rule_id).where(
                            SUBSCRIPTION_RULES.c.sub_id == v.rule)).scalars().all() for v in bound]
                        for combo in product(*options):
                            mine.add(decompose(conj, {v.name: e for v, e in zip(bound, combo)}, self.rules))
                    used = set(self.rules.touched)
                    self.rules.touched.clear()
                    for v in {v.rule for conj in conjs for v in conj.vars if v.rule is not None}:
                        used |= set(con.execute(select(RULE_USES.c.rule_id).where(RULE_USES.c.sub_id == v)).scalars())
                    subs.append({"sub_id": sub, "lmr": lmr, "text": text, "type": conjs[0].var(conjs[0].register).cls})
                    uses += [{"sub_id": sub, "rule_id": r} for r in sorted(used)]
                    ends += [{"sub_id": sub, "rule_id": r} for r in sorted(mine)]
                new = self.rules.new_by_depth()
                self.rules.write(con)
                con.execute(insert(SUBSCRIPTIONS), subs)
                con.execute(insert(RULE_USES), uses)
                con.execute(insert(SUBSCRIPTION_RULES), ends)
                self.filter.materialize_new(con, new)
                found = con.execute(select(SUBSCRIPTION_RULES.c.sub_id, MATERIALIZED.c.rule_id,
                                           MATERIALIZED.c.uri_reference).where(
                    MATERIALIZED.c.rule_id == SUBSCRIPTION_RULES.c.rule_id,
                    SUBSCRIPTION_RULES.c.sub_id.between(subs[0]["sub_id"], subs[-1]["sub_id"]))).all()
                delta.matched = {tuple(row) for row in found}
                delta.upserts = closure(con, {(lmr, uri) for _, _, uri in found}).get(lmr, {})
                delta.subscribed = {s["sub_id"]: (s["text"], s["type"]) for s in subs}
        except BaseException:
            self.rules.discard()
            raise
        self.next_sub += len(subs)
        if len(texts) >= defaults.ANALYZE_AFTER_RULES:
            with self.engine.begin() as con:
                con.execute(sql("ANALYZE"))
        self.repositories[lmr](delta)
        return [s["sub_id"] for s in subs]

    def unsubscribe(self, lmr: str, sub: int) -> None:
        """End subscription ``sub`` of ``lmr``; atomic rules no other subscription uses go."""
        with self.engine.begin() as con:
            owner = con.execute(select(SUBSCRIPTIONS.c.lmr).where(SUBSCRIPTIONS.c.sub_id == sub)).scalar()
            if owner != lmr:
                raise SubscriptionError(f"repository {lmr} has no subscription {sub}")
            for table in (SUBSCRIPTION_RULES, RULE_USES, SUBSCRIPTIONS):
                con.execute(delete(table).where(table.c.sub_id == sub))
            self.rules.remove_unused(con)
        if lmr in self.repositories:
            self.repositories[lmr](Delta(unsubscribed={sub}))

    # -- inspection -------------------------------------------------------------------------

    def atomic_rules(self) -> list[tuple[int, str, int | None]]:
        """``AtomicRules`` (Figure 7): (rule_id, text, group), by id."""
        with self.engine.connect() as con:
            return [tuple(r) for r in con.execute(select(ATOMIC_RULES.c.rule_id, ATOMIC_RULES.c.text,
                                                         ATOMIC_RULES.c.group).order_by(ATOMIC_RULES.c.rule_id))]

    def rows(self, table: str, *columns: str) -> list[tuple]:
        """The rows of one of the filter's tables (``columns``: all if none), sorted."""
        t = METADATA.tables[table]
        cols = [t.c[c] for c in columns] if columns else list(t.c)
        with self.engine.connect() as con:
            return sorted((tuple(r) for r in con.execute(select(*cols))), key=repr)
