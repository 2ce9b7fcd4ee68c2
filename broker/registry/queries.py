"""The query service: ad-hoc queries over a source's recent messages, answered by the
semantic cache of query regions (:mod:`cache`, the YACOB mediator's cache of thesis
``../shared/seeds/002``, section 2.3's query processing; reading notes
``notes-semantic-cache.md``) in front of the archive (:mod:`archive`).

* ``POST /queries``: ``{"source", "query": "/nitf/head/pubdata[@edition.area = 'SF']",
  "from"?, "to"?}``: the source's archived messages of the window with a ``concept``
  element satisfying the predicate (:func:`cache.split_query`), streamed as JSON lines:
  the part found in the cache first, then the remainder's messages as the archive finds
  them, then a summary (``from_cache``, ``from_source``, ``remainder``, ``match_types``,
  ``window``);
* ``GET /cache``: per source, the cache's counters and regions.

One :class:`cache.SemanticCache` per source lives in the service process, timed (the
window is one more interval attribute, the notes' section 7), over the archive as the
writer last flushed it at each call (:class:`ArchiveSnapshots`). A region is complete for
its window only if no message can still be archived into it, so a window ends at the
archive's settled time at the latest (:meth:`cache.archive_source.ArchiveSource.settled`):
a later ``to`` is cut there, and the summary says so. Capacity and lifetimes:
``ONYX_QUERY_CACHE_BYTES``, ``ONYX_QUERY_CACHE_MAX_AGE``, ``ONYX_QUERY_CACHE_MAX_IDLE``
(:mod:`broker.config`); a retraction in the archive is seen once a region expires.

>>> resolve_window(None, None, settled=10_000_000)
(6400000, 10000000)
>>> resolve_window(5, 20_000_000, settled=10_000_000)
(5, 10000000)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, field_validator

from archive.snapshot import snapshot
from broker import config
from broker.registry import access
from broker.registry.app import MAX_PROFILE_CHARS, Error, JsonInt, error_responses, whole_number
from broker.registry.console import OPERATOR
from broker.registry.detached import detached
from broker.registry.store import Store
from broker.registry.time_travel import MAX_LISTED, MAX_TIME, NDJSON, NO_ARCHIVE, json_line
from cache import CacheError, Condition, QueryResult, RegionInfo, SemanticCache, Window, split_query
from cache.archive_source import ArchiveSource
from routing.overlay import Overlay

Row = tuple[str, bytes, float]


class QueryIn(BaseModel):
    model_config = {"populate_by_name": True, "json_schema_extra": {"examples": [
        {"source": "news", "query": "/nitf/head/pubdata[@edition.area = 'SF' and @position.sequence <= 3]",
         "from": 1764115200000, "to": 1764118800000}]}}

    source: str = Field(min_length=1, max_length=200, description="the source whose messages are asked")
    query: str = Field(min_length=1, max_length=MAX_PROFILE_CHARS,
                       description="an element path and one predicate over that element's attributes, string value "
                                   "and child paths: comparisons with literals, contains(), existence, and/or/not() "
                                   "(no positions, starts-with(), // or * inside the predicate); without a predicate, "
                                   "every message with such an element",
                       json_schema_extra={"format": "onyx-query"})
    start: JsonInt | None = Field(None, alias="from", ge=0, le=MAX_TIME,
                              description="the window's first millisecond (archive time, inclusive; default: "
                                          f"{config.QUERY_WINDOW_MS:,} ms before its end)")
    end: JsonInt | None = Field(None, alias="to", ge=0, le=MAX_TIME,
                            description="the window's last millisecond (inclusive; default, and at most: the "
                                        "archive's settled time, the last one no message can still be archived at). "
                                        f"A window is at most {config.REPLAY_MAX_WINDOW_MS:,} ms wide (422)")
    limit: JsonInt = Field(1000, ge=1, le=MAX_LISTED, description="at most this many messages in the answer (the rest: "
                       "done.truncated)")

    @field_validator("start", "end", "limit", mode="before")
    @classmethod
    def _whole(cls, v: Any) -> Any:
        return whole_number(v)


class RegionView(BaseModel):
    concept: str
    condition: str = Field(description="XPath predicate text selecting exactly the region's items")
    items: int
    bytes: int
    created: float = Field(description="when the region was collected (seconds since 1970)")
    last_access: float = Field(description="when a query last used it (seconds since 1970)")
    window: list[float] = Field(description="[from, to]: the archive times (ms, inclusive) the region is complete for")


class SourceCache(BaseModel):
    source: str
    stats: dict[str, int | float] = Field(description="regions, bytes and capacity_bytes now; since the service started: "
                                                "queries, items_from_cache, items_from_source, source_calls, "
                                                "evicted, expired, match_calls, fallbacks, cut_short")
    regions: list[RegionView]


class CacheView(BaseModel):
    capacity_bytes: int = Field(description="each source's cache's capacity")
    sources: list[SourceCache] = Field(description="the sources asked since the service started")


def resolve_window(start: int | None, end: int | None, settled: int) -> tuple[int, int]:
    """The window a query is answered over: ``end`` cut at ``settled`` (default
    ``settled``), ``start`` by default :data:`broker.config.QUERY_WINDOW_MS` before it."""
    last = settled if end is None else min(end, settled)
    return (max(last - config.QUERY_WINDOW_MS, 0) if start is None else start), last


class ArchiveSnapshots:
    """The timed source of a source's cache: :class:`ArchiveSource` over the archive as
    last flushed, opened for each call (the writer waits while it is open). Rows are
    also handed, as they come, to the listener the calling thread set (:meth:`listen`)."""

    def __init__(self, root: Path, source: str) -> None:
        self.root, self.source = root, source
        self._listener = threading.local()

    def __call__(self, concept: str, condition: str, window: Window) -> Iterator[Row]:
        hear = getattr(self._listener, "hear", None)
        with snapshot(self.root) as s:
            for row in ArchiveSource(s.archive, self.source)(concept, condition, window):
                if hear is not None:
                    hear(row)
                yield row

    def listen(self, hear) -> None:
        """Hand this thread's next calls' rows to ``hear`` (``None``: to nobody)."""
        self._listener.hear = hear

    def settled(self) -> int | None:
        with snapshot(self.root) as s:
            return ArchiveSource(s.archive, self.source).settled()


class QueryCaches:
    """One timed semantic cache per source, made when the source is first asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._caches: dict[str, tuple[SemanticCache, ArchiveSnapshots]] = {}
        self._lock = threading.Lock()

    def of(self, source: str) -> tuple[SemanticCache, ArchiveSnapshots]:
        with self._lock:
            if source not in self._caches:
                rows = ArchiveSnapshots(self.root, source)
                self._caches[source] = (SemanticCache(rows, config.QUERY_CACHE_BYTES, timed=True,
                                                      max_age=config.QUERY_CACHE_MAX_AGE_S,
                                                      max_idle=config.QUERY_CACHE_MAX_IDLE_S), rows)
            return self._caches[source]

    def view(self) -> CacheView:
        with self._lock:
            caches = sorted(self._caches.items())
        return CacheView(capacity_bytes=config.QUERY_CACHE_BYTES, sources=[
            SourceCache(source=name, stats=cache.stats(), regions=[_region(r) for r in cache.regions()])
            for name, (cache, _) in caches])


def _region(r: RegionInfo) -> RegionView:
    return RegionView(concept=r.concept, condition=r.condition, items=r.items, bytes=r.bytes, created=r.created,
                      last_access=r.last_access, window=[r.window.lo, r.window.hi])


def _item(message_id: str, xml: bytes, cached: bool) -> bytes:
    return json_line({"item": {"message_id": message_id, "xml": xml.decode(errors="replace"), "cached": cached}})


def _summary(result: QueryResult | None, window: tuple[int, int] | None, settled: int | None,
             end: int | None, truncated: bool = False, operator: bool = True) -> dict[str, Any]:
    """The answer's last line. The remainder and the regions used are made of other users'
    queries' predicates (the cache's regions): an operator's alone, like ``GET /cache``."""
    shown = result if operator else None
    return {"done": {
        "items": len(result.items) if result else 0, "from_cache": result.from_cache if result else 0,
        "from_source": result.from_source if result else 0, "remainder": shown.remainder if shown else None,
        "match_types": result.match_types if result else [], "regions_used": shown.regions_used if shown else [],
        "window": None if window is None else {"from": window[0], "to": window[1]}, "settled": settled,
        "cut": end is not None and settled is not None and end > settled, "truncated": truncated}}


def answer(cache: SemanticCache, rows: ArchiveSnapshots, concept: str, condition: Condition,
           window: tuple[int, int]) -> Iterator[tuple[str, Any]]:
    """Run the query apart from its client (:func:`broker.registry.detached.detached`) and
    yield what it produces as it comes: ``("cached", items)``, ``("row", (id, xml, time))``
    per row the archive answers the remainder with, then ``("done", result)`` or
    ``("error", exc)``."""

    def produce(emit) -> QueryResult:
        rows.listen(lambda row: emit(("row", row)))
        try:
            return cache.query(concept, condition, window, on_cached=lambda items: emit(("cached", items)))
        finally:
            rows.listen(None)

    return detached(produce, name="onyx-query")


def add_queries(app: FastAPI, store: Store, overlay: Overlay, archive_dir: Path | None) -> None:
    """Add ``POST /queries`` and ``GET /cache`` (see the module docstring) to the
    registration service's ``app``; without ``archive_dir`` the first answers 503."""
    caches = QueryCaches(archive_dir) if archive_dir is not None else None
    rights = access.of(app)

    @app.post("/queries", summary="Ad-hoc query over a source's recent messages, through the semantic cache",
              operation_id="query", response_class=StreamingResponse, response_model=None,
              responses={200: {"description": "JSON lines: {\"item\": {message_id, xml, cached}} per message, the "
                                              "ones found in the cache first (cached true), then the remainder's as "
                                              "the archive finds them; last {\"done\": {items, from_cache, "
                                              "from_source, remainder (the predicate the archive was asked, null: "
                                              "none or not an operator), match_types and regions_used (per cached "
                                              "region used; an operator's only: regions hold others' predicates), window "
                                              "{from, to} (null: nothing archived yet), settled, cut (to was after "
                                              "settled), truncated (more than limit items: the first ones only)}} "
                                              "(or {\"error\": {detail}} if the archive failed)",
                               "content": {NDJSON: {"schema": {"type": "string"}}}},
                         **error_responses({400: "the body is not JSON, or a query the cache cannot reason about "
                                                 "(with the column)", 401: "no or an unknown token",
                                            403: "a token of another kind", 404: "no such source you may read",
                                            413: "the body is too large",
                                            422: "a bad or missing field, or a window wider than "
                                                 f"{config.REPLAY_MAX_WINDOW_MS:,} ms",
                                            503: NO_ARCHIVE})})
    def query(body: QueryIn, who: access.Caller = Depends(rights.allow(
            "subscriber", "owner", "publisher", "operator",
            sees="the messages of a source whose archive it may read (public, granted, its own); an operator: any"))
              ) -> StreamingResponse | JSONResponse:
        """The messages of ``source`` archived in ``[from, to]`` (archive time, inclusive)
        with a ``concept`` element satisfying the predicate: the part earlier queries
        fetched from the cache, the rest (the remainder) from the archive, kept as new
        regions for later queries. Streamed as JSON lines while it runs."""
        if caches is None:
            raise HTTPException(503, NO_ARCHIVE)
        if (store.source(body.source) is None and body.source not in overlay.sources) \
                or not rights.may_read(who, body.source):
            raise HTTPException(404, f"no source {body.source!r} you may read (its publisher or an operator grants "
                                     "it: PUT /sources/{source_id}/grants/{subscriber_id})")
        try:
            concept, condition = split_query(body.query)
        except CacheError as exc:
            return JSONResponse(status_code=400, content=Error(detail=str(exc), column=getattr(exc, "column", None))
                                .model_dump(exclude_none=True))
        cache, rows = caches.of(body.source)
        settled = rows.settled()
        window = None if settled is None else resolve_window(body.start, body.end, settled)
        if window is not None and window[1] - window[0] > config.REPLAY_MAX_WINDOW_MS:
            raise HTTPException(422, f"the window [{window[0]}, {window[1]}] is wider than "
                                     f"{config.REPLAY_MAX_WINDOW_MS:,} ms: ask for it in pieces")

        def lines() -> Iterator[bytes]:
            if window is None or window[0] > window[1]:
                yield json_line(_summary(None, window, settled, body.end))
                return
            sent: set[str] = set()

            def item(message_id: str, xml: bytes, cached: bool) -> Iterator[bytes]:
                if len(sent) < body.limit:
                    sent.add(message_id)
                    yield _item(message_id, xml, cached)

            for kind, x in answer(cache, rows, concept, condition, window):
                if kind == "cached":
                    for message_id, xml in x.items():
                        yield from item(message_id, xml, True)
                elif kind == "row" and x[0] not in sent:
                    yield from item(x[0], x[1], False)
                elif kind == "done":
                    # The cache's answer is the reference; the rows brought all of it.
                    for message_id in sorted(x.items.keys() - sent):
                        yield from item(message_id, x.items[message_id], False)
                    yield json_line(_summary(x, window, settled, body.end, truncated=len(x.items) > len(sent),
                                             operator=who.operator))
                elif kind == "error":
                    yield json_line({"error": {"detail": f"the archive failed: {x}"}})

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.get("/cache", response_model=CacheView, summary="The query service's semantic cache",
             operation_id="cache", responses=error_responses(OPERATOR),
             dependencies=[Depends(rights.allow("operator", sees="every source's cache: counters and the regions, "
                                                                 "which hold every user's query predicates"))])
    def cache_view() -> CacheView:
        """Per source asked since the service started: the cache's counters
        (:meth:`cache.SemanticCache.stats`) and its regions (concept, condition, items,
        bytes, created, last access, window)."""
        if caches is None:
            return CacheView(capacity_bytes=config.QUERY_CACHE_BYTES, sources=[])
        return caches.view()
