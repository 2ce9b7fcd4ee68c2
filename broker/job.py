"""The broker job: one Spark Structured Streaming query per broker.

Kafka source (the broker's inbound topic ``onyx.broker.<id>``, plus the source
topics ``onyx.src.*`` if it is a root broker or the overlay's catalog guard) ->
packet listener (the ``onyx-flow`` header splits query / catalog / control packets
from XML) -> control packets applied to the :class:`~broker.state.BrokerState` on the
driver, in offset order, *before* the XML of the same micro-batch -> the compiled
plan (:mod:`broker.plan`) run over the XML rows with ``mapInArrow``, shipped to
executors as a broadcast by version and cached there -> Kafka sink with a ``topic``
column: child links, delivery topics, the parent (routing deltas), dead letters.

State survives restarts: after every batch that changed it, a snapshot is written
next to the query's checkpoint (``<checkpoint>/state.pickle``), and control packets
are versioned, so replaying a batch cannot corrupt it.

Run one broker on its own (this is what a Kubernetes ``SparkApplication`` runs)::

    python -m broker.job --broker b1 --overlay overlay.yaml --bootstrap-servers kafka:9092
"""

from __future__ import annotations

import argparse
import ast
import os
import pickle
import re
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from broker import config, topics
from broker.kafka_auth import spark_options
from broker.plan import Limits, PlanSpec, cached_plan
from broker.state import BrokerState
from routing.overlay import Overlay

OUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key:string,value:binary>>"


@dataclass
class BrokerSettings:
    """How to run one broker (defaults in :mod:`broker.config`)."""

    broker: str
    overlay: Overlay
    bootstrap_servers: str
    checkpoint_dir: Path
    link_format: str = "stream"
    trigger: str = "250 milliseconds"
    limits: Limits = field(default_factory=Limits)
    max_offsets_per_trigger: int = 5000
    flood: bool = False  # every message down every link: the baseline for benchmarks


COUNTERS = ("messages", "forwarded", "delivered", "dead_letters")
"""What each broker counts (Spark accumulators, summed over executors)."""


def _arrow_fn(broker: str, spec_key: str, spec_bc, acc: dict):
    """The function ``mapInArrow`` runs on executors (closes over plain data and
    accumulators only). Per input batch it first yields the rows that forward messages
    down links (and dead letters), then the deliveries to local profiles, so the next
    brokers get their input before local matching is done."""

    def process(batches):
        import pyarrow as pa

        plan = None  # compiled on the first message: batches of control packets only need none
        header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
        schema = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                            ("headers", header_type)])

        def arrow(rows):
            for t, *_ in rows:
                acc["forwarded" if t.startswith(topics.BROKER_PREFIX) else
                    "dead_letters" if t == topics.DEAD_LETTER else "delivered"].add(1)
            return pa.RecordBatch.from_arrays(
                [pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.binary()),
                 pa.array([r[2] for r in rows], pa.binary()),
                 pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in rows], header_type)], schema=schema)

        for batch in batches:
            if not batch.num_rows:
                continue
            if plan is None:
                plan = cached_plan(broker, spec_key, lambda: pickle.loads(spec_bc.value))
            cols = batch.to_pydict()
            acc["messages"].add(batch.num_rows)
            inbound, early = [], []
            for i in range(batch.num_rows):
                headers = [(h["key"], h["value"]) for h in (cols["headers"][i] or ())]
                msg, rows = plan.receive(cols["topic"][i], cols["key"][i], cols["value"][i], headers,
                                         cols["partition"][i], cols["offset"][i])
                early += rows
                if msg is not None:
                    inbound.append(msg)
                    early += plan.route(msg)
            yield arrow(early)
            late = [row for msg in inbound for row in plan.deliver(msg)]
            yield arrow(late)

    return process


class BrokerJob:
    """One broker's streaming query and the driver-side state behind it."""

    def __init__(self, spark, settings: BrokerSettings) -> None:
        self.spark = spark
        self.settings = settings
        self.guard = settings.broker == settings.overlay.brokers[0]
        self.snapshot_path = settings.checkpoint_dir / "state.pickle"
        if self.snapshot_path.exists():
            self.state = BrokerState.restore(self.snapshot_path.read_bytes(), settings.overlay)
        else:
            self.state = BrokerState(settings.broker, settings.overlay)
        self.query = None
        self._subscribed_sources = False
        self._spec_bc = None
        self._spec_version = -1
        self._spec_key = ""
        self._lock = threading.Lock()
        self.acc = {name: spark.sparkContext.accumulator(0) for name in COUNTERS}
        self.batches = 0
        self.control_packets = 0

    @property
    def wants_sources(self) -> bool:
        """Root brokers and the catalog guard read the source topics."""
        return self.guard or self.settings.broker in self.state.overlay.sources.values()

    def _pattern(self) -> str:
        own = re.escape(topics.broker_topic(self.settings.broker))
        return f"^{own}$" + (f"|^{re.escape(topics.SOURCE_PREFIX)}.+" if self.wants_sources else "")

    def start(self):
        """Start (or restart) the streaming query from its checkpoint."""
        from pyspark.sql import functions as F

        s = self.settings
        self._subscribed_sources = self.wants_sources
        flow = F.coalesce(F.expr("cast(get(filter(headers, h -> h.key = 'onyx-flow'), 0).value as string)"), F.lit("xml"))
        rows = (self.spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", s.bootstrap_servers)
                .options(**spark_options())
                .option("subscribePattern", self._pattern())
                .option("kafka.metadata.max.age.ms", "2000")  # notice new source topics quickly
                .option("startingOffsets", "earliest")
                .option("failOnDataLoss", "false")
                .option("includeHeaders", "true")
                .option("maxOffsetsPerTrigger", s.max_offsets_per_trigger)
                .load()
                .withColumn("flow", flow))
        self.query = (rows.writeStream.queryName(f"onyx-broker-{s.broker}")
                      .foreachBatch(self._batch)
                      .option("checkpointLocation", str(s.checkpoint_dir / "query"))
                      .trigger(processingTime=s.trigger)
                      .start())
        return self.query

    def _batch(self, df, batch_id: int) -> None:
        df.persist()  # read from Kafka once, used by the control collect and the data plane
        try:
            self._apply_batch(df)
        finally:
            df.unpersist()

    def _apply_batch(self, df) -> None:
        from pyspark.sql import functions as F

        control = (df.filter(F.col("flow") != "xml").filter(~F.col("topic").startswith(topics.SOURCE_PREFIX))
                   .select("topic", "key", "value", "headers", "flow", "partition", "offset")
                   .orderBy("partition", "offset").collect())
        out_rows = []
        with self._lock:  # status() reads the state from another thread
            before = self.state.version
            for r in control:
                headers = [(h["key"], bytes(h["value"])) for h in (r["headers"] or [])]
                out_rows += self.state.apply(r["flow"], r["key"], r["value"], headers, r["topic"])
            self._ship_plan()
            version = self.state.version
        xml = df.filter((F.col("flow") == "xml") | F.col("topic").startswith(topics.SOURCE_PREFIX))
        result = xml.select("topic", "key", "value", "headers", "partition", "offset").mapInArrow(
            _arrow_fn(self.settings.broker, self._spec_key, self._spec_bc, self.acc), OUT_SCHEMA)
        if out_rows:
            result = result.unionByName(self.spark.createDataFrame(
                [(t, k, v, [{"key": hk, "value": hv} for hk, hv in h]) for t, k, v, h in out_rows], OUT_SCHEMA))
        (result.write.format("kafka")
         .option("kafka.bootstrap.servers", self.settings.bootstrap_servers)
         .options(**spark_options())
         .save())
        # Only after the batch's rows are in Kafka: a crash before this line replays
        # the batch against the older snapshot, so its deltas are sent again.
        if version != before:
            with self._lock:
                self._save_snapshot()
        self.batches += 1
        self.control_packets += len(control)

    def _ship_plan(self) -> None:
        if self._spec_version == self.state.version and self._spec_bc is not None:
            return
        spec = PlanSpec.of(self.state, self.settings.link_format, self.guard, self.settings.limits,
                           self.settings.flood)
        old, self._spec_bc = self._spec_bc, self.spark.sparkContext.broadcast(pickle.dumps(spec))
        self._spec_version = self.state.version
        self._spec_key = uuid.uuid4().hex
        if old is not None:
            old.unpersist()

    def _save_snapshot(self) -> None:
        self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.snapshot_path.with_suffix(".tmp")
        tmp.write_bytes(self.state.snapshot())
        os.replace(tmp, self.snapshot_path)

    def status(self) -> dict:
        """Counters, profiles and routing-table sizes of this broker (for ``onyx status``)."""
        progress = self.query.lastProgress if self.query is not None else None
        with self._lock:
            profiles, version = len(self.state.profiles), self.state.version
            routing = {root: t.stats() for root, t in self.state.tables.items()}
        return {
            "broker": self.settings.broker,
            "running": self.query is not None and self.query.isActive,
            "batches": self.batches,
            "control_packets": self.control_packets,
            **{name: acc.value for name, acc in self.acc.items()},
            "profiles": profiles,
            "state_version": version,
            "routing": routing,
            "last_batch_ms": (progress or {}).get("durationMs", {}).get("triggerExecution"),
            "offsets": _end_offsets(progress),
        }

    def poll(self) -> None:
        """Restart the query if the broker became a root and must read source topics;
        raise the query's exception if it died."""
        if self.query is not None and self.query.exception() is not None:
            raise RuntimeError(f"broker {self.settings.broker} stopped: {self.query.exception()}")
        if self.query is not None and self.wants_sources and not self._subscribed_sources:
            self.stop()
            self.start()

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None


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
    parser = argparse.ArgumentParser(prog="python -m broker.job",
                                     description="Run one Onyx broker as a Spark Structured Streaming query.")
    parser.add_argument("--broker", required=True, help="this broker's id in the overlay")
    parser.add_argument("--overlay", type=Path, required=True, help="overlay config (YAML/JSON)")
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="checkpoint folder (default .run/checkpoints/broker-<id>)")
    parser.add_argument("--link-format", default="stream", help="wire format towards child brokers (default stream)")
    parser.add_argument("--trigger", default="250 milliseconds", help="micro-batch interval (default 250 milliseconds)")
    args = parser.parse_args(argv)
    from broker.spark_session import build_session

    overlay = Overlay.load(args.overlay)
    if args.broker not in overlay.graph:
        print(f"error: broker {args.broker!r} is not in {args.overlay}", file=sys.stderr)
        return 2
    checkpoint = args.checkpoint or config.RUN_DIR / "checkpoints" / f"broker-{args.broker}"
    spark = build_session(f"onyx-broker-{args.broker}")
    job = BrokerJob(spark, BrokerSettings(args.broker, overlay, args.bootstrap_servers, checkpoint,
                                          args.link_format, args.trigger))
    job.start()
    job.query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
