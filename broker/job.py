"""The broker job: one Spark Structured Streaming query serving one or more brokers.

Every broker of a Spark application is served by the same query, so the fixed cost of
a micro-batch (offsets, planning, a job, a task launch) is paid once per application,
not once per broker; a deployment can still run one broker per application. A
message between two brokers is always a Kafka record on the receiver's inbound topic.

Per micro-batch, one Spark job and nothing else (no persist, no shuffle, no driver code):

    Kafka source (the brokers' inbound topics ``onyx.broker.<id>``, plus the source
    topics ``onyx.src.*`` when one of them is a root or the guard)
      -> coalesce into :data:`~broker.config.BROKER_TASKS` tasks
      -> mapInArrow: each record through its broker's plan on the executor
         (:mod:`broker.dataplane.executor`): control packets applied in place and appended to the
         broker's state log, messages received, routed (link rows written at once),
         matched against local profiles; every output row written straight to Kafka
         (:mod:`broker.dataplane.sink`) and flushed by the task
      -> Spark's Kafka sink (which gets no rows) with async progress tracking: offsets
         are checkpointed beside the batches, not between them.

The driver only watches: it follows the brokers' state logs (:mod:`broker.control.state_log`)
for ``onyx status`` and reads the tasks' counts from an accumulator. Nothing of a
broker's state lives in the checkpoint: a restarted job rebuilds it from Kafka.

Run one or more brokers on their own (this is what a Kubernetes ``SparkApplication`` runs)::

    python -m broker.job --broker b1 --overlay overlay.yaml --bootstrap-servers kafka:9092
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker import config, topics
from broker.control.state import BrokerState
from broker.control.state_log import Follower, LogReader, Packet
from broker.dataplane.executor import INPUT_COLUMNS, OUTPUT_SCHEMA, StatsParam, TaskSpec, task_function
from broker.dataplane.plan import Limits, PlanSettings
from broker.dataplane.sink import producer_conf
from broker.kafka_auth import Credentials, client_options, librdkafka_options, spark_options
from routing.budget import Budget
from routing.overlay import Overlay



def routing_stats(state: BrokerState) -> dict[str, dict]:
    """Per tree a broker is in (by root): the size of its routing table (``links``,
    ``conjunctions``, ``atoms``, ``nfa_states``, ``guards``: what its children's
    summaries add up to) and ``summary``, the size of what its parent holds for it
    (with ``exact_*``, the exact queries below it, and ``budget``, its share).

    >>> from routing.overlay import builtin
    >>> s = BrokerState("b4", builtin("figure4"), Budget(atoms=10))
    >>> routing_stats(s)["b1"]["summary"]["budget"]
    'atoms=10'
    """
    out = {}
    for root in sorted(set(state.tables) | set(state.overlay.roots)):
        table = state.tables.get(root)
        entry = table.stats() if table is not None else {"links": 0, "conjunctions": 0, "atoms": 0,
                                                         "nfa_states": 0, "guards": 0}
        summary = state.node.summary(root)
        if summary is not None:
            share = state.node.share(root)
            entry["summary"] = {**summary.stats(), "budget": None if share is None else str(share)}
        out[root] = entry
    return out

@dataclass
class BrokerSettings:
    """How to run the brokers ``brokers`` of ``overlay`` in one query (defaults in
    :mod:`broker.config`)."""

    brokers: list[str]
    overlay: Overlay
    bootstrap_servers: str
    checkpoint_dir: Path
    link_format: str = "stream"
    trigger: str = config.BROKER_TRIGGER
    limits: Limits = field(default_factory=Limits)
    max_offsets_per_trigger: int = config.BROKER_MAX_OFFSETS
    mode: str = "route"  # "flood" / "floor": the benchmark's baselines (see broker.dataplane.plan)
    tasks: int = config.BROKER_TASKS
    fetch_wait_ms: int = config.BROKER_FETCH_WAIT_MS
    linger_ms: float = config.BROKER_LINGER_MS
    compression: str = config.BROKER_COMPRESSION
    budget: Budget | None = field(
        default_factory=lambda: Budget.parse(config.BROKER_TABLE_BUDGET) if config.BROKER_TABLE_BUDGET else None)
    projection: bool = config.BROKER_PROJECTION
    bandwidth: float = config.LINK_BANDWIDTH  # bits/s of a link, for incremental transformation's cost model
    # The Kafka user of these brokers (None: the process's, ONYX_KAFKA_USERNAME's). Every client of
    # the job is one for all of its brokers (the Kafka source, the executors' producer, the
    # state-log reader), so it is one user: a broker's own when the job runs one broker (as the
    # Helm chart and `onyx up --distributed` run them), else one allowed what any of them may do.
    credentials: Credentials | None = None

    def plan_settings(self, broker: str) -> PlanSettings:
        """The guard (the overlay's first broker) dead-letters messages of unknown sources;
        a broker's routing-table budget is its own in the overlay config, else ``budget``."""
        return PlanSettings(self.link_format, broker == self.overlay.brokers[0], self.limits, self.mode,
                            self.overlay.budget(broker) or self.budget, self.projection,
                            bandwidth=self.bandwidth)


COUNTERS = ("messages", "forwarded", "delivered", "dead_letters", "control_packets", "control_sent",
            "link_bytes", "projected", "projected_bytes", "delivered_bytes", "bytes_written")
"""What each broker counts (summed over the tasks' reports)."""


class BrokerJob:
    """The streaming query of some brokers, and the driver's view of them."""

    def __init__(self, spark, settings: BrokerSettings) -> None:
        self.spark = spark
        self.settings = settings
        self.key = uuid.uuid4().hex  # names this job's broker copies in the Python workers
        self.states = {b: BrokerState(b, copy.deepcopy(settings.overlay), settings.plan_settings(b).budget)
                       for b in settings.brokers}
        self.follower: Follower | None = None
        self.stats = spark.sparkContext.accumulator({}, StatsParam())
        self.query = None
        self._subscribed_sources = False

    def _auth(self, options) -> dict:
        """``options`` (a :mod:`broker.kafka_auth` function) of the job's Kafka user."""
        creds = self.settings.credentials
        return options(*creds) if creds is not None else options()

    def _consumer_conf(self) -> dict:
        return {"bootstrap.servers": self.settings.bootstrap_servers, **self._auth(librdkafka_options)}

    @property
    def wants_sources(self) -> bool:
        """Root brokers and the catalog guard read the source topics."""
        roots = {r for state in self.states.values() for r in state.overlay.sources.values()}
        return self.settings.overlay.brokers[0] in self.states or bool(roots & set(self.states))

    def _pattern(self) -> str:
        own = "|".join(re.escape(b) for b in self.settings.brokers)
        return f"^{re.escape(topics.BROKER_PREFIX)}({own})$" + (
            f"|^{re.escape(topics.SOURCE_PREFIX)}.+" if self.wants_sources else "")

    def start(self):
        """Start (or restart) the streaming query from its checkpoint."""
        s = self.settings
        # One partition: the log is the order the packets were applied in.
        topics.ensure_topics(s.bootstrap_servers, [topics.state_topic(b) for b in s.brokers],
                             config={"retention.ms": "-1"}, auth=self._auth(client_options))
        if self.follower is None:
            self.follower = Follower(LogReader(self._consumer_conf()), s.brokers, self._follow).start()
        self._subscribed_sources = self.wants_sources
        spec = TaskSpec(self.key, s.overlay, tuple(s.brokers), {b: s.plan_settings(b) for b in s.brokers},
                        {**producer_conf(s.bootstrap_servers, s.linger_ms, s.compression),
                         **self._auth(librdkafka_options)}, self._consumer_conf(),
                        self.stats)
        rows = (self.spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", s.bootstrap_servers)
                .options(**self._auth(spark_options))
                .option("subscribePattern", self._pattern())
                .option("kafka.metadata.max.age.ms", "2000")  # notice new source topics quickly
                .option("kafka.fetch.max.wait.ms", str(s.fetch_wait_ms))
                .option("startingOffsets", "earliest")
                .option("failOnDataLoss", "false")
                .option("includeHeaders", "true")
                .option("maxOffsetsPerTrigger", s.max_offsets_per_trigger)
                .load()
                .select(*INPUT_COLUMNS))
        out = rows.coalesce(max(1, s.tasks)).mapInArrow(task_function(spec), OUTPUT_SCHEMA)
        self.query = (out.writeStream.queryName(f"onyx-brokers-{'-'.join(s.brokers)}"[:200])
                      .format("kafka")
                      .option("kafka.bootstrap.servers", s.bootstrap_servers)
                      .options(**self._auth(spark_options))
                      .option("checkpointLocation", str(s.checkpoint_dir / "query"))
                      .option("asyncProgressTrackingEnabled", "true")
                      .option("asyncProgressTrackingCheckpointIntervalMs", "1000")
                      .trigger(processingTime=s.trigger)
                      .start())
        return self.query

    def _follow(self, broker: str, packet: Packet) -> None:
        self.states[broker].replay(packet.flow, packet.key, packet.value, packet.headers, packet.topic,
                                   packet.coordinates)

    def offsets(self) -> dict[str, dict[str, int]]:
        """Per broker, the topics it reads (its inbound topic, the sources it is the root
        of) and how far into each the query has read (summed over partitions)."""
        query = self.query
        read = _end_offsets(query.lastProgress if query is not None else None)
        with self.follower.lock:
            return {b: {t: read.get(t, 0) for t in
                        [topics.broker_topic(b)] + [topics.source_topic(s) for s, r in state.overlay.sources.items()
                                                    if r == b]}
                    for b, state in self.states.items()}

    def status(self) -> list[dict]:
        """Per broker: counters, profiles and routing-table sizes (for ``onyx status``)."""
        query = self.query
        progress = query.lastProgress if query is not None else None
        offsets = _end_offsets(progress)
        running = query is not None and query.isActive
        stats = self.stats.value
        out = []
        with self.follower.lock:
            for b, state in self.states.items():
                mine = {topics.broker_topic(b)} | {topics.source_topic(s) for s, r in state.overlay.sources.items()
                                                   if r == b}
                mine_stats = stats.get(b, {})
                counts = mine_stats.get("counts", {})
                budget = state.budget
                out.append({
                    "broker": b, "running": running,
                    **{name: counts.get(name, 0) for name in COUNTERS},
                    "seconds": dict(stats.get(b, {}).get("seconds", {})),
                    "profiles": len(state.profiles), "state_version": state.version, "state_seq": state.seq,
                    # The state log holds every table and summary (plans are logged packets).
                    "routing": routing_stats(state),
                    "budget": None if budget is None else str(budget),
                    "false_positives": dict(mine_stats.get("false_positives", {})),
                    "last_batch_ms": (progress or {}).get("durationMs", {}).get("triggerExecution"),
                    "offsets": {t: n for t, n in offsets.items() if t in mine},
                    "state_log_error": None if self.follower.error is None else str(self.follower.error),
                })
        return out

    def poll(self) -> None:
        """Restart the query if one of its brokers became a root and must read source
        topics; raise the query's exception if it died."""
        if self.query is not None and self.query.exception() is not None:
            raise RuntimeError(f"brokers {', '.join(self.settings.brokers)} stopped: {self.query.exception()}")
        if self.query is not None and self.wants_sources and not self._subscribed_sources:
            self.stop()
            self.start()

    def revive(self) -> str | None:
        """Start the query again from its checkpoint if it died (Kafka away for longer
        than its clients wait, say): what a long-running overlay does where :meth:`poll`
        raises. Returns why it had stopped, or None."""
        if self.query is None or self.query.exception() is None:
            return None
        why = str(self.query.exception()).strip().splitlines()[0][:300]
        self.query = None
        self.start()
        return why

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None

    def close(self) -> None:
        """Stop the query and the driver's view of the state logs."""
        self.stop()
        if self.follower is not None:
            self.follower.stop()
            self.follower = None


def _end_offsets(progress: dict | None) -> dict[str, int]:
    """Per topic, the sum over partitions of the offsets the last batch read up to."""
    out: dict[str, int] = {}
    for source in (progress or {}).get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            # PySpark gives str() of the parsed JSON object: a Python literal, not JSON.
            end = ast.literal_eval(end)
        for topic, parts in (end or {}).items():
            out[topic] = sum(int(v) for v in parts.values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker.job",
        description="Run Onyx brokers as one Spark Structured Streaming query (one Spark application).")
    parser.add_argument("--broker", action="append", required=True,
                        help="a broker id of the overlay to run here (repeat for several)")
    parser.add_argument("--overlay", type=Path, required=True, help="overlay config (YAML/JSON)")
    parser.add_argument("--bootstrap-servers", default=os.environ.get("ONYX_KAFKA_BOOTSTRAP"),
                        help="Kafka bootstrap servers (default $ONYX_KAFKA_BOOTSTRAP)")
    parser.add_argument("--checkpoint", type=Path,
                        default=Path(os.environ["ONYX_CHECKPOINT_DIR"]) if os.environ.get("ONYX_CHECKPOINT_DIR") else None,
                        help="checkpoint folder (default $ONYX_CHECKPOINT_DIR, else .run/checkpoints/brokers-<ids>)")
    parser.add_argument("--link-format", default="stream", help="wire format towards child brokers (default stream)")
    parser.add_argument("--trigger", default=config.BROKER_TRIGGER,
                        help=f"micro-batch interval (default {config.BROKER_TRIGGER!r})")
    parser.add_argument("--status-file", type=Path,
                        help="write the brokers' status and read offsets here as JSON every "
                             f"{config.DIST_STATUS_EVERY_S:g} s (how `onyx up --distributed` watches its applications)")
    parser.add_argument("--die-with-parent", action="store_true",
                        help="end when the parent process ends, SIGKILL included (the spark-submit JVM of a "
                             "local standalone cluster), so no driver outlives its application")
    args = parser.parse_args(argv)
    from broker.spark.session import build_session

    if args.die_with_parent:
        from broker.jvm import die_with_parent

        die_with_parent()

    if not args.bootstrap_servers:
        parser.error("--bootstrap-servers (or $ONYX_KAFKA_BOOTSTRAP) is required")
    overlay = Overlay.load(args.overlay)
    unknown = [b for b in args.broker if b not in overlay.graph]
    if unknown:
        print(f"error: broker(s) {', '.join(unknown)} not in {args.overlay}", file=sys.stderr)
        return 2
    checkpoint = args.checkpoint or config.RUN_DIR / "checkpoints" / f"brokers-{'-'.join(args.broker)}"
    spark = build_session(f"onyx-brokers-{'-'.join(args.broker)}")
    job = BrokerJob(spark, BrokerSettings(args.broker, overlay, args.bootstrap_servers, checkpoint,
                                          args.link_format, args.trigger))
    job.start()
    try:
        while not job.query.awaitTermination(config.DIST_STATUS_EVERY_S if args.status_file else 5):
            job.poll()
            if args.status_file:
                write_status(job, args.status_file)
    finally:
        job.close()
    return 0


def write_status(job: BrokerJob, path: Path) -> None:
    """The job's :meth:`~BrokerJob.status` and :meth:`~BrokerJob.offsets` as JSON in ``path``
    (written to a temporary name and renamed: a reader never sees half a file)."""
    import json
    import time

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"time": time.time(), "pid": os.getpid(), "status": job.status(),
                               "offsets": job.offsets()}, default=str))
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
