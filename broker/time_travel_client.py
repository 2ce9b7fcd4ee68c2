"""``onyx replay``, ``onyx archive`` and ``onyx backfill``: the time-travel operations of
the registration service (:mod:`broker.registry.time_travel`) from a terminal.

Times are given as milliseconds since 1970, an ISO 8601 date-time (UTC unless it says
otherwise), ``now``, or an offset from now (``-1h``, ``-30m``, ``-90s``, ``-2d``).

>>> parse_time("1764115200000"), parse_time("2025-11-26T00:00:00Z")
(1764115200000, 1764115200000)
>>> parse_time("-1h", now_ms=10_000_000)
6400000
>>> is_profile_id("5b0c8a1f2e3d4c5b"), is_profile_id("/nitf")
(True, False)
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Callable, Iterator

from broker.clients import ADMIN_TOKEN_HEADER, answered, api, operator_token

Say = Callable[[str], None]
_OFFSET = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PROFILE_ID = re.compile(r"^[0-9a-f]{16}$")


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Milliseconds since 1970 for ``text`` (see the module docstring); ``ValueError``
    with what is accepted otherwise."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    text = text.strip()
    if text == "now":
        return now
    if text.isdigit():
        return int(text)
    m = _OFFSET.match(text)
    if m:
        return now - int(float(m[1]) * _UNITS[m[2]])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (milliseconds since 1970, an ISO date-time such as "
                         "2026-11-26T10:00:00Z, 'now', or -1h / -30m / -90s / -2d)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def show_time(ms: int) -> str:
    """``ms`` as an ISO date-time in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_profile_id(text: str) -> bool:
    """Does ``text`` look like a profile id (what POST /profiles returns) rather than a profile?"""
    return bool(_PROFILE_ID.match(text))


def stream_lines(url: str, body: dict, timeout: float = 600.0) -> Iterator[dict]:
    """The JSON lines a streaming operation (``POST /replay``, ``POST /queries``) answers
    ``body`` with, as they come; its refusals as :class:`broker.clients.ApiError`. Sent with
    this machine's operator token for the service (:func:`broker.clients.operator_token`):
    the archive is read as the operator of one's own overlay."""
    operator = operator_token(url)
    headers = {"Content-Type": "application/json", **({ADMIN_TOKEN_HEADER: operator} if operator else {})}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with answered("POST", url, timeout):
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)


def stream_replay(api_url: str, body: dict, timeout: float = 600.0) -> Iterator[dict]:
    """The JSON lines ``POST /replay`` answers, as they come."""
    return stream_lines(f"{api_url}/replay", body, timeout)


def replay(api_url: str, profile: str, start: int, end: int, say: Say, *, source: str | None = None,
           show: bool = False, progress: bool | None = None) -> int:
    """Print what ``profile`` (an id or a text) would have matched in ``[start, end]``:
    a line per message (its XML, or FLWR results, with ``show``), a progress bar on a
    terminal, a summary. Returns the number matched."""
    from tqdm import tqdm

    body = {"profile_id" if is_profile_id(profile) else "text": profile, "from": start, "to": end}
    if source:
        body["source"] = source
    bar = tqdm(desc="replay", unit="msg", disable=not (sys.stderr.isatty() if progress is None else progress),
               file=sys.stderr)
    began = time.monotonic()
    summary = {}
    try:
        for line in stream_replay(api_url, body):
            if "progress" in line:
                p = line["progress"]
                if p["total"] is not None:
                    bar.total = p["total"]
                    bar.n = p["done"]
                    bar.refresh()
            elif "match" in line:
                m = line["match"]
                bar.clear()
                say(f"{show_time(m['time'])}  {m['message_id']}  {m['source']}:{m['partition']}@{m['offset']}")
                if show:
                    for doc in m.get("results") or [m["xml"]]:
                        say(doc)
            elif "done" in line:
                summary = line["done"]
    finally:
        bar.close()
    how = "through the archive's index" if summary.get("indexed") else "by a scan of the window (no indexable predicate)"
    say(f"{summary.get('matched', 0)} matched of {summary.get('candidates', 0)} candidates, found {how}, "
        f"in {time.monotonic() - began:.1f} s ({show_time(start)} .. {show_time(end)})")
    return summary.get("matched", 0)


def messages_at(api_url: str, at: int, path: str | None, value: str | None, say: Say) -> int:
    query = {"at": at, **({"where": f"{path}={value}"} if path is not None else {})}
    got = api("GET", f"{api_url}/archive/messages?{urllib.parse.urlencode(query)}")
    for m in got["messages"]:
        say(f"{show_time(m['time'])}  {m['message_id']}  {m['source']}:{m['partition']}@{m['offset']}")
    say(f"{len(got['messages'])} messages in the archive at {show_time(at)}"
        + (f" with {path} = {value!r}" if path is not None else "") + (" (first ones only)" if got["truncated"] else ""))
    return 0


def message(api_url: str, message_id: str, say: Say) -> int:
    url = f"{api_url}/archive/messages/{urllib.parse.quote(message_id, safe='')}"
    with answered("GET", url, 30):
        with urllib.request.urlopen(url, timeout=30) as resp:
            say(resp.read().decode(errors="replace"))
    return 0


def recipients(api_url: str, message_id: str, say: Say) -> int:
    got = api("GET", f"{api_url}/archive/messages/{urllib.parse.quote(message_id, safe='')}/recipients")
    say(f"{message_id} (archived {show_time(got['time'])}) went to {len(got['profiles'])} profiles"
        + (": " + ", ".join(got["profiles"]) if got["profiles"] else ""))
    return 0


def history(api_url: str, profile_id: str, say: Say) -> int:
    got = api("GET", f"{api_url}/profiles/{urllib.parse.quote(profile_id, safe='')}/history")
    for v in got["versions"]:
        end = show_time(v["to"]) if v["to"] is not None else "now"
        say(f"{show_time(v['from'])} .. {end}  {v['text']}")
    return 0


def active(api_url: str, at: int, say: Say) -> int:
    got = api("GET", f"{api_url}/archive/profiles?at={at}")
    for p in got["profiles"]:
        say(f"{p['profile_id']}  {p['text']}")
    say(f"{len(got['profiles'])} profiles active at {show_time(at)}" + (" (first ones only)" if got["truncated"] else ""))
    return 0


def backfill(api_url: str, profile_id: str, token: str, since: int, say: Say) -> int:
    got = api("POST", f"{api_url}/profiles/{urllib.parse.quote(profile_id, safe='')}/backfill", {"since": since},
              token=token, timeout=660)
    seam = ", ".join(f"{k} from offset {v}" for k, v in got["seam"].items()) or "no source records yet"
    say(f"backfilled {got['delivered']} records ({got['matched']} archived messages since {show_time(since)}) to "
        f"profile {profile_id}'s delivery topic; live deliveries take over at {seam}")
    return 0
