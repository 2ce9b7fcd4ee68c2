"""Churn on the running overlay (issue 27 part 4): profiles added, updated and deleted over
HTTP while messages flow, on the six brokers of ONYX Figure 4 holding 100k profiles.

    python -m bench.churn            # 100k background profiles, 60 s phases at 0, 10, 100, 1,000 changes/s
    python -m bench.churn --quick    # 5k background profiles, 20 s phases (a few minutes)

What runs: ``broker.local.cluster.LocalOverlay`` (a fresh Kafka, the registration service in
this process at ``cluster.api_url``, the six brokers in one Spark streaming query), and in
this process, on one monotonic clock, a publisher, a consumer of the delivery topic and the
churn client (keep-alive HTTP connections, one per 50 changes/s up to 8, a thread each).

1. **Registration and convergence**: the background profiles (``bench.overlay``'s stock
   quotes) in bulk, ``POST /profiles:batch`` in batches of 10,000 (profiles/s: the median
   batch, and all of them over the wall time); then the time until no broker has input
   left (``bench.overlay.drained``: every routing table has converged) after the last batch
   came back (*convergence*) and from the first batch on (*all in*; target <= 60 s at 100k).
   Then ~300 more one by one (``POST /profiles``: profiles/s). Both with
   ``bench.registration``'s client and timing; their ``service_cpu_ms`` is this process's
   CPU, which the service shares with the client here.
2. **Messages**: quotes published to the source topic at a steady rate (50/s), each with
   attributes ``seq`` (a sequence number over the whole run) and ``slot`` (``seq % S``,
   S = 10), its ``onyx-message-id`` set by the publisher, its publish time recorded.
   A probe profile ``/quote`` hosted at b6 (three link hops from the root b1) gets every
   message: message latency (publish -> delivery at b6, p50/p99) and throughput (messages
   delivered to the probe per second of the phase; all deliveries per second; and how
   long the brokers took to drain after the publisher stopped).
3. **Churn**: a pool of P = 600 slots, each holding a profile or not. Version v of slot
   i's profile, made when the publisher had sent N_v messages, is
   ``/quote[@slot = 's_v'][@seq >= N_v][price >= x_v]`` (x_v uniform in [0, 50), so it
   matches about three quotes in four of its message slot s_v): it matches only messages
   published after the change began. A new profile takes a random message slot, an
   update moves the profile to another one (so every later quote of the new slot shows
   the update, about four a second), a delete leaves it. Phases of 60 s (20 s with
   ``--quick``) after a warm-up: 0 changes/s (the baseline), 10, 100 and 1,000. A change
   picks a random pool slot no other change is under way on: an empty one gets a new
   profile, a live one is deleted (20%) or updated - the pool stays ~83% live. Up to 100
   changes/s each is one request (``POST /profiles``, ``DELETE`` and ``PUT
   /profiles/{id}``, with the profile's token), on one keep-alive connection per 50
   changes/s; above, the changes due in each 100 ms go together (``POST /profiles:batch``
   for the adds, ``POST /profiles:changes`` for the rest), on two connections. Changes
   are paced on a schedule (change k due at k / rate s, none after the phase); when the
   service is slower, the achieved rate is what is reported, with request p50/p99 and the
   CPU per second of the phase of this process and of everything.
4. **Change -> first effect** (p50/p99 over the changes of a phase whose effect could be
   seen): for an add or update, from the request's start to the receipt of the first
   delivery to that profile of a message the new version matches and the previous one
   (if any) does not, published before the profile's next change; for a delete, from the
   request's start to the publish time of the last message delivered to the profile that
   was published after the delete began (0 if none). A change made again before a
   message showed it shows no effect and is counted as such. The *wait* (request start
   to the publish time of the first message that could show the effect, about 0.25 s on
   average) is part of an add's or update's effect no system could avoid; ``excess`` =
   effect - wait is what the overlay adds (at best one message latency).
5. **Correctness**: the change log replayed with the centralized engine
   (``yfilter.Engine``) against every message. A change c is *in flight* for a message m
   published at t_m when t_m lies in [c.start - W, c.end + W], W = 2 s: then the profile's
   version before and after c are both candidates (the change travels to the host and its
   routing updates travel up the tree while the message travels down). For each churn
   profile and message: if every candidate version matches m, it must be delivered (else
   *missed*); if none does (or the profile did not exist), it must not be (else *wrong*);
   otherwise either is right (*ambiguous*). Duplicates (at-least-once) are counted, not
   errors. Examples of any disagreement are printed and kept, with the smallest W that
   would make them right (``window_needed_s``) and the message's latency to the probe:
   W must cover a message's latency to the host (a delete begun less than that after
   a message was published may reach the host first) and a change's way to the host
   and up the tree; at 2 s it is tight when message latency nears 2 s.

Targets (reported, not asserted): p99 change -> effect <= 2 s at 100 changes/s with message
latency within 2x of the baseline's; 100k in bulk and converged in <= 60 s all in; 0 wrong
and 0 missed deliveries, also at 1,000 changes/s. Everything shares one 2-core machine, and
the service this process (as ``onyx up`` runs it). Prints a table, writes
``bench/results/churn.json`` and a PNG.
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import platform
import random
import re
import shutil
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from bench import registration
from broker.local.cluster import LocalOverlay, OverlaySettings
from bench.output import save
from bench.overlay import (PROBE_HOST, SOURCE_TOPIC, Clock, _pct, _quote_messages, _quote_profiles, cpu_seconds,
                           drained, send)
from bench.registration import Client

RESULTS = Path(__file__).resolve().parent / "results"
WINDOW_S = 2.0
PRICE_MAX = 50.0  # a version asks for price >= x_v, x_v uniform in [0, PRICE_MAX): most quotes of its slot
BATCH_ABOVE = 100.0  # changes/s above which the client sends them in batches (POST /profiles:changes)
BATCH_EVERY_S = 0.1  # ... one request every so often
PROBE_TEXT = "/quote"
TARGET_EFFECT_P99_S = 2.0  # at 100 changes/s
TARGET_LATENCY_RATIO = 2.0  # message latency under churn / without
TARGET_CONVERGE_S = 60.0  # 100k in bulk and converged, all in
OK = (200, 201, 204)
EXAMPLES = 10  # disagreements kept per phase


@dataclass(frozen=True)
class Message:
    """A published quote: its id, phase, sequence number, slot, price and bytes."""

    id: str
    phase: str
    seq: int
    slot: int
    price: float
    doc: bytes


@dataclass
class Change:
    """One change request of the churn client (or the pool's first registration)."""

    phase: str
    index: int  # the pool's slot i
    slot: int  # s_i = i % S: the messages it may match
    op: str  # add, update, delete
    profile: str | None  # for an add: known once the service answered
    seq: int | None  # the version matches messages with seq >= this
    price: float | None  # ... and price >= this
    start: float
    end: float = 0.0
    status: int = 0

    @property
    def ok(self) -> bool:
        """Whether the service carried the change out."""
        return self.status in OK

    @property
    def text(self) -> str | None:
        """The version this change leaves (None for a delete)."""
        return None if self.op == "delete" else version_text(self.slot, self.seq, self.price)

    def matches(self, m: Message) -> bool:
        """Whether the version this change leaves matches ``m`` (what its text says)."""
        return self.op != "delete" and m.slot == self.slot and m.seq >= self.seq and m.price >= self.price


def version_text(slot: int, seq: int, price: float) -> str:
    """A churn profile's text: one slot, messages from ``seq`` on, ``price`` and above."""
    return f"/quote[@slot = '{slot}'][@seq >= {seq}][price >= {price:.2f}]"


def messages(n: int, first_seq: int, slots: int, seed: int, phase: str, prefix: str) -> list[Message]:
    """``n`` quotes (``bench.overlay``'s) with ``seq`` and ``slot`` attributes on the root."""
    out = []
    for i, doc in enumerate(_quote_messages(n, seed)):
        seq = first_seq + i
        price = float(re.search(rb"<price>([\d.]+)</price>", doc).group(1))
        doc = doc.replace(b"<quote ", f'<quote seq="{seq}" slot="{seq % slots}" '.encode(), 1)
        out.append(Message(f"{prefix}-{i}", phase, seq, seq % slots, price, doc))
    return out


# -- the service ---------------------------------------------------------------------------


def port_of(url: str) -> int:
    """The port of the service's URL."""
    return urlparse(url).port


def subscriber(client: Client) -> dict:
    """A new subscriber (its token and delivery topic)."""
    status, answer, _, _ = client.call("POST", "/subscribers")
    assert status == 201, answer
    return answer


def register_background(cluster: LocalOverlay, client: Client, token: str, n: int, single: int, seed: int,
                        progress: Callable[[str], None]) -> dict:
    """Step 1 of the module docstring: bulk, convergence, then one by one."""
    texts = _quote_profiles(n + single, seed)
    pid = os.getpid()
    t0 = time.monotonic()
    bulk = registration.bulk(client, texts[:n], token, registration.BATCH, pid) if n else None
    t1 = time.monotonic()
    converged = drained(cluster, timeout=7200)
    out = {"profiles": n, "bulk": bulk and {k: v for k, v in bulk.items() if k != "batches"},
           "registration_s": t1 - t0, "convergence_s": converged - t1, "all_in_s": converged - t0}
    progress(f"{n:,} in bulk in {t1 - t0:.1f} s, converged {converged - t1:.1f} s later")
    out["one_by_one"] = registration.one_by_one(client, texts[n:], token, pid) if single else None
    drained(cluster, timeout=600)
    return out


def register_pool(cluster: LocalOverlay, client: Client, token: str, size: int, slots: int, rng: random.Random
                  ) -> tuple[list[tuple[str, str] | None], list[Change], str]:
    """The churn pool's first versions (one batch) and the probe at b6: the pool (slot ->
    (profile id, token)), their changes, the probe's id."""
    status, probe, _, _ = client.call("POST", "/profiles", {"text": PROBE_TEXT, "near": PROBE_HOST}, token)
    assert status == 201, probe
    changes = [Change("setup", i, i % slots, "add", None, 0, round(rng.uniform(0, PRICE_MAX), 2), 0.0)
               for i in range(size)]
    start = time.monotonic()
    status, answer, _, _ = client.call("POST", "/profiles:batch",
                                       {"profiles": [{"text": c.text} for c in changes]}, token)
    end = time.monotonic()
    assert status == 200 and answer["registered"] == size, str(answer)[:500]
    pool: list[tuple[str, str] | None] = []
    for c, item in zip(changes, answer["results"]):
        c.profile, c.start, c.end, c.status = item["profile"]["profile_id"], start, end, 201
        pool.append((c.profile, item["profile"]["token"]))
    drained(cluster, timeout=600)
    return pool, changes, probe["profile_id"]


# -- the churn client ------------------------------------------------------------------------


class Pool:
    """Slot -> its live profile (id, token) or None, and the message slot its version asks
    for; a slot is taken while a change is under way on it, so a profile's changes never
    overlap."""

    def __init__(self, profiles: list[tuple[str, str] | None], slots: int) -> None:
        self.profiles, self.slots = profiles, slots
        self.slot_of = [i % slots for i in range(len(profiles))]
        self._busy: set[int] = set()
        self._lock = threading.Lock()

    def take(self, rng: random.Random) -> int:
        """A random slot no change is under way on, now taken."""
        with self._lock:
            while True:
                i = rng.randrange(len(self.profiles))
                if i not in self._busy:
                    self._busy.add(i)
                    return i

    def give(self, i: int) -> None:
        """Slot ``i`` is free again."""
        with self._lock:
            self._busy.discard(i)

    def plan(self, i: int, phase: str, seq: int, start: float, deletes: float, rng: random.Random) -> Change:
        """The next change of slot ``i``: an add if it is empty, else a delete (``deletes``)
        or an update to another message slot (so that every later message of that slot
        shows the update), each new version asking for a new price bound."""
        current, slot = self.profiles[i], self.slot_of[i]
        price = round(rng.uniform(0, PRICE_MAX), 2)
        if current is None:
            return Change(phase, i, rng.randrange(self.slots), "add", None, seq, price, start)
        if rng.random() < deletes:
            return Change(phase, i, slot, "delete", current[0], None, None, start)
        other = rng.randrange(self.slots - 1) if self.slots > 1 else 0
        return Change(phase, i, other + (other >= slot) if self.slots > 1 else slot, "update", current[0], seq,
                      price, start)

    def done(self, c: Change, answer: dict | None = None) -> None:
        """Keep what a carried-out change left in slot ``c.index`` (``answer``: an add's)."""
        if not c.ok:
            return
        if c.op == "delete":
            self.profiles[c.index] = None
            return
        if c.op == "add":
            c.profile = answer["profile_id"]
            self.profiles[c.index] = (c.profile, answer["token"])
        self.slot_of[c.index] = c.slot


def change_one(client: Client, pool: Pool, i: int, token: str, sent_so_far: Callable[[], int],
               phase: str, deletes: float, rng: random.Random) -> Change:
    """One change of slot ``i`` (see :meth:`Pool.plan`), one request. The request's start
    is read before the sequence number, so a version matches only messages published
    after its change began."""
    start = time.monotonic()
    c = pool.plan(i, phase, sent_so_far(), start, deletes, rng)
    answer = None
    if c.op == "add":
        status, answer, _, _ = client.call("POST", "/profiles", {"text": c.text}, token)
    elif c.op == "delete":
        status = client.call("DELETE", f"/profiles/{c.profile}", profile_token=pool.profiles[i][1])[0]
    else:
        status = client.call("PUT", f"/profiles/{c.profile}", {"text": c.text}, profile_token=pool.profiles[i][1])[0]
    c.end, c.status = time.monotonic(), status
    pool.done(c, answer)
    return c


def change_batch(client: Client, pool: Pool, slots: list[int], token: str, sent_so_far: Callable[[], int],
                 phase: str, deletes: float, rng: random.Random) -> list[Change]:
    """The next change of each of ``slots`` in two requests: the adds (``POST
    /profiles:batch``) and the updates and deletions (``POST /profiles:changes``, the
    subscriber's token authorizing them); each change's start and end are its request's."""
    start = time.monotonic()
    seq = sent_so_far()
    planned = [pool.plan(i, phase, seq, start, deletes, rng) for i in slots]
    adds = [c for c in planned if c.op == "add"]
    if adds:
        status, answer, _, _ = client.call("POST", "/profiles:batch", {"profiles": [{"text": c.text} for c in adds]},
                                           token)
        end = time.monotonic()
        for k, c in enumerate(adds):
            item = answer["results"][k] if status == 200 else None
            c.end, c.status = end, item["status"] if item else status
            pool.done(c, item and item.get("profile"))
    changes = [c for c in planned if c.op != "add"]
    if changes:
        start = time.monotonic()
        for c in changes:
            c.start = start
        body = {"changes": [{"op": c.op, "profile_id": c.profile, **({"text": c.text} if c.op == "update" else {})}
                            for c in changes]}
        status, answer, _, _ = client.call("POST", "/profiles:changes", body, token)
        end = time.monotonic()
        for k, c in enumerate(changes):
            c.end, c.status = end, answer["results"][k]["status"] if status == 200 else status
            pool.done(c)
    return planned


def churn(port: int, pool: Pool, token: str, rate: float, duration: float, sent_so_far: Callable[[], int],
          phase: str, deletes: float, threads: int, seed: int) -> list[Change]:
    """Changes at ``rate``/s for ``duration`` s on ``threads`` connections (change k is due
    k / rate s after the start; late ones go at once, none after ``duration``); above
    :data:`BATCH_ABOVE` changes/s, the changes due in each :data:`BATCH_EVERY_S` go together
    (:func:`change_batch`). The log, in order of start."""
    log: list[Change] = []
    lock, next_k = threading.Lock(), [0]
    per = max(1, round(rate * BATCH_EVERY_S)) if rate > BATCH_ABOVE else 1
    t0 = time.monotonic()

    def worker(n: int) -> None:
        client, rng = Client(port), random.Random(seed * 1000 + n)
        try:
            while True:
                with lock:
                    k = next_k[0]
                    next_k[0] += 1
                due = t0 + k * per / rate
                if due >= t0 + duration or time.monotonic() >= t0 + duration:
                    return
                time.sleep(max(0.0, due - time.monotonic()))
                slots = [pool.take(rng) for _ in range(per)]
                try:
                    if per == 1:
                        log.append(change_one(client, pool, slots[0], token, sent_so_far, phase, deletes, rng))
                    else:
                        log.extend(change_batch(client, pool, slots, token, sent_so_far, phase, deletes, rng))
                finally:
                    for i in slots:
                        pool.give(i)
        finally:
            client.close()

    workers = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sorted(log, key=lambda c: c.start)


def threads_for(rate: float) -> int:
    """Connections for a change rate: one per 50 changes/s up to :data:`BATCH_ABOVE` (a
    change takes a few ms), then two for the batches."""
    return 2 if rate > BATCH_ABOVE else max(1, math.ceil(rate / 50))


def run_phase(cluster: LocalOverlay, pool: Pool, port: int, token: str, name: str, change_rate: float, duration: float,
              msg_rate: float, first_seq: int, args: argparse.Namespace) -> tuple[dict, list[Message], dict[str, float], list[Change]]:
    """Publish ``duration`` s of messages at ``msg_rate`` while the churn client changes
    profiles at ``change_rate``, then wait until the brokers drained."""
    msgs = messages(int(duration * msg_rate), first_seq, args.slots, args.seed + first_seq, name, f"m{first_seq}")
    sent: dict[str, float] = {}
    cpu_me, cpu_all = registration.cpu_seconds(os.getpid()), cpu_seconds()
    publisher = threading.Thread(target=send, args=(cluster.bootstrap_servers, SOURCE_TOPIC, [m.doc for m in msgs],
                                                    msg_rate, f"m{first_seq}", sent), daemon=True)
    t0 = time.monotonic()
    publisher.start()
    threads = args.threads or threads_for(change_rate)
    changes = churn(port, pool, token, change_rate, duration, lambda: first_seq + len(sent), name, args.deletes,
                    threads, args.seed + first_seq) if change_rate else []
    publisher.join()
    published = time.monotonic()
    cpu_me, cpu_all = registration.cpu_seconds(os.getpid()) - cpu_me, cpu_seconds() - cpu_all
    done = drained(cluster, timeout=3600)
    meta = {"phase": name, "target_changes_per_s": change_rate, "threads": threads if change_rate else 0,
            "start": t0, "published": published, "drained": done, "messages": len(msgs),
            "cpu_this_process": cpu_me / (published - t0), "cpu_all_processes": cpu_all / (published - t0),
            "publish_s": max(sent.values()) - min(sent.values()) if sent else 0.0}
    return meta, msgs, sent, changes


# -- analysis ------------------------------------------------------------------------------------


def lifetimes(changes: list[Change]) -> dict[str, list[Change]]:
    """Per profile id, its successful changes in order (an add first, a delete last)."""
    out: dict[str, list[Change]] = defaultdict(list)
    for c in sorted(changes, key=lambda c: c.start):
        if c.ok and c.profile is not None:
            out[c.profile].append(c)
    return dict(out)


def candidates(cs: list[Change], t: float, window: float) -> range:
    """The states (0: before the add; k: after the k-th change) a message published at
    ``t`` may meet: those of every change in flight, or the one live then."""
    k_min = bisect.bisect_left([c.end + window for c in cs], t)
    k_max = bisect.bisect_right([c.start - window for c in cs], t)
    return range(k_min, k_max + 1)


def window_needed(cs: list[Change], m: Message, t: float, matching: bool) -> float:
    """The smallest W for which a state of the profile that matches ``m`` (``matching``)
    or does not (a missed delivery) would be a candidate for ``m`` published at ``t``:
    how far outside the window a wrong or missed delivery lay."""
    need = math.inf
    for k in range(len(cs) + 1):
        version = cs[k - 1] if k else None
        if (version is not None and version.matches(m)) != matching:
            continue
        after = version.start - t if version is not None else -math.inf  # the state begins after t
        before = t - cs[k].end if k < len(cs) else -math.inf  # ... or ended before t
        need = min(need, max(after, before, 0.0))
    return need


def oracle(msgs: list[Message], t_pub: dict[str, float], by_profile: dict[str, list[Change]],
           delivered: dict[str, Counter], window: float, latency: dict[str, float] | None = None
           ) -> dict[str, dict]:
    """Step 5 of the module docstring, per phase: the change log replayed through one
    ``yfilter.Engine`` (a version is in it while it may be live) against every message.
    ``latency``: each message's latency to the probe (shown with the examples)."""
    from yfilter import Engine

    engine = Engine()
    adds, removes = [], []
    for pid, cs in by_profile.items():
        for k, c in enumerate(cs, 1):
            if c.op != "delete":
                adds.append((c.start - window, f"{pid}:{k}", c.text))
                removes.append((cs[k].end + window if k < len(cs) else math.inf, f"{pid}:{k}"))
    adds.sort()
    removes.sort()
    a = r = 0
    out: dict[str, dict] = {}
    for m in sorted((m for m in msgs if m.id in t_pub), key=lambda m: t_pub[m.id]):
        t = t_pub[m.id]
        while a < len(adds) and adds[a][0] <= t:
            engine.add(adds[a][1], adds[a][2])
            a += 1
        while r < len(removes) and removes[r][0] < t:
            engine.remove(removes[r][1])
            r += 1
        matched: dict[str, set[int]] = defaultdict(set)
        for vid in engine.match(m.doc):
            pid, k = vid.rsplit(":", 1)
            matched[pid].add(int(k))
        got = delivered.get(m.id, Counter())
        res = out.setdefault(m.phase, {"messages": 0, "pairs": 0, "wrong": 0, "missed": 0, "ambiguous": 0,
                                       "duplicates": 0, "unknown_profile": 0, "window_needed_s": [],
                                       "examples": []})
        res["messages"] += 1
        res["duplicates"] += sum(n - 1 for n in got.values() if n > 1)
        for pid in set(matched) | set(got):
            cs = by_profile.get(pid)
            if cs is None:
                res["unknown_profile"] += 1
                continue
            states = candidates(cs, t, window)
            live = [k for k in states if k > 0 and cs[k - 1].op != "delete"]
            hits = matched.get(pid, set()) & set(states)
            must = len(live) == len(states) and hits == set(live)
            verdict = ("missed" if must and pid not in got else "wrong" if not hits and pid in got
                       else "ambiguous" if not must and hits else None)
            res["pairs"] += 1
            if verdict is None:
                continue
            res[verdict] += 1
            if verdict != "ambiguous":
                need = window_needed(cs, m, t, matching=verdict == "wrong")
                res["window_needed_s"].append(need)
                if len(res["examples"]) < EXAMPLES:
                    res["examples"].append(_example(verdict, pid, m, t, cs, states, hits, need,
                                                    (latency or {}).get(m.id)))
    for res in out.values():
        needed = sorted(res.pop("window_needed_s"))
        res["max_window_needed_s"] = needed[-1] if needed else None
        res["window_needed_s_top"] = [round(w, 3) for w in needed[-EXAMPLES:]]
    return out


def _example(verdict: str, pid: str, m: Message, t: float, cs: list[Change], states: range, hits: set[int],
             need: float, latency: float | None) -> dict:
    return {"verdict": verdict, "profile": pid, "message": m.id, "seq": m.seq, "slot": m.slot, "price": m.price,
            "published": round(t, 3), "window_needed_s": round(need, 3),
            "probe_latency_s": None if latency is None else round(latency, 3),
            "versions": [{"k": k, "op": c.op, "text": c.text, "start": round(c.start, 3), "end": round(c.end, 3),
                          "candidate": k in states, "matches": k in hits}
                         for k, c in enumerate(cs, 1) if states.start - 1 <= k <= states.stop]}


def effects(by_profile: dict[str, list[Change]], by_id: dict[str, Message], by_slot: dict[int, list[Message]],
            t_pub: dict[str, float], deliveries: dict[str, list[tuple[float, str]]]) -> list[dict]:
    """Step 4 of the module docstring: per churn change, its effect, wait and excess (None
    where no effect could be seen). ``by_slot``: each slot's messages in order of seq."""
    seqs = {slot: [m.seq for m in ms] for slot, ms in by_slot.items()}
    out = []
    for pid, cs in by_profile.items():
        got = deliveries.get(pid, [])
        for k, c in enumerate(cs):
            if c.phase == "setup":
                continue
            if c.op == "delete":
                late = [t_pub[mid] for _, mid in got if t_pub.get(mid, -math.inf) >= c.start]
                out.append({"phase": c.phase, "op": "delete", "effect_s": max(0.0, max(late, default=c.start) - c.start),
                            "wait_s": None, "excess_s": None})
                continue
            prev = cs[k - 1] if k else None
            until = cs[k + 1].start if k + 1 < len(cs) else math.inf

            def shows(m: Message) -> bool:  # published while c's version was the latest; only it matches
                return (c.matches(m) and not (prev is not None and prev.matches(m))
                        and t_pub.get(m.id, math.inf) < until)

            first = None
            slot = by_slot.get(c.slot, [])
            for m in islice(slot, bisect.bisect_left(seqs.get(c.slot, []), c.seq), None):
                if t_pub.get(m.id, -math.inf) >= until:
                    break
                if shows(m):
                    first = m
                    break
            seen = next((t for t, mid in got if mid in by_id and shows(by_id[mid])), None)
            wait = None if first is None else t_pub[first.id] - c.start
            effect = None if seen is None else seen - c.start
            out.append({"phase": c.phase, "op": c.op, "effect_s": effect, "wait_s": wait,
                        "excess_s": None if effect is None or wait is None else effect - wait})
    return out


def summarize_effects(rows: list[dict]) -> dict:
    """p50/p99 of effect, wait and excess over the changes whose effect was seen, per op and all."""
    def stats(sel: list[dict]) -> dict:
        seen = [r for r in sel if r["effect_s"] is not None]
        return {"changes": len(sel), "seen": len(seen),
                "could_show": sum(1 for r in sel if r["op"] == "delete" or r["wait_s"] is not None),
                **{f"{key}_p{q}": _pct([r[key] for r in seen if r[key] is not None], q / 100)
                   for key in ("effect_s", "wait_s", "excess_s") for q in (50, 99)}}
    return {"all": stats(rows), **{op: stats([r for r in rows if r["op"] == op]) for op in ("add", "update", "delete")}}


def phase_result(meta: dict, msgs: list[Message], t_pub: dict[str, float], changes: list[Change],
                 probe_first: dict[str, float], deliveries_per_message: Counter, effect_rows: list[dict],
                 correct: dict) -> dict:
    """One phase's figures (see the module docstring)."""
    lat = [probe_first[m.id] - t_pub[m.id] for m in msgs if m.id in probe_first and m.id in t_pub]
    got = [probe_first[m.id] for m in msgs if m.id in probe_first]
    span = (max(got) - min(got)) if len(got) > 1 else None  # first to last delivery at the probe
    ok = [c for c in changes if c.ok]
    wall = (max(c.end for c in changes) - min(c.start for c in changes)) if changes else 0.0
    req = [c.end - c.start for c in ok]
    return {**{k: v for k, v in meta.items() if k not in ("start", "published", "drained")},
            "changes": len(changes), "failed": len(changes) - len(ok),
            "ops": dict(Counter(c.op for c in ok)),
            "achieved_changes_per_s": len(ok) / wall if wall else 0.0,
            "request_ms_p50": _pct(req, 0.5) and _pct(req, 0.5) * 1e3,
            "request_ms_p99": _pct(req, 0.99) and _pct(req, 0.99) * 1e3,
            "messages_per_s": meta["messages"] / meta["publish_s"] if meta["publish_s"] else None,
            "latency_p50_s": _pct(lat, 0.5), "latency_p99_s": _pct(lat, 0.99), "latency_max_s": max(lat, default=None),
            "probe_delivered": len(lat), "delivered_messages_per_s": (len(got) - 1) / span if span else None,
            "deliveries_per_s": sum(deliveries_per_message[m.id] for m in msgs) / span if span else None,
            "drain_s": meta["drained"] - meta["published"],
            "effect": summarize_effects([r for r in effect_rows if r["phase"] == meta["phase"]]),
            "correctness": correct.get(meta["phase"], {})}


def analyse(phases: list[tuple[dict, list[Message], dict[str, float], list[Change]]], setup: list[Change],
            log: list[tuple[str, str, float]], probe: str, args: argparse.Namespace) -> list[dict]:
    """Every phase's figures from the logs: publish times, changes, deliveries."""
    t_pub = {mid: t for _, _, sent, _ in phases for mid, t in sent.items()}
    msgs = [m for _, ms, _, _ in phases for m in ms]
    by_id = {m.id: m for m in msgs}
    by_slot: dict[int, list[Message]] = defaultdict(list)
    for m in msgs:
        by_slot[m.slot].append(m)
    changes = setup + [c for _, _, _, cs in phases for c in cs]
    by_profile = lifetimes(changes)
    probe_first: dict[str, float] = {}
    delivered: dict[str, Counter] = defaultdict(Counter)
    deliveries: dict[str, list[tuple[float, str]]] = defaultdict(list)
    per_message: Counter = Counter()
    for pid, mid, t in log:
        per_message[mid] += 1
        if pid == probe:
            probe_first.setdefault(mid, t)
        else:
            delivered[mid][pid] += 1
            deliveries[pid].append((t, mid))
    for got in deliveries.values():
        got.sort()
    latency = {mid: t - t_pub[mid] for mid, t in probe_first.items() if mid in t_pub}
    correct = oracle(msgs, t_pub, by_profile, delivered, args.window, latency)
    rows = effects(by_profile, by_id, by_slot, t_pub, deliveries)
    return [phase_result(meta, ms, t_pub, cs, probe_first, per_message, rows, correct) for meta, ms, _, cs in phases]


# -- the run ------------------------------------------------------------------------------------


def wait_quiet(clock: Clock, quiet: float = 2.0, timeout: float = 120.0) -> None:
    """Until the consumer has read nothing new for ``quiet`` s."""
    deadline, last, since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        if clock.records != last:
            last, since = clock.records, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.1)


def run(args: argparse.Namespace, spark=None) -> dict:
    """Start the overlay, register, run the phases, stop; the figures."""
    from routing.overlay import builtin

    say = lambda msg: print(f"  {msg}", flush=True)  # noqa: E731
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(name="bench-churn"), spark=spark)
    cluster.start(progress=say)
    rng = random.Random(args.seed)
    clock = None
    try:
        port = port_of(cluster.api_url)
        client = Client(port)
        background, churner = subscriber(client), subscriber(client)
        load0 = os.getloadavg()[0]
        reg = register_background(cluster, client, background["token"], args.background, args.single, args.seed, say)
        profiles, setup, probe = register_pool(cluster, client, churner["token"], args.pool, args.slots, rng)
        client.close()
        clock = Clock(cluster.bootstrap_servers, churner["delivery_topic"], keep=True)
        pool = Pool(profiles, args.slots)
        plan = [("warm-up", 0.0, args.warm_up)] + [(f"{r:g}/s", r, args.phase) for r in args.rates]
        phases, seq = [], 0
        for name, rate, duration in plan:
            say(f"phase {name}: {duration:.0f} s, {args.rate:g} messages/s ...")
            phases.append(run_phase(cluster, pool, port, churner["token"], name, rate, duration, args.rate, seq, args))
            seq += phases[-1][0]["messages"]
            c = phases[-1][3]
            if c:
                say(f"  {sum(x.ok for x in c):,} changes in {c[-1].end - c[0].start:.1f} s, "
                    f"drained {phases[-1][0]['drained'] - phases[-1][0]['published']:.1f} s after the last message")
        wait_quiet(clock)
        load1 = os.getloadavg()[0]
    finally:
        if clock is not None:
            clock.stop()
        kafka = cluster.kafka
        cluster.stop()
        if kafka is not None:
            shutil.rmtree(kafka.dir, ignore_errors=True)
    log = clock.log
    say(f"analysing {len(log):,} deliveries ...")
    results = analyse(phases, setup, log, probe, args)
    return {"config": {"background": args.background, "single": args.single, "pool": args.pool,
                       "slots": args.slots, "messages_per_s": args.rate, "phase_s": args.phase,
                       "warm_up_s": args.warm_up, "rates": args.rates, "deletes": args.deletes,
                       "window_s": args.window, "seed": args.seed, "overlay": "figure4, one Spark query, local Kafka",
                       "machine": f"{os.cpu_count()} cores", "python": platform.python_version(),
                       "date": datetime.now(timezone.utc).isoformat(),
                       "load_average_1min": [round(load0, 2), round(load1, 2)]},
            "targets": {"effect_p99_s_at_100_per_s": TARGET_EFFECT_P99_S, "latency_ratio": TARGET_LATENCY_RATIO,
                        "bulk_and_converged_s": TARGET_CONVERGE_S, "wrong": 0, "missed": 0},
            "registration": reg, "deliveries": len(log),
            "phases": [p for p in results if p["phase"] != "warm-up"],
            "warm_up": next(p for p in results if p["phase"] == "warm-up"),
            "ratios": ratios(results)}


def ratios(results: list[dict]) -> dict:
    """Message latency of each churn phase over the baseline's (the first phase at 0/s)."""
    base = next((p for p in results if p["target_changes_per_s"] == 0 and p["phase"] != "warm-up"), None)
    if base is None or not base["latency_p50_s"]:
        return {}
    return {p["phase"]: {"latency_p50_vs_baseline": (p["latency_p50_s"] or 0) / base["latency_p50_s"],
                         "latency_p99_vs_baseline": (p["latency_p99_s"] or 0) / base["latency_p99_s"],
                         "achieved_vs_target_changes": (p["achieved_changes_per_s"] / p["target_changes_per_s"]
                                                        if p["target_changes_per_s"] else None)}
            for p in results if p is not base and p["phase"] != "warm-up"}


# -- output -----------------------------------------------------------------------------------------


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(res: dict) -> str:
    """The printed summary."""
    r, c = res["registration"], res["config"]
    b, one = r["bulk"], r["one_by_one"]
    met = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    lines = [f"churn on the figure-4 overlay: {c['background']:,} background profiles, a pool of {c['pool']:,} "
             f"churn profiles over {c['slots']} slots, {c['messages_per_s']:g} messages/s, W = {c['window_s']:g} s; "
             f"load average {c['load_average_1min'][0]:.1f} -> {c['load_average_1min'][1]:.1f} on {c['machine']}"]
    if b:
        lines.append(f"registration: bulk {b['per_s_median']:,.0f}/s (median batch, batches of up to {b['batch']:,}), "
                     f"{b['profiles']:,} in {r['registration_s']:.1f} s; converged {r['convergence_s']:.1f} s later; "
                     f"all in {r['all_in_s']:.1f} s (target for 100k: <= {TARGET_CONVERGE_S:.0f} s"
                     + (f": {met(r['all_in_s'] <= TARGET_CONVERGE_S)})" if b["profiles"] >= 100_000 else ")"))
    if one:
        lines.append(f"one by one: {one['per_s']:,.0f}/s, p50 {one['ms_p50']:.1f} ms, p99 {one['ms_p99']:.1f} ms "
                     f"({one['profiles']:,} profiles)")
    lines.append(f"\n{'phase':>8} {'chg/s':>7} {'req ms':>11} {'msg/s':>6} {'lat p50':>7} {'p99':>6} {'x base':>6} "
                 f"{'drain':>5} {'effect p50':>10} {'p99':>6} {'excess p50':>10} {'p99':>6} {'seen':>11} "
                 f"{'wrong':>5} {'missed':>6} {'ambig':>6} {'dup':>5}")
    for p in [res["warm_up"]] + res["phases"]:
        e, k = p["effect"]["all"], p["correctness"]
        x = res["ratios"].get(p["phase"], {}).get("latency_p50_vs_baseline")
        lines.append(
            f"{p['phase']:>8} {_f(p['achieved_changes_per_s'], ',.0f'):>7} "
            f"{_f(p['request_ms_p50'], '.1f'):>5}/{_f(p['request_ms_p99'], '.0f'):<5} "
            f"{_f(p['delivered_messages_per_s'], '.1f'):>6} {_f(p['latency_p50_s'], '.2f'):>7} "
            f"{_f(p['latency_p99_s'], '.2f'):>6} {_f(x, '.2f'):>6} {p['drain_s']:>5.1f} "
            f"{_f(e['effect_s_p50'], '.2f'):>10} {_f(e['effect_s_p99'], '.2f'):>6} "
            f"{_f(e['excess_s_p50'], '.2f'):>10} {_f(e['excess_s_p99'], '.2f'):>6} "
            f"{str(e['seen']) + '/' + str(e['changes']):>11} {k.get('wrong', 0):>5} {k.get('missed', 0):>6} "
            f"{k.get('ambiguous', 0):>6} {k.get('duplicates', 0):>5}")
    lines.append("chg/s: changes/s achieved; req ms: request p50/p99; msg/s: messages delivered to the probe per s; "
                 "lat: publish -> delivery at b6 (s); x base: p50 over the 0/s phase's; drain: s until the brokers "
                 "had no input left after the last message; effect/excess: change -> first effect and what the "
                 "overlay added to the wait for a message showing it (s); seen: changes whose effect was seen / all")
    hundred = next((p for p in res["phases"] if p["target_changes_per_s"] == 100), None)
    if hundred:
        e = hundred["effect"]["all"]
        p99 = e["effect_s_p99"]
        ratio = res["ratios"].get(hundred["phase"], {}).get("latency_p50_vs_baseline")
        lines.append(f"targets at 100 changes/s: effect p99 {_f(p99, '.2f')} s (<= {TARGET_EFFECT_P99_S:g} s: "
                     f"{met(p99 is not None and p99 <= TARGET_EFFECT_P99_S)}; the wait for a message that could "
                     f"show it alone: p99 {_f(e['wait_s_p99'], '.2f')} s; what the overlay added: excess p99 "
                     f"{_f(e['excess_s_p99'], '.2f')} s), latency p50 {_f(ratio, '.2f')}x the baseline "
                     f"(<= {TARGET_LATENCY_RATIO:g}x: {met(ratio is not None and ratio <= TARGET_LATENCY_RATIO)})")
    errors = sum(p["correctness"].get("wrong", 0) + p["correctness"].get("missed", 0) for p in res["phases"])
    needed = [p["correctness"].get("max_window_needed_s") for p in res["phases"]]
    needed = max((w for w in needed if w is not None), default=None)
    lines.append(f"correctness: {errors} wrong or missed deliveries in all phases (target 0: {met(errors == 0)})"
                 + (f"; all would be right with W >= {needed:.2f} s (message latency to the probe: max "
                    f"{max(p['latency_max_s'] or 0 for p in res['phases']):.2f} s)" if errors else ""))
    for p in res["phases"] + [res["warm_up"]]:
        for ex in p["correctness"].get("examples", [])[:3]:
            lines.append(f"  {p['phase']}: {ex['verdict']} profile {ex['profile']} message {ex['message']} "
                         f"(seq {ex['seq']}, slot {ex['slot']}, price {ex['price']}, published {ex['published']}, "
                         f"{_f(ex['probe_latency_s'], '.2f')} s to the probe; right with W >= "
                         f"{ex['window_needed_s']} s): "
                         + "; ".join(f"v{v['k']} {v['op']} {v['text']} [{v['start']}, {v['end']}]"
                                     f"{' candidate' if v['candidate'] else ''}{' matches' if v['matches'] else ''}"
                                     for v in ex["versions"]))
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    """Change -> effect, message latency and achieved change rate per phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = res["phases"]
    names = [p["phase"] for p in phases]
    x = list(range(len(names)))
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4.2))
    for off, key, label in ((-0.3, "effect_s", "effect"), (0.0, "excess_s", "excess over the wait")):
        for q, alpha in ((50, 1.0), (99, 0.45)):
            a.bar([i + off + (0.15 if q == 99 else 0) for i in x],
                  [p["effect"]["all"][f"{key}_p{q}"] or 0 for p in phases], 0.15, alpha=alpha,
                  color="tab:blue" if key == "effect_s" else "tab:orange", label=f"{label} p{q}")
    for q, marker in ((50, "x"), (99, "+")):
        waits = [(i, p["effect"]["all"][f"wait_s_p{q}"]) for i, p in zip(x, phases)]
        a.scatter([i - 0.225 for i, w in waits if w is not None], [w for _, w in waits if w is not None],
                  color="k", marker=marker, zorder=3, label=f"wait for a message showing it, p{q}")
    a.axhline(TARGET_EFFECT_P99_S, color="k", ls="--", lw=0.8, label="target p99 at 100/s")
    a.set_xticks(x, names)
    a.set_ylabel("seconds")
    a.set_title("change -> first effect on deliveries")
    a.legend(fontsize=7)
    b.bar([i - 0.2 for i in x], [p["latency_p50_s"] or 0 for p in phases], 0.4, label="p50")
    b.bar([i + 0.2 for i in x], [p["latency_p99_s"] or 0 for p in phases], 0.4, label="p99")
    base = next((p for p in phases if p["target_changes_per_s"] == 0), None)
    if base and base["latency_p50_s"]:
        b.axhline(TARGET_LATENCY_RATIO * base["latency_p50_s"], color="k", ls="--", lw=0.8, label="2x baseline p50")
    b.set_xticks(x, names)
    b.set_ylabel("seconds, publish -> delivery at b6")
    b.set_title(f"message latency at {res['config']['messages_per_s']:g} msg/s")
    b.legend(fontsize=7)
    churned = [p for p in phases if p["target_changes_per_s"]]
    c.loglog([p["target_changes_per_s"] for p in churned], [p["target_changes_per_s"] for p in churned], "k--",
             lw=0.8, label="target")
    c.loglog([p["target_changes_per_s"] for p in churned], [max(p["achieved_changes_per_s"], 1e-3) for p in churned],
             "o-", label="achieved")
    for p in churned:
        k = p["correctness"]
        c.annotate(f"{k.get('wrong', 0)} wrong\n{k.get('missed', 0)} missed",
                   (p["target_changes_per_s"], max(p["achieved_changes_per_s"], 1e-3)), fontsize=7,
                   textcoords="offset points", xytext=(4, -18))
    c.set_xlabel("changes/s asked")
    c.set_ylabel("changes/s achieved (HTTP; in batches above 100/s)")
    c.set_title(f"churn on {res['config']['background']:,} profiles")
    c.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, spark=None) -> int:
    """The command line (``spark``: a running SparkSession to use, e.g. the tests')."""
    p = argparse.ArgumentParser(prog="python -m bench.churn", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5k background profiles, 20 s phases")
    p.add_argument("--background", type=int, help="background profiles registered in bulk (default 100000, "
                   "quick 5000)")
    p.add_argument("--single", type=int, default=300, help="profiles registered one by one (default 300)")
    p.add_argument("--pool", type=int, default=600, help="churn profiles (slots) (default 600)")
    p.add_argument("--slots", type=int, default=10, help="S: message slots (default 10)")
    p.add_argument("--rate", type=float, default=50.0, help="messages/s (default 50)")
    p.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 10.0, 100.0, 1000.0],
                   help="changes/s per phase, 0 the baseline (default 0,10,100,1000)")
    p.add_argument("--phase", type=float, help="seconds per phase (default 60, quick 20)")
    p.add_argument("--warm-up", type=float, help="seconds of messages before the phases (default 10, quick 5)")
    p.add_argument("--deletes", type=float, default=0.2, help="share of changes to a live profile that delete it")
    p.add_argument("--threads", type=int, help="HTTP connections of the churn client (default: one per 50/s, at most 8)")
    p.add_argument("--window", type=float, default=WINDOW_S, help=f"W, seconds (default {WINDOW_S:g})")
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--json", type=Path, help="default bench/results/churn.json")
    p.add_argument("--plot", type=Path, help="default: the JSON path with .png")
    args = p.parse_args(argv)
    args.background = args.background if args.background is not None else (5000 if args.quick else 100_000)
    args.phase = args.phase or (20.0 if args.quick else 60.0)
    args.warm_up = args.warm_up or (5.0 if args.quick else 10.0)
    print(f"churn benchmark: {args.background:,} background profiles, pool {args.pool:,}, "
          f"{args.rate:g} messages/s, phases of {args.phase:g} s at {args.rates} changes/s", flush=True)
    res = run(args, spark)
    print(table(res))
    save(res, args.json or RESULTS / "churn.json", args.plot, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
