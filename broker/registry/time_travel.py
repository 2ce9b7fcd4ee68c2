"""Time travel over HTTP: the registration service's questions to the archive
(:mod:`archive`, written beside the brokers by :mod:`archive.writer`).

* ``POST /replay``: the messages (or FLWR results) a profile — registered, or given as
  text — would have matched in a window, found through the archive's value index and
  verified with the engine; streamed as JSON lines (progress, matches, a summary);
* ``GET /archive/messages?at=T[&where=P=V]``: the messages in the archive at ``T``
  (with ``P`` = ``V``: a range-timeslice on the value index), ``GET
  /archive/messages/{id}`` its bytes, ``GET /archive/messages/{id}/recipients`` who
  received it (the profiles active then whose text matches it);
* ``GET /profiles/{id}/history``: every version of a profile, ``GET
  /archive/profiles?at=T``: the profiles active at ``T`` (an RI-tree stabbing query);
  ``GET /sources/{id}/history``: every version of a source's catalog record;
* ``POST /profiles/{id}/backfill``: the profile's archived matches since a time, delivered
  on its delivery topic up to the seam where its live deliveries start
  (:mod:`broker.registry.backfill`).

Times are milliseconds since the epoch (Kafka record timestamps). Every read opens the
archive as its writer last flushed it (:func:`archive.snapshot.snapshot`).

>>> ReplayIn.model_validate({"text": "/nitf", "from": 0, "to": 10}).start
0
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, field_validator, model_validator

from archive.errors import StorageError
from archive.replay import Replayed, indexable
from archive.snapshot import Snapshot, snapshot
from broker import config
from broker.registry.app import (MAX_PROFILE_CHARS, PROFILE_TOKEN_HEADER, Error, JsonInt, ProfileBearer,
                                 ProfileTokenHeader, check_token, error_responses, profile_token, whole_number)
from broker.registry.backfill import BackfillError, SeamFinder
from broker.registry.store import ProfileRecord, Store
from routing.overlay import Overlay
from yfilter import validate

NDJSON = "application/x-ndjson"
MAX_TIME = 2**53 - 1  # milliseconds: the largest integer every JSON reader keeps exact
MAX_LISTED = 10_000  # messages or profiles in one answer
NO_ARCHIVE = ("the archive is not running: start the overlay with it (`onyx up`, the default; not --no-archive), "
               "or give the service ONYX_ARCHIVE_DIR")


class ReplayIn(BaseModel):
    model_config = {"populate_by_name": True,
                    "json_schema_extra": {
                        "examples": [{"profile_id": "5b0c8a1f2e3d4c5b", "from": 1764115200000, "to": 1764118800000}],
                        # exactly one of the two, as JSON Schema says it
                        "oneOf": [{"required": ["profile_id"], "not": {"required": ["text"]}},
                                  {"required": ["text"], "not": {"required": ["profile_id"]}}]}}

    # Not nullable: absent is how one of the two is left out (null is refused).
    profile_id: str = Field(None, min_length=1, max_length=200, description="a registered profile (its "
                                   "current text; a deleted one's last); or give text")
    text: str = Field(None, min_length=1, max_length=MAX_PROFILE_CHARS, description="an XPath filter or "
                             "FLWR query, as POST /profiles takes", json_schema_extra={"format": "onyx-profile"})
    start: JsonInt = Field(alias="from", ge=0, le=MAX_TIME,
                       description="the window's first millisecond since 1970 (archive time: the records' Kafka "
                                   "timestamps; inclusive); after to, the window is empty")
    end: JsonInt = Field(alias="to", ge=0, le=MAX_TIME, description="the window's last millisecond (inclusive)")
    source: str = Field(None, min_length=1, max_length=200, description="only this source's messages")

    @field_validator("start", "end", mode="before")
    @classmethod
    def _whole(cls, v: Any) -> Any:
        return whole_number(v)

    @model_validator(mode="after")
    def _one_profile(self) -> "ReplayIn":
        if (self.profile_id is None) == (self.text is None):
            raise ValueError("give either profile_id or text")
        return self


class BackfillIn(BaseModel):
    since: JsonInt = Field(ge=0, le=MAX_TIME, description="the first millisecond (archive time) to deliver from")
    timeout_s: float = Field(config.BACKFILL_TIMEOUT_S, gt=0, le=600,
                             description="how long to wait for the brokers and the archive writer to reach the seam")

    @field_validator("since", mode="before")
    @classmethod
    def _whole(cls, v: Any) -> Any:
        return whole_number(v)


class BackfillDone(BaseModel):
    profile_id: str
    delivered: int = Field(description="records written to the delivery topic (header onyx-backfill: 1)")
    matched: int = Field(description="archived messages the profile matched below the seam")
    seam: dict[str, int] = Field(description="per source:partition, the first offset delivered live")


class ArchivedView(BaseModel):
    message_id: str
    source: str
    partition: int
    offset: int
    time: int = Field(description="archive time (ms): the record's Kafka timestamp, never going back")


class MessagesAt(BaseModel):
    at: int
    messages: list[ArchivedView]
    truncated: bool = Field(description=f"more than {MAX_LISTED:,} messages: the first ones only")


class Recipients(BaseModel):
    message_id: str
    time: int
    profiles: list[str] = Field(description="the profiles active at the message's time whose text matches it")


class Version(BaseModel):
    start: int = Field(alias="from", description="when this text took effect (ms)")
    end: int | None = Field(alias="to", description="when it stopped (null: it is the current text)")
    text: str


class ProfileHistoryView(BaseModel):
    profile_id: str
    versions: list[Version]


class SourceVersion(BaseModel):
    start: int = Field(alias="from", description="when this version was registered (ms)")
    end: int | None = Field(alias="to", description="when it was replaced (null: it is the current one)")
    record: dict[str, Any] = Field(description="the source as the catalog announced it (name, root broker, schema, "
                                   "rate, size, dictionary)")


class SourceHistoryView(BaseModel):
    source_id: str
    versions: list[SourceVersion]


class ActiveProfile(BaseModel):
    profile_id: str
    text: str


class ActiveAt(BaseModel):
    at: int
    profiles: list[ActiveProfile]
    truncated: bool


def _view(rec) -> ArchivedView:
    return ArchivedView(message_id=rec.message_id, source=rec.source, partition=rec.partition, offset=rec.offset,
                        time=rec.time)


def json_line(obj: dict[str, Any]) -> bytes:
    """One line of a streamed answer (:data:`NDJSON`)."""
    return (json.dumps(obj) + "\n").encode()


def _match(r: Replayed) -> dict[str, Any]:
    out = {**_view(r.record).model_dump(), "xml": r.data.decode(errors="replace")}
    if r.results:
        out["results"] = [x.decode(errors="replace") for x in r.results]
    return out


def add_time_travel(app: FastAPI, store: Store, overlay: Overlay, archive_dir: Path | None,
                    bootstrap_servers: str | None = None) -> None:
    """Add the time-travel operations to the registration service's ``app`` (see the
    module docstring); without ``archive_dir`` they answer 503."""

    def opened() -> Path:
        if archive_dir is None:
            raise HTTPException(503, NO_ARCHIVE)
        return archive_dir

    def profile_text(s: Snapshot, profile_id: str, at: int) -> str:
        record = store.profile(profile_id)
        if record is not None:
            return record.text
        text = s.profiles.text_at(profile_id, at) if s.profiles is not None else None
        if text is None and s.profiles is not None:
            versions = s.profiles.history(profile_id)
            text = versions[-1][2] if versions else None
        if text is None:
            raise HTTPException(404, f"no profile {profile_id!r} (registered now or archived)")
        return text

    @app.exception_handler(StorageError)
    async def _archive_unreadable(_: Request, exc: StorageError) -> JSONResponse:
        # A page file the writer never finished (or another version's) is the operator's
        # to look at; every reader says so instead of a bare 500.
        return JSONResponse(status_code=503, content=Error(
            detail=f"the archive cannot be read: {exc}; see the archive writer's log").model_dump(exclude_none=True))

    unavailable = {503: f"{NO_ARCHIVE} (or the database failed, or the archive cannot be read)"}

    @app.post("/replay", summary="What a profile would have matched in a time window", operation_id="replay",
              response_class=StreamingResponse,
              responses={200: {"description": "JSON lines: {\"progress\": {\"done\", \"total\"}} now and then, "
                                              "{\"match\": {message_id, source, partition, offset, time, xml, "
                                              "results (FLWR)}} per message matched, in archive time order per "
                                              "partition, and last {\"done\": {\"matched\", \"candidates\", "
                                              "\"indexed\"}}",
                               "content": {NDJSON: {"schema": {"type": "string"}}}},
                         **error_responses({400: "the body is not JSON", 404: "no such profile",
                                            413: "the body is too large",
                                            422: "not a profile (with the column), neither or both of profile_id "
                                                 "and text, from after to, a bad field", **unavailable})})
    def replay(body: ReplayIn) -> StreamingResponse:
        """The archived messages of ``[from, to]`` (archive time, inclusive) a profile
        matches: candidates from the archive's value index for the profile's required
        equality predicates (the whole window when it has none: ``indexed`` false),
        each verified with the engine. Streamed as JSON lines while it runs."""
        root = opened()
        if body.text is not None:
            validate(body.text)
        # The profile is looked up before the answer starts: a 404 is still possible.
        with snapshot(root) as s:
            text = body.text if body.text is not None else profile_text(s, body.profile_id, body.end)

        def lines() -> Iterator[bytes]:
            state = {"done": 0, "total": 0, "said": time.monotonic()}

            def progress(done: int, total: int) -> None:
                state.update(done=done, total=total)

            matched = 0
            with snapshot(root) as s:
                yield json_line({"progress": {"done": 0, "total": None}})
                for r in s.archive.replay(text, body.start, body.end, source=body.source, progress=progress):
                    matched += 1
                    yield json_line({"match": _match(r)})
                    if time.monotonic() - state["said"] > 0.5:
                        state["said"] = time.monotonic()
                        yield json_line({"progress": {"done": state["done"], "total": state["total"]}})
            yield json_line({"progress": {"done": state["done"], "total": state["total"]}})
            yield json_line({"done": {"matched": matched, "candidates": state["total"],
                                  "indexed": bool(indexable(text))}})

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.get("/archive/messages", response_model=MessagesAt, summary="The messages in the archive at a time",
             operation_id="archive_messages",
             responses=error_responses({422: "a bad parameter", **unavailable}))
    def messages(at: int = Query(ge=0, le=MAX_TIME, description="the time (ms)"),
                 where: str | None = Query(None, min_length=3, max_length=2000, pattern=r"^/[^=]*=",
                                           description="PATH=VALUE: only the messages where an element or attribute "
                                                       "path had a value, e.g. /nitf/head/pubdata/@edition.area=SF "
                                                       "(the value is what follows the first '=')"),
                 ) -> MessagesAt:
        """The messages archived by ``at`` and not retracted then; with ``where``, only
        those where that path had that value (a range-timeslice query)."""
        path, value = where.split("=", 1) if where is not None else (None, None)
        with snapshot(opened()) as s:
            found = s.archive.messages_at(at, path, value)
        return MessagesAt(at=at, messages=[_view(r) for r in found[:MAX_LISTED]], truncated=len(found) > MAX_LISTED)

    @app.get("/archive/messages/{message_id}", summary="An archived message's bytes",
             operation_id="archive_message", response_class=Response,
             responses={200: {"description": "the message as published", "content": {"application/xml": {
                 "schema": {"type": "string"}}}}, **error_responses({404: "no such message", **unavailable})})
    def message(message_id: str) -> Response:
        with snapshot(opened()) as s:
            found = s.archive.find(message_id)
            if found is None:
                raise HTTPException(404, f"no archived message {message_id!r}")
            data = found[0].message(message_id)
        return Response(data, media_type="application/xml")

    @app.get("/archive/messages/{message_id}/recipients", response_model=Recipients,
             summary="Who received a message", operation_id="archive_recipients",
             responses=error_responses({404: "no such message", **unavailable}))
    def recipients(message_id: str) -> Recipients:
        """The profiles active at the message's archive time whose text then matches it."""
        with snapshot(opened()) as s:
            found = s.archive.find(message_id)
            if found is None:
                raise HTTPException(404, f"no archived message {message_id!r}")
            got = s.archive.received(message_id, s.profiles) if s.profiles is not None else set()
        return Recipients(message_id=message_id, time=found[1].time, profiles=sorted(got))

    @app.get("/profiles/{profile_id}/history", response_model=ProfileHistoryView, response_model_by_alias=True,
             summary="Every version of a profile", operation_id="profile_history",
             responses=error_responses({404: "no such profile: not registered, and the archive has no version of it",
                                        **unavailable}))
    def history(profile_id: str) -> ProfileHistoryView:
        """Every archived version of the profile (``to`` null: the current one). The
        archive writer records a change a few seconds after it is made: a profile
        registered just now may have no version yet (an empty list)."""
        with snapshot(opened()) as s:
            versions = s.profiles.history(profile_id) if s.profiles is not None else []
        if not versions and store.profile(profile_id) is None:
            raise HTTPException(404, f"no profile {profile_id!r}: not registered, and the archive has no version of it")
        return ProfileHistoryView(profile_id=profile_id,
                                  versions=[Version.model_validate({"from": a, "to": b, "text": t})
                                            for a, b, t in versions])

    @app.get("/sources/{source_id}/history", response_model=SourceHistoryView, response_model_by_alias=True,
             summary="Every version of a source", operation_id="source_history",
             responses=error_responses({404: "no such source: not registered, and the archive has no version of it",
                                        **unavailable}))
    def source_history(source_id: str) -> SourceHistoryView:
        """Every archived version of a source's catalog record (the registration, and
        any change of its root broker or dictionary since). The archive writer records a
        registration a few seconds after it is made: a source registered just now may
        have no version yet (an empty list)."""
        with snapshot(opened()) as s:
            versions = s.catalog.history(source_id) if s.catalog is not None else []
        if not versions and store.source(source_id) is None:
            raise HTTPException(404, f"no source {source_id!r}: not registered, and the archive has no version of it")
        return SourceHistoryView(source_id=source_id, versions=[
            SourceVersion.model_validate({"from": a, "to": b, "record": json.loads(t)}) for a, b, t in versions])

    @app.get("/archive/profiles", response_model=ActiveAt, summary="The profiles active at a time",
             operation_id="archive_profiles",
             responses=error_responses({422: "a bad or missing parameter", **unavailable}))
    def active(at: int = Query(ge=0, le=MAX_TIME, description="the time (ms)")) -> ActiveAt:
        with snapshot(opened()) as s:
            found = s.profiles.active(at) if s.profiles is not None else {}
        items = [ActiveProfile(profile_id=p, text=t) for p, t in sorted(found.items())]
        return ActiveAt(at=at, profiles=items[:MAX_LISTED], truncated=len(items) > MAX_LISTED)

    @app.post("/profiles/{profile_id}/backfill", response_model=BackfillDone,
              summary="Deliver a profile's archived matches up to its live deliveries",
              operation_id="backfill_profile",
              responses=error_responses({400: "the body is not JSON",
                                         401: f"no token (send the profile's token as {PROFILE_TOKEN_HEADER} or "
                                              "Authorization: Bearer), or one no profile has",
                                         403: "another profile's token", 404: "no such profile",
                                         413: "the body is too large", 422: "a bad field",
                                         504: "the brokers or the archive writer did not reach the seam in time: "
                                              "nothing was delivered, ask again",
                                         **unavailable}))
    def backfill(profile_id: str, body: BackfillIn, x_onyx_token: ProfileTokenHeader = None,
                 bearer: ProfileBearer = None) -> BackfillDone | JSONResponse:
        """Deliver, on the profile's delivery topic, the archived messages since
        ``since`` that it matches, up to the seam where its live deliveries start
        (records with header ``onyx-backfill: 1``). Call it once the profile is
        registered: it waits until every source's root broker routes to the profile,
        then takes the seam. A message on both sides of the seam arrives twice with the
        same ``onyx-message-id``: de-duplicate by it."""
        record = store.profile(profile_id)
        check_token(store, profile_id, profile_token(x_onyx_token, bearer), record)
        assert record is not None
        root = opened()
        if bootstrap_servers is None:
            raise HTTPException(503, "backfill needs Kafka: the service was started without it")
        return _backfill(root, record, body, overlay, bootstrap_servers)


def _backfill(root: Path, record: ProfileRecord, body: BackfillIn, overlay: Overlay,
              bootstrap_servers: str) -> BackfillDone | JSONResponse:
    deadline = time.monotonic() + body.timeout_s
    finder = SeamFinder(bootstrap_servers)
    try:
        with snapshot(root) as s:
            versions = s.profiles.history(record.id) if s.profiles is not None else []
        # State logs are read from a little before this version was registered (when
        # the archive knows it yet) or from a while ago.
        changed = versions[-1][0] if versions and versions[-1][1] is None else None
        since_ms = (changed if changed is not None else int(time.time() * 1000)) - config.BACKFILL_LOOKBACK_MS
        sources = sorted(overlay.sources)
        try:
            finder.wait_live(record, {overlay.sources[s] for s in sources}, since_ms,
                             max(deadline - time.monotonic(), 0.1))
            seam = finder.seam(sources)
            while True:
                with snapshot(root) as s:
                    behind = [k for k, stop in seam.offsets.items() if stop > 0 and (
                        (part := s.archive.partitions(k[0])) is None
                        or not any(p.partition == k[1] and p.last_offset >= stop - 1 for p in part))]
                    if not behind:
                        found = s.archive.backfill(record.text, body.since, seam.offsets)
                        break
                if time.monotonic() > deadline:
                    raise BackfillError(f"the archive writer has not archived up to the seam of {behind} within "
                                        f"{body.timeout_s:.0f} s; ask again")
                time.sleep(0.5)
            delivered = finder.deliver(record, found)
        except BackfillError as exc:
            return JSONResponse(status_code=504, content=Error(detail=str(exc)).model_dump(exclude_none=True))
        return BackfillDone(profile_id=record.id, delivered=delivered, matched=len(found), seam=seam.to_json())
    finally:
        finder.close()
