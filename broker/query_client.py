"""``onyx query`` and ``onyx cache``: the query service of the registration service
(:mod:`broker.registry.queries`, the semantic cache of thesis ``002`` in front of the
archive) from a terminal, and the cache's line of ``onyx status``.

>>> one_line(b"<nitf>\\n  <head><title>Fog</title></head>\\n</nitf>", 30)
'<nitf> <head><title>Fog</t...'
>>> summary_line({"items": 3, "from_cache": 2, "from_source": 1, "remainder": "@a > 5",
...               "window": {"from": 0, "to": 1000}, "cut": False})
'3 items: 2 from the cache, 1 from the source; remainder: @a > 5; window 1970-01-01T00:00:00.000Z .. 1970-01-01T00:00:01.000Z'
>>> cache_line({"capacity_bytes": 1 << 20, "sources": [{"source": "news", "stats": {"regions": 2, "bytes": 4096,
...     "queries": 3, "items_from_cache": 30, "items_from_source": 10, "evicted": 0, "expired": 1}, "regions": []}]})
'query cache: 2 regions of 1 source, 4,096 of 1,048,576 bytes each at most; 3 queries, 30 of 40 items from the cache; 0 evicted, 1 expired'
"""

from __future__ import annotations

import json
import re

from broker.clients import ApiError, api
from broker.time_travel_client import Say, show_time, stream_lines


def one_line(xml: bytes | str, width: int = 100) -> str:
    """``xml`` on one line, cut to ``width`` characters."""
    text = re.sub(r"\s+", " ", xml.decode(errors="replace") if isinstance(xml, bytes) else xml).strip()
    return text if len(text) <= width else text[:width - 3] + "..."


def summary_line(done: dict) -> str:
    """The last line of ``onyx query``: how many items, from where, the remainder, the window."""
    window = done.get("window")
    where = "nothing archived yet" if window is None else f"window {show_time(window['from'])} .. " \
        f"{show_time(window['to'])}" + (" (cut at the settled time)" if done.get("cut") else "")
    return (f"{done['items']} items: {done['from_cache']} from the cache, {done['from_source']} from the source; "
            f"remainder: {done['remainder'] or 'none'}; {where}")


def query(api_url: str, source: str, xpath: str, say: Say, *, start: int | None = None, end: int | None = None,
          show: bool = False, as_json: bool = False) -> dict:
    """Print the answer of ``POST /queries``: a line per message (its id, whether the
    cache had it, the XML on one line, or whole with ``show``; with ``as_json`` the
    service's JSON lines as they are), then :func:`summary_line`. Returns the summary."""
    body: dict = {"source": source, "query": xpath}
    if start is not None:
        body["from"] = start
    if end is not None:
        body["to"] = end
    done: dict = {}
    for line in stream_lines(f"{api_url}/queries", body):
        if as_json:
            say(json.dumps(line))
        if "error" in line:
            raise ApiError(f"POST {api_url}/queries: {line['error']['detail']}")
        if "done" in line:
            done = line["done"]
        elif not as_json:
            item = line["item"]
            where = "cache " if item["cached"] else "source"
            say(f"{item['message_id']}  {where}  {item['xml'] if show else one_line(item['xml'])}")
    if not as_json:
        say(summary_line(done))
    return done


def cache_line(view: dict) -> str:
    """One line about the query service's cache (``GET /cache``), for ``onyx status``."""
    stats = [s["stats"] for s in view["sources"]]

    def total(key: str) -> int:
        return int(sum(s.get(key, 0) for s in stats))

    cached, fetched = total("items_from_cache"), total("items_from_source")
    return (f"query cache: {total('regions')} regions of {len(stats)} source{'' if len(stats) == 1 else 's'}, "
            f"{total('bytes'):,} of {view['capacity_bytes']:,} bytes each at most; {total('queries')} queries, "
            f"{cached} of {cached + fetched} items from the cache; {total('evicted')} evicted, "
            f"{total('expired')} expired")


def show_cache(api_url: str, say: Say) -> int:
    """Print ``GET /cache``: :func:`cache_line`, then per source its regions."""
    view = api("GET", f"{api_url}/cache")
    say(cache_line(view))
    for s in view["sources"]:
        st = s["stats"]
        say(f"{s['source']}: {st['regions']} regions, {st['bytes']:,} bytes; {st.get('queries', 0)} queries, "
            f"{st.get('items_from_cache', 0)} items from the cache, {st.get('items_from_source', 0)} from the source "
            f"in {st.get('source_calls', 0)} calls")
        for r in s["regions"]:
            lo, hi = r["window"]
            say(f"  {r['concept']}[{r['condition']}]  {r['items']} items, {r['bytes']:,} bytes, window "
                f"{show_time(int(lo))} .. {show_time(int(hi))}, last used {show_time(int(r['last_access'] * 1000))}")
    return 0
