"""``make run`` / ``onyx demo``: XML through Kafka and a Spark Structured Streaming query.

Starts a local Kafka broker, starts one streaming query that reads the source topic
``onyx.src.demo`` and sends every message to a delivery topic chosen by its document
type (``onyx.deliver.nitf``, ``.newsml``, ``.rss``, ``.other``) — or, if it is not
well-formed XML, to ``onyx.dead-letter`` with the reason in a header — then publishes
generated messages plus the news corpus, and prints what was published and what came
out. A stand-in for the overlay demo that later replaces it.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from broker import config, topics
from broker.devcluster import KafkaDevCluster

SOURCE = "demo"
KINDS = ("nitf", "newsml", "rss", "other")


@dataclass(frozen=True)
class Published:
    key: str
    origin: str
    payload: bytes


def classify(value: bytes | None) -> tuple[str, str]:
    """(topic, reason) for one message: its delivery topic, or the dead-letter topic
    and why. Runs in Spark's Python workers, so it imports what it needs itself."""
    from formats import FormatError, Message

    try:
        msg = Message.from_xml(value or b"")
    except FormatError as exc:
        return topics.DEAD_LETTER, str(exc)
    root = msg.tags[0].rsplit("}", 1)[-1].lower()
    kind = "newsml" if root in ("newsml", "newsitem", "newsmessage", "packageitem") else root
    return topics.delivery_topic(kind if kind in KINDS else "other"), ""


def generated_messages(count: int, seed: int = 7) -> list[Published]:
    """Small NITF stories and stock-quote messages, deterministic for a given seed."""
    rng = random.Random(seed)
    subjects = ["Stock", "Weather", "Sports", "Politics"]
    areas = ["SF", "NY", "LA", "Boston"]
    out = []
    for i in range(count):
        if i % 2:
            sym, px = rng.choice(["ACME", "INIT", "ONYX"]), rng.uniform(10, 500)
            xml = f'<quote symbol="{sym}"><price>{px:.2f}</price><volume>{rng.randint(1, 9999)}</volume></quote>'
        else:
            xml = (
                f'<nitf><head><title>Story {i}</title><pubdata edition.area="{rng.choice(areas)}"/>'
                f'<tobject><tobject.subject tobject.subject.type="{rng.choice(subjects)}"/></tobject></head>'
                f"<body><body.head><hedline><hl1>Headline {i}</hl1></hedline></body.head>"
                f"<body.content><p>Paragraph of story {i}.</p></body.content></body></nitf>"
            )
        out.append(Published(f"gen-{i}", "generated", xml.encode()))
    return out


def corpus_messages(folder: Path) -> list[Published]:
    """Every ``*.xml`` file of the news corpus, if the folder exists."""
    if not folder.is_dir():
        return []
    return [Published(f"corpus-{p.stem}", "corpus", p.read_bytes()) for p in sorted(folder.glob("*.xml"))]


def start_router(spark, bootstrap: str, checkpoint: Path):
    """The streaming query: source topic -> delivery topic per document type, or dead letter."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    # A lambda, not `classify` itself: PySpark would try to read an eval type from its hints.
    route = F.udf(lambda value: classify(value), StructType([StructField("topic", StringType()), StructField("reason", StringType())]))
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics.source_topic(SOURCE))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .withColumn("route", route("value"))
    )
    reason_header = F.array(F.struct(F.lit("onyx-reason").alias("key"), F.encode("route.reason", "utf-8").alias("value")))
    out = rows.select(
        F.col("route.topic").alias("topic"),
        "key",
        "value",
        F.when(F.col("route.reason") != "", F.concat(F.coalesce("headers", F.array()), reason_header))
        .otherwise(F.col("headers"))
        .alias("headers"),
    )
    return (
        out.writeStream.format("kafka")
        .queryName("onyx-demo")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def publish(bootstrap: str, messages: list[Published]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 1024 * 1024)
    for m in messages:
        producer.send(topics.source_topic(SOURCE), key=m.key.encode(), value=m.payload, headers=[("onyx-flow", b"xml")])
    producer.flush()
    producer.close()


def collect(bootstrap: str, expected: int, timeout: float) -> list:
    """Read the delivery and dead-letter topics until ``expected`` records arrived."""
    from kafka import KafkaConsumer

    names = [topics.delivery_topic(k) for k in KINDS] + [topics.DEAD_LETTER]
    consumer = KafkaConsumer(*names, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=1000)
    records, deadline = [], time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer)
    finally:
        consumer.close()
    return records


def run(generated: int = 20, corpus: Path | None = None, timeout: float = 180.0, out=None) -> int:
    """Run the demo end to end on its own Kafka broker and SparkSession; 0 when every
    published message came out exactly once."""
    from broker.spark_session import build_session

    say = _printer(out)
    say("Onyx demo: XML through Kafka and a Spark Structured Streaming query")
    with KafkaDevCluster(name="demo") as kafka:
        say(f"  kafka     {kafka.bootstrap_servers}  (KRaft, single node; log {kafka.log_file})")
        say("  spark     starting a local SparkSession with the Kafka connector ...")
        spark = build_session("onyx-demo")
        try:
            return run_with(spark, kafka.bootstrap_servers, generated, corpus, timeout, out)
        finally:
            spark.stop()


def run_with(spark, bootstrap: str, generated: int = 20, corpus: Path | None = None,
             timeout: float = 180.0, out=None) -> int:
    """The demo on an existing Kafka broker and SparkSession (used by ``run`` and the tests)."""
    say = _printer(out)
    corpus = config.CORPUS_DIR if corpus is None else corpus
    messages = generated_messages(generated) + corpus_messages(corpus)
    messages.append(Published("bad-1", "malformed", b"<nitf><head><title>unclosed</head></nitf>"))
    names = [topics.source_topic(SOURCE), topics.DEAD_LETTER] + [topics.delivery_topic(k) for k in KINDS]
    topics.ensure_topics(bootstrap, names)
    checkpoint = config.RUN_DIR / "checkpoints" / f"demo-{time.time_ns()}"
    query = start_router(spark, bootstrap, checkpoint)
    try:
        origins = Counter(m.origin for m in messages)
        publish(bootstrap, messages)
        say(f"  published {len(messages)} messages to {topics.source_topic(SOURCE)}: "
            + ", ".join(f"{n} {o}" for o, n in sorted(origins.items()))
            + ("" if corpus.is_dir() else f"  (no corpus at {corpus})"))
        records = collect(bootstrap, len(messages), timeout)
    finally:
        query.stop()
    return report(messages, records, say)


def _printer(out):
    return lambda s="": print(s, file=out or sys.stdout, flush=True)


def report(messages: list[Published], records: list, say) -> int:
    """Print what came out per topic; 0 if every published key was received exactly once."""
    per_topic = Counter(r.topic for r in records)
    say(f"  received  {len(records)} messages:")
    say(f"    {'topic':<24} {'messages':>8}")
    for topic, n in sorted(per_topic.items()):
        say(f"    {topic:<24} {n:>8}")
    for r in records:
        if r.topic == topics.DEAD_LETTER:
            reason = dict(r.headers).get("onyx-reason", b"").decode()
            say(f"  dead letter {r.key.decode()}: {reason}")
    sample = [r for r in records if r.topic != topics.DEAD_LETTER][:3]
    for r in sample:
        say(f"  e.g. {r.topic} <- {r.key.decode()}: {r.value[:70].decode(errors='replace')}...")
    sent = Counter(m.key for m in messages)
    got = Counter(r.key.decode() for r in records)
    missing = sorted(set(sent) - set(got))
    dupes = sorted(k for k, n in got.items() if n > 1)
    if missing or dupes:
        say(f"  FAILED: {len(missing)} missing {missing[:5]}, {len(dupes)} duplicated {dupes[:5]}")
        return 1
    say(f"  ok: all {len(messages)} published messages came out once")
    return 0
