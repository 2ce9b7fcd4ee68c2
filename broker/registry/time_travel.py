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
  (:mod:`broker.registry.backfill`);
* ``GET /profiles/{id}/messages/{message id}``: a message delivered to the profile by reference
  (the Claim Check pattern, ``docs/deliveries.md``): its bytes, from the archive, for the
  profile's subscriber if the profile matches it (as its delivery said) or the subscriber may
  read its source.

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

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, field_validator, model_validator

from archive.errors import StorageError
from archive.replay import Replayed, indexable
from archive.replay import replay as replay_parts
from archive.snapshot import Snapshot, snapshot
from broker import config
from broker.registry import access
from broker.registry.app import MAX_PROFILE_CHARS, Error, JsonInt, error_responses, whole_number
from broker.registry.backfill import BackfillError, SeamFinder
from broker.registry.detached import detached
from broker.registry.store import ProfileRecord, Store
from routing.overlay import Overlay
from yfilter import Engine, validate
from yfilter.errors import MessageError
from yfilter.flwr import is_flwr

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
    end: JsonInt = Field(alias="to", ge=0, le=MAX_TIME, description="the window's last millisecond (inclusive); "
                         f"a window is at most {config.REPLAY_MAX_WINDOW_MS:,} ms wide (422)")
    source: str = Field(None, min_length=1, max_length=200, description="only this source's messages (default: "
                        "every source whose archive you may read)")
    limit: JsonInt = Field(1000, ge=1, le=MAX_LISTED, description="at most this many matches (the rest: done.truncated)")

    @field_validator("start", "end", "limit", mode="before")
    @classmethod
    def _whole(cls, v: Any) -> Any:
        return whole_number(v)

    @model_validator(mode="after")
    def _one_profile(self) -> "ReplayIn":
        if (self.profile_id is None) == (self.text is None):
            raise ValueError("give either profile_id or text")
        if self.end - self.start > config.REPLAY_MAX_WINDOW_MS:
            raise ValueError(f"the window [{self.start}, {self.end}] is wider than {config.REPLAY_MAX_WINDOW_MS:,} ms: "
                             "ask for it in pieces")
        return self


class BackfillIn(BaseModel):
    since: JsonInt = Field(ge=0, le=MAX_TIME, description="the first millisecond (archive time) to deliver from: at "
                           f"most {config.REPLAY_MAX_WINDOW_MS:,} ms ago (422)")
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


def _trigger_seconds(trigger: str = config.ARCHIVE_TRIGGER) -> int:
    """The archive writer's interval in whole seconds (at least 1), as a ``Retry-After``: a
    message is archived within about that long after it was published.

    >>> _trigger_seconds("2 seconds"), _trigger_seconds("500 milliseconds"), _trigger_seconds("1 minute")
    (2, 1, 60)
    """
    number, _, unit = trigger.strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        return 2
    scale = {"milli": 0.001, "minute": 60, "hour": 3600}
    factor = next((f for u, f in scale.items() if unit.startswith(u)), 1)
    return max(1, int(value * factor + 0.999))


def delivered(texts: set[str], data: bytes) -> bool:
    """Whether one of ``texts`` (a profile's versions) is a filter that matches message
    ``data``: what its delivery (by reference) said. A transformation profile was delivered
    its results, not the message.

    >>> delivered({"/nitf/head"}, b"<nitf><head/></nitf>"), delivered({"/nitf/body"}, b"<nitf><head/></nitf>")
    (True, False)
    """
    filters = [t for t in texts if not is_flwr(t)]
    if not filters:
        return False
    engine = Engine()
    for i, text in enumerate(filters):
        try:
            engine.add(str(i), text)
        except ValueError:  # a text an older version accepted: it delivered nothing here
            continue
    try:
        return bool(engine.match(data))
    except (MessageError, ValueError):
        return False


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


class _Cut(Exception):
    """A replay reached a bound (:data:`broker.config.REPLAY_MAX_CANDIDATES` candidates)."""


def add_time_travel(app: FastAPI, store: Store, overlay: Overlay, archive_dir: Path | None,
                    bootstrap_servers: str | None = None) -> None:
    """Add the time-travel operations to the registration service's ``app`` (see the
    module docstring); without ``archive_dir`` they answer 503. Every one reads only what
    its caller may (:mod:`broker.registry.access`): the archive of the sources it may read,
    its own profiles' histories."""
    rights = access.of(app)

    def opened() -> Path:
        if archive_dir is None:
            raise HTTPException(503, NO_ARCHIVE)
        return archive_dir

    def profile_text(s: Snapshot, profile_id: str, at: int) -> str:
        """A profile's text: the current one, or the archive's last for a deleted profile."""
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

    def own_profile(who: access.Caller, profile_id: str) -> None:
        """404 unless ``profile_id`` is the caller's, or an operator asks (the archive keeps
        a deleted profile's texts but not its owner: its history is an operator's)."""
        record = store.profile(profile_id)
        if not (who.operator or (record is not None and who.owns(record))):
            raise HTTPException(404, f"no profile {profile_id!r} of yours (registered now or archived)")

    def visible(who: access.Caller, source: str) -> None:
        if not rights.may_read(who, source):
            raise HTTPException(404, f"no source {source!r} you may read (its publisher or an operator grants it)")

    @app.exception_handler(StorageError)
    async def _archive_unreadable(_: Request, exc: StorageError) -> JSONResponse:
        # A page file the writer never finished (or another version's) is the operator's
        # to look at; every reader says so instead of a bare 500.
        return JSONResponse(status_code=503, content=Error(
            detail=f"the archive cannot be read: {exc}; see the archive writer's log").model_dump(exclude_none=True))

    unavailable = {503: f"{NO_ARCHIVE} (or the database failed, or the archive cannot be read)"}
    denied = {401: "no or an unknown token", 403: "a token of another kind"}
    readers = ("subscriber", "owner", "publisher", "operator")

    @app.post("/replay", summary="What a profile would have matched in a time window", operation_id="replay",
              response_class=StreamingResponse,
              responses={200: {"description": "JSON lines: {\"progress\": {\"done\", \"total\"}} now and then, "
                                              "{\"match\": {message_id, source, partition, offset, time, xml, "
                                              "results (FLWR)}} per message matched, in archive time order per "
                                              "partition, and last {\"done\": {\"matched\", \"candidates\", "
                                              "\"indexed\", \"truncated\"}} (truncated: null, or why the answer "
                                              "stopped early: limit, candidates or bytes)",
                               "content": {NDJSON: {"schema": {"type": "string"}}}},
                         **error_responses({400: "the body is not JSON", **denied,
                                            404: "no such profile of yours, or no such source you may read",
                                            413: "the body is too large",
                                            422: "not a profile (with the column), neither or both of profile_id "
                                                 "and text, from after to, a window wider than "
                                                 f"{config.REPLAY_MAX_WINDOW_MS:,} ms, a bad field", **unavailable})})
    def replay(body: ReplayIn, who: access.Caller = Depends(rights.allow(
            *readers, sees="the archived messages of the sources it may read (public, granted, its own), "
                           "matched by its own profile's text or a text it gives; an operator: every source"))
               ) -> StreamingResponse:
        """The archived messages of ``[from, to]`` (archive time, inclusive) a profile
        matches, among the sources the caller may read: candidates from the archive's
        value index for the profile's required equality predicates (the whole window when
        it has none: ``indexed`` false), each verified with the engine. The archive is
        read apart from the answer, which streams as JSON lines: a slow client never holds
        the archive's lock. At most ``limit`` matches, ONYX_REPLAY_MAX_CANDIDATES messages
        verified and ONYX_REPLAY_MAX_BYTES bytes held: past one of them the answer ends
        with ``truncated``."""
        root = opened()
        if body.text is not None:
            validate(body.text)
        else:
            own_profile(who, body.profile_id)
        if body.source is not None:
            visible(who, body.source)
        readable = rights.readable(who)
        # The profile is looked up before the answer starts: a 404 is still possible.
        with snapshot(root) as s:
            text = body.text if body.text is not None else profile_text(s, body.profile_id, body.end)

        def produce(emit) -> dict[str, Any]:
            counts = {"done": 0, "total": 0, "said": time.monotonic(), "held": 0, "matched": 0}

            def progress(done: int, total: int) -> None:
                counts.update(done=done, total=total)
                if time.monotonic() - counts["said"] > 0.5:
                    counts["said"] = time.monotonic()
                    emit(("progress", (done, total)))
                if done >= config.REPLAY_MAX_CANDIDATES:
                    raise _Cut("candidates")

            why = None
            with snapshot(root) as s:
                parts = [p for p in s.archive.partitions(body.source) if readable is None or p.source in readable]
                try:
                    for r in replay_parts(parts, text, body.start, body.end, progress=progress):
                        counts["matched"] += 1
                        counts["held"] += len(r.data) + sum(len(x) for x in r.results)
                        emit(("match", r))
                        if counts["matched"] >= body.limit or counts["held"] >= config.REPLAY_MAX_BYTES:
                            why = "limit" if counts["matched"] >= body.limit else "bytes"
                            break
                except _Cut as cut:
                    why = str(cut)
            return {"matched": counts["matched"], "candidates": counts["total"], "indexed": bool(indexable(text)),
                    "truncated": why}

        def lines() -> Iterator[bytes]:
            yield json_line({"progress": {"done": 0, "total": None}})
            for kind, x in detached(produce, name="onyx-replay"):
                if kind == "progress":
                    yield json_line({"progress": {"done": x[0], "total": x[1]}})
                elif kind == "match":
                    yield json_line({"match": _match(x)})
                elif kind == "done":
                    yield json_line({"progress": {"done": x["candidates"], "total": x["candidates"]}})
                    yield json_line({"done": x})
                else:
                    yield json_line({"error": {"detail": f"the archive failed: {x}"}})

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.get("/archive/messages", response_model=MessagesAt, summary="The messages in the archive at a time",
             operation_id="archive_messages",
             responses=error_responses({**denied, 422: "a bad parameter", **unavailable}))
    def messages(at: int = Query(ge=0, le=MAX_TIME, description="the time (ms)"),
                 where: str | None = Query(None, min_length=3, max_length=2000, pattern=r"^/[^=]*=",
                                           description="PATH=VALUE: only the messages where an element or attribute "
                                                       "path had a value, e.g. /nitf/head/pubdata/@edition.area=SF "
                                                       "(the value is what follows the first '=')"),
                 who: access.Caller = Depends(rights.allow(
                     *readers, sees="the messages of the sources it may read; an operator: all")),
                 ) -> MessagesAt:
        """The messages archived by ``at`` and not retracted then, of the sources the
        caller may read; with ``where``, only those where that path had that value (a
        range-timeslice query)."""
        path, value = where.split("=", 1) if where is not None else (None, None)
        readable = rights.readable(who)
        with snapshot(opened()) as s:
            found = [r for r in s.archive.messages_at(at, path, value) if readable is None or r.source in readable]
        return MessagesAt(at=at, messages=[_view(r) for r in found[:MAX_LISTED]], truncated=len(found) > MAX_LISTED)

    def readable_message(s: Snapshot, who: access.Caller, message_id: str):
        """The archived message (partition, record) if the caller may read its source; else 404."""
        found = s.archive.find(message_id)
        if found is None or not rights.may_read(who, found[1].source):
            raise HTTPException(404, f"no archived message {message_id!r} you may read")
        return found

    @app.get("/archive/messages/{message_id}", summary="An archived message's bytes",
             operation_id="archive_message", response_class=Response,
             responses={200: {"description": "the message as published", "content": {"application/xml": {
                 "schema": {"type": "string"}}}},
                 **error_responses({**denied, 404: "no such message of a source you may read", **unavailable})})
    def message(message_id: str, who: access.Caller = Depends(rights.allow(
            *readers, sees="a message of a source it may read"))) -> Response:
        with snapshot(opened()) as s:
            part, _ = readable_message(s, who, message_id)
            data = part.message(message_id)
        return Response(data, media_type="application/xml")

    @app.get("/archive/messages/{message_id}/recipients", response_model=Recipients,
             summary="Who received a message", operation_id="archive_recipients",
             responses=error_responses({**denied, 404: "no such message of a source you may read", **unavailable}))
    def recipients(message_id: str, who: access.Caller = Depends(rights.allow(
            *readers, sees="of a message of a source it may read, which of its own profiles received it; an "
                           "operator: every profile"))) -> Recipients:
        """The caller's profiles (an operator: every profile) active at the message's archive
        time whose text then matches it."""
        with snapshot(opened()) as s:
            _, record = readable_message(s, who, message_id)
            got = s.archive.received(message_id, s.profiles) if s.profiles is not None else set()
        if not who.operator:
            got = {p for p in got if (r := store.profile(p)) is not None and who.owns(r)}
        return Recipients(message_id=message_id, time=record.time, profiles=sorted(got))

    retry = str(_trigger_seconds())

    @app.get("/profiles/{profile_id}/messages/{message_id:path}", summary="A message delivered by reference",
             operation_id="delivered_message", response_class=Response,
             responses={200: {"description": "the message as published", "content": {"application/xml": {
                 "schema": {"type": "string"}}}},
                 **error_responses({**denied, 404: "no such profile of yours, or no archived message it was delivered "
                                                   "(nor of a source you may read): a message is archived a few "
                                                   "seconds after it is published, so a reference read at once may "
                                                   "need another try after Retry-After seconds", **unavailable})})
    def delivered_message(profile_id: str, message_id: str, who: access.Caller = Depends(rights.allow(
            "owner", "subscriber", "operator", sees="a message its own profile was delivered (the profile matches "
                                                    "it), or one of a source it may read; an operator: any"))
                          ) -> Response:
        """The message a delivery by reference names (its ``href``): the bytes the publisher
        wrote, from the archive (``X-Onyx-Source`` names its source). The caller must own the
        profile, and the profile (a filter: its current text, or the one active when the message
        was archived) must match the message, or the caller may read the message's source."""
        record = rights.profile(who, profile_id)
        missing = HTTPException(404, f"no archived message {message_id!r} delivered to profile {profile_id!r} "
                                     f"(or of a source you may read); if it was delivered just now, ask again in "
                                     f"{retry} s", headers={"Retry-After": retry})
        with snapshot(opened()) as s:
            found = s.archive.find(message_id)
            if found is None:
                raise missing
            part, rec = found
            data = part.message(message_id)
            texts = {record.text}
            if s.profiles is not None and (then := s.profiles.text_at(profile_id, rec.time)) is not None:
                texts.add(then)
        if data is None or not (rights.may_read(who, rec.source) or delivered(texts, data)):
            raise missing
        return Response(data, media_type="application/xml", headers={"X-Onyx-Source": rec.source})

    @app.get("/profiles/{profile_id}/history", response_model=ProfileHistoryView, response_model_by_alias=True,
             summary="Every version of a profile", operation_id="profile_history",
             responses=error_responses({**denied, 404: "no such profile of yours: not registered, and the archive "
                                                       "has no version of it", **unavailable}))
    def history(profile_id: str, who: access.Caller = Depends(rights.allow(
            "owner", "subscriber", "operator", sees="its own profile's versions; an operator: any profile's"))
                ) -> ProfileHistoryView:
        """Every archived version of the profile (``to`` null: the current one). The
        archive writer records a change a few seconds after it is made: a profile
        registered just now may have no version yet (an empty list)."""
        own_profile(who, profile_id)
        with snapshot(opened()) as s:
            versions = s.profiles.history(profile_id) if s.profiles is not None else []
        if not versions and store.profile(profile_id) is None:
            raise HTTPException(404, f"no profile {profile_id!r}: not registered, and the archive has no version of it")
        return ProfileHistoryView(profile_id=profile_id,
                                  versions=[Version.model_validate({"from": a, "to": b, "text": t})
                                            for a, b, t in versions])

    @app.get("/sources/{source_id}/history", response_model=SourceHistoryView, response_model_by_alias=True,
             summary="Every version of a source", operation_id="source_history",
             responses=error_responses({**denied, 404: "no such source you may read: not registered, and the "
                                                       "archive has no version of it", **unavailable}))
    def source_history(source_id: str, who: access.Caller = Depends(rights.allow(
            *readers, sees="the versions of a source it may read (public, granted, its own)"))) -> SourceHistoryView:
        """Every archived version of a source's catalog record (the registration, and
        any change of its root broker or dictionary since). The archive writer records a
        registration a few seconds after it is made: a source registered just now may
        have no version yet (an empty list)."""
        visible(who, source_id)
        with snapshot(opened()) as s:
            versions = s.catalog.history(source_id) if s.catalog is not None else []
        if not versions and store.source(source_id) is None:
            raise HTTPException(404, f"no source {source_id!r}: not registered, and the archive has no version of it")
        return SourceHistoryView(source_id=source_id, versions=[
            SourceVersion.model_validate({"from": a, "to": b, "record": json.loads(t)}) for a, b, t in versions])

    @app.get("/archive/profiles", response_model=ActiveAt, summary="The profiles active at a time",
             operation_id="archive_profiles",
             responses=error_responses({**denied, 422: "a bad or missing parameter", **unavailable}))
    def active(at: int = Query(ge=0, le=MAX_TIME, description="the time (ms)"),
               who: access.Caller = Depends(rights.allow(
                   "owner", "subscriber", "operator", sees="its own profiles active then; an operator: all"))
               ) -> ActiveAt:
        with snapshot(opened()) as s:
            found = s.profiles.active(at) if s.profiles is not None else {}
        if not who.operator:
            found = {p: t for p, t in found.items() if (r := store.profile(p)) is not None and who.owns(r)}
        items = [ActiveProfile(profile_id=p, text=t) for p, t in sorted(found.items())]
        return ActiveAt(at=at, profiles=items[:MAX_LISTED], truncated=len(items) > MAX_LISTED)

    @app.post("/profiles/{profile_id}/backfill", response_model=BackfillDone,
              summary="Deliver a profile's archived matches up to its live deliveries",
              operation_id="backfill_profile",
              responses=error_responses({400: "the body is not JSON", **denied, 404: "no such profile of yours",
                                         413: "the body is too large",
                                         422: f"a bad field, or since more than {config.REPLAY_MAX_WINDOW_MS:,} ms "
                                              "ago",
                                         504: "the brokers or the archive writer did not reach the seam in time: "
                                              "nothing was delivered, ask again",
                                         **unavailable}))
    def backfill(profile_id: str, body: BackfillIn, who: access.Caller = Depends(rights.allow(
            "owner", "subscriber", sees="its own profile's matches among the sources it may read"))
                 ) -> BackfillDone | JSONResponse:
        """Deliver, on the profile's delivery topic, the archived messages since
        ``since`` that it matches, of the sources its subscriber may read, up to the seam
        where its live deliveries start (records with header ``onyx-backfill: 1``). Call it
        once the profile is registered: it waits until every source's root broker routes
        to the profile, then takes the seam. A message on both sides of the seam arrives
        twice with the same ``onyx-message-id``: de-duplicate by it."""
        record = rights.profile(who, profile_id, operator=False)
        if body.since < time.time() * 1000 - config.REPLAY_MAX_WINDOW_MS:
            raise HTTPException(422, f"since is more than {config.REPLAY_MAX_WINDOW_MS:,} ms ago: replay older "
                                     "messages with POST /replay, in pieces")
        root = opened()
        if bootstrap_servers is None:
            raise HTTPException(503, "backfill needs Kafka: the service was started without it")
        readable = rights.readable(who)
        sources = sorted(s for s in overlay.sources if readable is None or s in readable)
        return _backfill(root, record, body, overlay, sources, bootstrap_servers)


def _backfill(root: Path, record: ProfileRecord, body: BackfillIn, overlay: Overlay, sources: list[str],
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
