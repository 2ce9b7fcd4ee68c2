"""``make run`` / ``onyx demo``: the six-broker overlay of ONYX Figure 4, for real.

Starts Kafka, the registration service and six brokers (streaming queries of one
Spark application); registers ONYX's example profiles Q1-Q3 (Q1 and Q2 near broker
b5, Q3 near b6, as in ONYX Figure 6) and a few thousand generated ones through the
HTTP API; waits until the routing tables have converged; publishes generated NITF
messages, the news-agency files of ``../shared/corpus/news/`` (when present) and one
malformed message to the source topic with a Kafka producer; then reads every
delivery topic and compares what each subscriber received with a centralized engine
holding every profile (the reference). It prints a summary and stops everything.
Exit status 0 only if every subscriber received exactly what the reference says and
the malformed message reached the dead-letter topic.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from broker import config, topics
from broker.clients import TopicTail, api, messages_from, publish
from broker.cluster import LocalOverlay, OverlaySettings
from routing.overlay import builtin
from yfilter import Engine, MessageError
from yfilter.generators import ProfileGenerator, Schema

NAMED = {
    # name: (profile, broker the subscriber is near)
    "Q1": ("/nitf[head/pubdata/@edition.area = 'SF']", "b5"),
    "Q2": ("/nitf[.//tobject.subject/@tobject.subject.type = 'Stock']", "b5"),
    "Q3": ("/nitf[head/docdata/series/@series.name = 'Tide Forecasts']//body.content", "b6"),
}
MALFORMED = b"<nitf><head><title>unclosed</head></nitf>"


@dataclass
class DemoResult:
    """What the demo saw; ``ok`` when deliveries equal the reference exactly."""

    expected: dict[str, set[str]] = field(default_factory=dict)   # message id -> profile ids
    refused: set[str] = field(default_factory=set)                 # names of malformed messages
    received: dict[str, set[str]] = field(default_factory=dict)
    dead_letters: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)
    forwarded: int = 0
    flooding: int = 0

    @property
    def ok(self) -> bool:
        exact = all(self.received.get(m, set()) == p for m, p in self.expected.items())
        return exact and self.refused <= {k for k, _ in self.dead_letters}


def register(api_url: str, overlay_brokers: list[str], n_generated: int, seed: int,
             progress: bool) -> dict[str, tuple[str, str]]:
    """Register Q1-Q3 and ``n_generated`` generated profiles; returns
    ``{profile id: (name, text)}``."""
    from tqdm import tqdm

    rng = random.Random(seed)
    texts = [(name, text, near) for name, (text, near) in NAMED.items()]
    gen = ProfileGenerator(Schema.nitf(), n_preds=(0, 1), p_star=0.1, p_desc=0.3, seed=seed)
    texts += [(f"gen-{i}", t, rng.choice(overlay_brokers)) for i, t in enumerate(gen.batch(n_generated))]
    profiles = {}
    for name, text, near in tqdm(texts, desc="registering profiles over HTTP", unit="profile",
                                 disable=not progress):
        body = api("POST", f"{api_url}/profiles", {"text": text, "near": near})
        profiles[body["profile_id"]] = (name, text)
    return profiles


def reference(profiles: dict[str, tuple[str, str]], docs: list[tuple[str, bytes]],
              ids: list[str]) -> tuple[dict[str, set[str]], set[str]]:
    """The centralized answer, one engine over every profile: the profile ids per
    message id, and the names of the messages it refuses (they must be dead-lettered)."""
    engine = Engine()
    for pid, (_, text) in profiles.items():
        engine.add(pid, text)
    expected, refused = {}, set()
    for mid, (name, doc) in zip(ids, docs):
        try:
            expected[mid] = set(engine.match(doc))
        except MessageError:
            refused.add(name)
    return expected, refused


def run_on(cluster: LocalOverlay, say, *, profiles: int = 2000, messages: int = 200, corpus=None,
           seed: int = 7, timeout: float = 300.0, progress: bool = True) -> DemoResult:
    """The demo on a running overlay (used by :func:`run` and the tests)."""
    corpus = config.CORPUS_DIR if corpus is None else corpus
    brokers = cluster.overlay.brokers
    t0 = time.monotonic()
    registered = register(cluster.api_url, brokers, profiles, seed, progress)
    say(f"  registered {len(registered)} profiles (Q1-Q3 + {profiles} generated) in {time.monotonic() - t0:.0f}s")
    t0 = time.monotonic()
    cluster.wait_idle(timeout=timeout)
    tables = {b: sum(t.stats()["links"] for t in job.state.tables.values()) for b, job in cluster.jobs.items()}
    say(f"  routing tables converged in {time.monotonic() - t0:.0f}s; output links per broker: "
        + ", ".join(f"{b} {n}" for b, n in tables.items()))

    docs = list(messages_from([corpus] if corpus.is_dir() else [], generate=messages, seed=seed))
    docs.append(("malformed", MALFORMED))
    names = [topics.delivery_topic(b) for b in brokers] + [topics.DEAD_LETTER]
    reader = TopicTail(cluster.bootstrap_servers, names)
    forwarded_before = sum(j.status()["forwarded"] for j in cluster.jobs.values())
    source = sorted(cluster.overlay.sources)[0]
    n_corpus = len(docs) - messages - 1
    say(f"  publishing {len(docs)} messages to {topics.source_topic(source)}: {messages} generated NITF, "
        f"{n_corpus} corpus files" + ("" if corpus.is_dir() else f" (no corpus at {corpus})") + ", 1 malformed")
    ids = publish(cluster.bootstrap_servers, topics.source_topic(source), docs, progress=progress)
    result = DemoResult(*reference(registered, docs, ids))
    received: dict[str, set[str]] = defaultdict(set)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for r in reader:
                if r.topic == topics.DEAD_LETTER:
                    result.dead_letters.append((r.key.decode(errors="replace"),
                                                dict(r.headers).get("onyx-reason", b"").decode(errors="replace")))
                elif r.key.decode() in registered:
                    received[dict(r.headers)["onyx-message-id"].decode()].add(r.key.decode())
            dead = {k for k, _ in result.dead_letters}
            if result.refused <= dead and all(received.get(m, set()) >= p for m, p in result.expected.items()):
                cluster.wait_idle(timeout=timeout)
                for r in reader:  # anything still in flight (there should be nothing)
                    if r.topic != topics.DEAD_LETTER and r.key.decode() in registered:
                        received[dict(r.headers)["onyx-message-id"].decode()].add(r.key.decode())
                break
    finally:
        reader.close()
    result.received = dict(received)
    result.forwarded = sum(j.status()["forwarded"] for j in cluster.jobs.values()) - forwarded_before
    result.flooding = (len(docs) - 1) * (len(brokers) - 1)
    summarize(result, registered, say)
    return result


def summarize(result: DemoResult, registered: dict[str, tuple[str, str]], say) -> None:
    """Print per-subscriber deliveries against the reference, traffic, dead letters."""
    got = Counter(p for ps in result.received.values() for p in ps)
    want = Counter(p for ps in result.expected.values() for p in ps)
    say(f"  {'subscriber':<12} {'received':>9} {'expected':>9}  profile")
    for pid, (name, text) in registered.items():
        if name in NAMED:
            say(f"  {name:<12} {got[pid]:>9} {want[pid]:>9}  {text}")
    gen = [pid for pid, (name, _) in registered.items() if name not in NAMED]
    say(f"  {'generated':<12} {sum(got[p] for p in gen):>9} {sum(want[p] for p in gen):>9}  "
        f"{len(gen)} profiles, {sum(1 for p in gen if got[p])} of them received something")
    say(f"  links: {result.forwarded} messages forwarded between brokers; flooding would send "
        f"{result.flooding}")
    for key, reason in result.dead_letters:
        say(f"  dead letter {key}: {reason}")
    wrong = [m for m, p in result.expected.items() if result.received.get(m, set()) != p]
    if result.ok:
        say("  ok: every subscriber received exactly what the centralized engine says")
    else:
        say(f"  FAILED: {len(wrong)} messages delivered differently from the reference (e.g. {wrong[:3]})"
            + "; dead letters missing for: " + ", ".join(sorted(result.refused - {k for k, _ in result.dead_letters})))


def run(profiles: int = 2000, messages: int = 200, corpus=None, timeout: float = 300.0, out=None) -> int:
    """Start the Figure 4 overlay, run the demo on it, stop everything; 0 when exact."""
    say = (lambda s="": print(s, file=out or sys.stdout, flush=True))
    say("Onyx demo: the six-broker overlay of ONYX Figure 4 on Kafka and Spark Structured Streaming")
    cluster = LocalOverlay(builtin("figure4"), OverlaySettings(name="demo"))
    try:
        cluster.start(progress=lambda msg: say(f"  {msg} ..."))
        say(f"  kafka     {cluster.bootstrap_servers}")
        say(f"  api       {cluster.api_url}")
        say(f"  brokers   {', '.join(cluster.overlay.brokers)} (one streaming query each)")
        result = run_on(cluster, say, profiles=profiles, messages=messages, corpus=corpus, timeout=timeout)
    finally:
        cluster.stop()
    say("  stopped the overlay")
    return 0 if result.ok else 1
