"""``make run`` / ``onyx demo``: the six-broker overlay of ONYX Figure 4, for real.

Starts Kafka, the registration service and six brokers (streaming queries of one
Spark application); registers ONYX's transformation profiles Q1-Q3 (Q1 and Q2 near
broker b5, Q3 near b6, as in ONYX Figure 6), each as a subscriber of its own, and a
few thousand generated filters as one more subscriber, through the HTTP API; waits
until the routing tables have converged; publishes generated NITF messages, the
news-agency files of ``../shared/corpus/news/`` (when present), two stock stories for
Q1 and Q2 and one malformed message to the source topic with a Kafka producer; then
reads the four subscribers' delivery topics and compares what each profile received
(and, for Q1-Q3, the documents they construct) with a centralized engine holding every
profile (the reference). It prints a summary and stops everything. Exit status 0 only
if every profile received exactly what the reference says, on its own subscriber's
topic, and the malformed message reached the dead-letter topic.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from broker import config, packets, topics
from broker.clients import TopicTail, api, messages_from, publish
from broker.local.cluster import LocalOverlay, OverlaySettings
from routing.overlay import builtin
from yfilter import Engine, MessageError
from yfilter.generators import ProfileGenerator, Schema

NAMED = {
    # name: (transformation profile as ONYX section 2 writes it, broker the subscriber is near)
    "Q1": ('for $n in $msg/nitf where $n/head/pubdata/@edition.area = "SF" '
           'and $n//tobject.subject/@tobject.subject.type = "Stock" '
           "return <stock_news> {$n/body/body.head/hedline} {$n/body/body.content} </stock_news>", "b5"),
    "Q2": ('for $n in $msg/nitf where $n//tobject.subject/@tobject.subject.type = "Stock" '
           "and $n/head/docdata/urgency/@ed-urg <= 2 "
           "return <urgent_stock> {$n/head/title} </urgent_stock>", "b5"),
    "Q3": ('for $n in $msg/nitf where $n/head/docdata/series/@series.name = "Tide Forecasts" '
           "return <tides> {$n/head/title} {$n/body/body.content} </tides>", "b6"),
}
STOCK_NEWS = [
    # Two stories for Q1 and Q2 (random NITF seldom has both an SF edition and a Stock subject).
    ("stock-sf", b"<nitf><head><title>Bay Area shares rally</title><tobject><tobject.subject "
                 b"tobject.subject.type='Stock'/></tobject><docdata><urgency ed-urg='4'/></docdata>"
                 b"<pubdata edition.area='SF'/></head><body><body.head><hedline><hl1>Tech stocks up"
                 b"</hl1></hedline></body.head><body.content><p>Shares rose 3%.</p></body.content>"
                 b"</body></nitf>"),
    ("stock-urgent", b"<nitf><head><title>Trading halted</title><tobject><tobject.subject "
                     b"tobject.subject.type='Stock'/></tobject><docdata><urgency ed-urg='1'/>"
                     b"</docdata><pubdata edition.area='NY'/></head><body/></nitf>"),
]
BATCH = 500
"""Generated profiles per ``POST /profiles:batch`` (small enough for the progress bar to move)."""

MALFORMED = b"<nitf><head><title>unclosed</head></nitf>"


@dataclass
class DemoResult:
    """What the demo saw; ``ok`` when deliveries equal the reference exactly."""

    expected: dict[str, set[str]] = field(default_factory=dict)   # message id -> profile ids
    refused: set[str] = field(default_factory=set)                 # names of malformed messages
    expected_docs: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)  # Q1-Q3 results
    received: dict[str, set[str]] = field(default_factory=dict)
    received_docs: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)
    dead_letters: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)
    misdelivered: int = 0   # deliveries on a topic other than their profile's subscriber's
    forwarded: int = 0
    flooding: int = 0

    @property
    def ok(self) -> bool:
        exact = all(self.received.get(m, set()) == p for m, p in self.expected.items())
        same_docs = all(sorted(self.received_docs.get(k, [])) == sorted(docs)
                        for k, docs in self.expected_docs.items())
        return (exact and same_docs and not self.misdelivered
                and self.refused <= {k for k, _ in self.dead_letters})


@dataclass
class Registered:
    """The demo's profiles ``{profile id: (name, text)}`` and each one's delivery topic."""

    profiles: dict[str, tuple[str, str]] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)


def register(api_url: str, overlay_brokers: list[str], n_generated: int, seed: int,
             progress: bool) -> Registered:
    """Register Q1-Q3 one by one (``POST /profiles``), each as a new subscriber, and
    ``n_generated`` generated profiles as one subscriber (one delivery topic for them
    all, not one each), in batches (``POST /profiles:batch``)."""
    from tqdm import tqdm

    rng = random.Random(seed)
    out = Registered()
    for name, (text, near) in NAMED.items():
        body = api("POST", f"{api_url}/profiles", {"text": text, "near": near})
        out.profiles[body["profile_id"]] = (name, text)
        out.topics[body["profile_id"]] = body["delivery_topic"]
    generated = api("POST", f"{api_url}/subscribers")
    gen = ProfileGenerator(Schema.nitf(), n_preds=(0, 1), p_star=0.1, p_desc=0.3, seed=seed)
    texts = gen.batch(n_generated)
    with tqdm(total=len(texts), desc="registering profiles over HTTP", unit="profile",
              disable=not progress) as bar:
        for first in range(0, len(texts), BATCH):
            chunk = texts[first:first + BATCH]
            body = api("POST", f"{api_url}/profiles:batch",
                       {"profiles": [{"text": t, "near": rng.choice(overlay_brokers)} for t in chunk]},
                       subscriber_token=generated["token"])
            for i, (text, result) in enumerate(zip(chunk, body["results"]), first):
                if result["status"] != 201:
                    raise RuntimeError(f"generated profile {i} was refused: {result['error']['detail']}")
                out.profiles[result["profile"]["profile_id"]] = (f"gen-{i}", text)
                out.topics[result["profile"]["profile_id"]] = result["profile"]["delivery_topic"]
            bar.update(len(chunk))
    return out


def reference(profiles: dict[str, tuple[str, str]], docs: list[tuple[str, bytes]],
              ids: list[str]) -> DemoResult:
    """The centralized answer, one engine over every profile: the profile ids per
    message id, the documents Q1-Q3 construct, and the names of the messages it
    refuses (they must be dead-lettered)."""
    engine = Engine()
    engine.add_many((pid, text) for pid, (_, text) in profiles.items())
    named = {pid for pid, (name, _) in profiles.items() if name in NAMED}
    result = DemoResult()
    for mid, (name, doc) in zip(ids, docs):
        try:
            results = engine.run(doc)
        except MessageError:
            result.refused.add(name)
            continue
        result.expected[mid] = set(results)
        result.expected_docs.update(((mid, pid), results[pid]) for pid in named & set(results))
    return result


def run_on(cluster: LocalOverlay, say, *, profiles: int = 2000, messages: int = 200, corpus=None,
           seed: int = 7, timeout: float = 300.0, progress: bool = True) -> DemoResult:
    """The demo on a running overlay (used by :func:`run` and the tests)."""
    corpus = config.CORPUS_DIR if corpus is None else corpus
    brokers = cluster.overlay.brokers
    t0 = time.monotonic()
    reg = register(cluster.api_url, brokers, profiles, seed, progress)
    registered = reg.profiles
    say(f"  registered {len(registered)} profiles (Q1-Q3 + {profiles} generated) in {time.monotonic() - t0:.0f}s "
        f"as {len(set(reg.topics.values()))} subscribers, each with its own delivery topic")
    t0 = time.monotonic()
    cluster.wait_idle(timeout=timeout)
    tables = {b["broker"]: sum(t["links"] for t in b["routing"].values()) for b in cluster.job.status()}
    say(f"  routing tables converged in {time.monotonic() - t0:.0f}s; output links per broker: "
        + ", ".join(f"{b} {n}" for b, n in tables.items()))

    docs = list(messages_from([corpus] if corpus.is_dir() else [], generate=messages, seed=seed))
    docs += STOCK_NEWS
    docs.append(("malformed", MALFORMED))
    names = sorted(set(reg.topics.values())) + [topics.DEAD_LETTER]
    reader = TopicTail(cluster.bootstrap_servers, names)
    forwarded_before = sum(b["forwarded"] for b in cluster.job.status())
    source = sorted(cluster.overlay.sources)[0]
    n_corpus = len(docs) - messages - len(STOCK_NEWS) - 1
    say(f"  publishing {len(docs)} messages to {topics.source_topic(source)}: {messages} generated NITF, "
        f"{n_corpus} corpus files" + ("" if corpus.is_dir() else f" (no corpus at {corpus})")
        + f", {len(STOCK_NEWS)} stock stories, 1 malformed")
    ids = publish(cluster.bootstrap_servers, topics.source_topic(source), docs, progress=progress)
    result = reference(registered, docs, ids)
    received: dict[str, set[str]] = defaultdict(set)
    received_docs: dict[tuple[str, str], list[bytes]] = defaultdict(list)

    def take(r) -> None:
        for pid in packets.profile_ids(r.key, r.headers):  # one record may be for many profiles of its topic
            if reg.topics.get(pid) != r.topic:
                result.misdelivered += 1  # another subscriber's delivery, or none of the demo's
            elif pid in registered:
                mid = dict(r.headers)["onyx-message-id"].decode()
                received[mid].add(pid)
                if registered[pid][0] in NAMED:
                    received_docs[(mid, pid)].append(r.value)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for r in reader:
                if r.topic == topics.DEAD_LETTER:
                    result.dead_letters.append((r.key.decode(errors="replace"),
                                                dict(r.headers).get("onyx-reason", b"").decode(errors="replace")))
                else:
                    take(r)
            dead = {k for k, _ in result.dead_letters}
            if result.refused <= dead and all(received.get(m, set()) >= p for m, p in result.expected.items()):
                cluster.wait_idle(timeout=timeout)
                for r in reader:  # anything still in flight (there should be nothing)
                    if r.topic != topics.DEAD_LETTER:
                        take(r)
                break
    finally:
        reader.close()
    result.received = dict(received)
    result.received_docs = dict(received_docs)
    result.forwarded = sum(b["forwarded"] for b in cluster.job.status()) - forwarded_before
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
            say(f"  {name:<12} {got[pid]:>9} {want[pid]:>9}  {_short(text)}")
    gen = [pid for pid, (name, _) in registered.items() if name not in NAMED]
    say(f"  {'generated':<12} {sum(got[p] for p in gen):>9} {sum(want[p] for p in gen):>9}  "
        f"{len(gen)} profiles, {sum(1 for p in gen if got[p])} of them received something")
    say(f"  links: {result.forwarded} messages forwarded between brokers; flooding would send "
        f"{result.flooding}")
    if result.misdelivered:
        say(f"  {result.misdelivered} deliveries on a topic other than their subscriber's own")
    for (_, pid), docs in sorted(result.received_docs.items(), key=lambda kv: registered[kv[0][1]][0]):
        say(f"  {registered[pid][0]} result: {_short(docs[0].decode(errors='replace'))}")
    for key, reason in result.dead_letters:
        say(f"  dead letter {key}: {reason}")
    wrong = [m for m, p in result.expected.items() if result.received.get(m, set()) != p]
    wrong += sorted({m for (m, pid), docs in result.expected_docs.items()
                     if sorted(result.received_docs.get((m, pid), [])) != sorted(docs)} - set(wrong))
    if result.ok:
        say("  ok: every subscriber received exactly what the centralized engine says")
    else:
        say(f"  FAILED: {len(wrong)} messages delivered differently from the reference (e.g. {wrong[:3]})"
            + "; dead letters missing for: " + ", ".join(sorted(result.refused - {k for k, _ in result.dead_letters})))


def _short(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def run(profiles: int = 2000, messages: int = 200, corpus=None, timeout: float = 300.0, out=None,
        distributed: bool = False) -> int:
    """Start the Figure 4 overlay (``distributed``: on a Kafka cluster and a Spark standalone
    cluster, one application per broker), run the demo on it, stop everything; 0 when exact."""
    say = (lambda s="": print(s, file=out or sys.stdout, flush=True))
    say("Onyx demo: the six-broker overlay of ONYX Figure 4 on Kafka and Spark Structured Streaming")
    make = OverlaySettings.distributed if distributed else OverlaySettings
    cluster = LocalOverlay(builtin("figure4"), make(name="demo"))
    try:
        cluster.start(progress=lambda msg: say(f"  {msg} ..."))
        say(f"  kafka     {cluster.bootstrap_servers}")
        say(f"  api       {cluster.api_url}")
        if cluster.standalone is not None:
            say(f"  spark     {cluster.standalone.master_url} ({len(cluster.standalone.workers)} workers)")
            say(f"  brokers   {', '.join(cluster.overlay.brokers)} (one Spark application each)")
        else:
            say(f"  brokers   {', '.join(cluster.overlay.brokers)} (one streaming query serves them all)")
        result = run_on(cluster, say, profiles=profiles, messages=messages, corpus=corpus, timeout=timeout)
    finally:
        cluster.stop()
    say("  stopped the overlay")
    return 0 if result.ok else 1
