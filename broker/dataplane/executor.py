"""What a broker job runs on executors: each micro-batch's records through their broker's plan.

``mapInArrow`` runs :func:`task_function` on every task of every micro-batch; a task gets
the records of some of the inbound topics of the job's brokers, in offset order per
topic partition, and:

1. brings its worker's copy of each broker it meets up to date from the broker's state
   log (:mod:`broker.control.state_log`; a copy is kept in the Python worker between tasks, made
   from the log when the worker first needs it or when a task using it failed);
2. goes through the records in order. A control packet is applied to the copy at once
   (so it takes effect before the messages after it) and queued for the state log.
   Messages go through :meth:`~broker.dataplane.plan.Plan.receive` and
   :meth:`~broker.dataplane.plan.Plan.route`, their link rows written at once; their deliveries
   are matched after the run of messages is routed, before the next control packet.
   This order is the broker's priority-ordered plan (ONYX 4.3.1's priorities without
   its shared operator network, see ``docs/departures.md``): routing and the routed
   links' projections first, local profiles last, so forwarding never waits for them;
3. flushes what it wrote (:mod:`broker.dataplane.sink`), then appends the packets it applied to
   the state logs and flushes again (a packet is in the log only once its own output is
   in Kafka), and adds its counts and stage times to the job's accumulator.

It returns no rows: the query's Kafka sink writes nothing, and is there so that Spark
tracks progress asynchronously (async progress tracking needs a Kafka sink).

A record of a source topic goes to the broker that is the source's root (if it is in
this job), or to the guard broker while the source is unknown.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.accumulators import AccumulatorParam

from broker import topics
from broker.control.state import BrokerState
from broker.control.state_log import LogReader, Packet, log_record
from broker.dataplane.plan import Inbound, Plan, PlanSettings
from broker.dataplane.sink import KafkaSink, close_sink, sink_for
from routing.overlay import Overlay

OUTPUT_SCHEMA = "topic string, value binary"
"""What the task returns to Spark's Kafka sink: nothing (see module docstring)."""

INPUT_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers")
"""What the task reads of each record. Its flow (the ``onyx-flow`` header, ``xml`` if none)
is read here, not by Spark: a filter over the headers array is a higher-order function,
which Spark evaluates row by row without generated code."""

STAGES = ("sync", "control", "receive", "route", "deliver", "write", "flush", "settle")
"""Where a task's time goes, per broker (``flush``: the task's wait for Kafka, ``settle``:
building what routing builds on demand and freezing a grown state, both shared out)."""


class StatsParam(AccumulatorParam):
    """Accumulates ``{broker: {part: {name: value}}}`` from every task: ``counts``,
    ``seconds`` and ``false_positives`` (per link into the broker) are summed."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, total: dict, more: dict) -> dict:
        for broker, parts in more.items():
            mine = total.setdefault(broker, {})
            for part, values in parts.items():
                counter = mine.setdefault(part, {})
                for name, v in values.items():
                    counter[name] = counter.get(name, 0) + v
        return total



@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs (shipped once, with the query)."""

    job: str                           # unique per run of a job: names its copies in workers
    overlay: Overlay
    brokers: tuple[str, ...]
    settings: dict[str, PlanSettings]  # broker -> how its plan runs
    producer: dict[str, Any]           # librdkafka settings of the sink
    consumer: dict[str, Any]           # librdkafka settings of the state-log reader
    stats: Any                         # the job's accumulator (StatsParam)


class Copy:
    """A worker's copy of one broker: its plan (over its state), the state-log offset it
    has read up to, and whether a task that used it is still running (or failed)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.position = 0
        self.in_use = False


class Copies:
    """The copies of one job's brokers in this worker process."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.copies: dict[str, Copy] = {}
        self.reader: LogReader | None = None
        self.grown = False  # copies built or changed since the last settle()

    def ask_log_ends(self) -> Future:
        """Where every broker's state log ends now: one request, once per task, sent as
        the task starts so that it overlaps the task's wait for its first records."""
        if self.reader is None:
            self.reader = LogReader(self.spec.consumer)
        return _ASKER.submit(self.reader.ends, list(self.spec.brokers))

    def get(self, broker: str, end: int) -> Copy:
        """The copy of ``broker``, caught up with its state log up to ``end``."""
        copy = self.copies.get(broker)
        if copy is None or copy.in_use:  # new here, or a task failed half-way through it
            state = BrokerState(broker, _overlay_copy(self.spec.overlay), self.spec.settings[broker].budget)
            copy = self.copies[broker] = Copy(Plan(state, self.spec.settings[broker]))
            self.grown = True
        if copy.position < end:
            plan = copy.plan
            for p in self.reader.read(broker, copy.position, end):
                plan.replay(p.flow, p.key, p.value, p.headers, p.topic, p.coordinates)
            copy.position = end
            self.grown = True
        copy.in_use = True
        return copy

    def close(self) -> None:
        """Let go of the copies and the state-log reader."""
        self.copies.clear()
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def settle(self) -> None:
        """After a task that made the copies grow: hand their objects to the collector's
        permanent generation. PySpark's worker runs a full ``gc.collect()`` after every
        task; over the millions of objects of 100k profiles' engines and tables that
        pass takes about a second, every task, unless they are frozen (``gc.freeze``,
        which is cheap: it moves lists). Only then, so that little garbage is frozen; and
        what a routing table builds on demand (its atom engine, lazy atoms) is built first,
        or it would stay out of the permanent generation until the next change. A
        summary that adopted a plan grew with the packet that carried it."""
        if self.grown:
            for copy in self.copies.values():
                copy.plan.node.warm()  # what routing builds on demand, built and frozen now
            gc.collect()
            gc.freeze()
            self.grown = False


def _overlay_copy(overlay: Overlay) -> Overlay:
    import copy

    return copy.deepcopy(overlay)  # a broker's state changes its overlay's sources


_ASKER = ThreadPoolExecutor(1, thread_name_prefix="onyx-state-log")
"""Asks Kafka where the state logs end while the task waits for its records."""

_JOBS: dict[str, Copies] = {}
"""Copies per job in this worker process; the newest few jobs are kept."""

_KEEP_JOBS = 2


def copies_of(spec: TaskSpec) -> Copies:
    """The copies of ``spec``'s job in this worker. A worker outlives the jobs of its Spark
    application (a restarted query, a benchmark's next overlay): the copies of jobs not
    seen for a while are dropped, with their Kafka clients."""
    copies = _JOBS.pop(spec.job, None) or Copies(spec)
    _JOBS[spec.job] = copies  # most recently used last
    while len(_JOBS) > _KEEP_JOBS:
        old = _JOBS.pop(next(iter(_JOBS)))
        old.close()
        if all(c.spec.producer != old.spec.producer for c in _JOBS.values()):
            close_sink(old.spec.producer)
    return copies


class _Task:
    """One task's pass over its records (see module docstring)."""

    def __init__(self, spec: TaskSpec, copies: Copies | None = None) -> None:
        self.spec = spec
        self.copies = copies or copies_of(spec)
        self.sink: KafkaSink = sink_for(spec.producer)
        self.used: dict[str, Copy] = {}
        self.counts: dict[str, Counter] = {}
        self.times: dict[str, Counter] = {}
        self.applied: list[tuple[str, Packet]] = []
        self.waiting: list[tuple[str, Plan, Inbound, bool]] = []  # routed (forwarded?), not yet matched locally
        self.false_positives: dict[str, Counter] = {}
        self.owner: dict[str, str | None] = {}
        self.log_ends = self.copies.ask_log_ends()

    def plan(self, broker: str) -> Plan:
        copy = self.used.get(broker)
        if copy is None:
            t = time.perf_counter()
            copy = self.used[broker] = self.copies.get(broker, self.log_ends.result()[broker])
            self.counts.setdefault(broker, Counter())
            self.times.setdefault(broker, Counter())["sync"] += time.perf_counter() - t
        return copy.plan

    def write(self, broker: str, rows: list, control: bool = False) -> None:
        """Send a broker's output rows; ``control``: rows a control packet caused (routing
        deltas, catalog packets), counted apart from forwarded messages."""
        if not rows:
            return
        t = time.perf_counter()
        counts = self.counts[broker]
        for topic, _, value, headers in rows:
            size = len(value or b"")
            if (control or headers and headers[0] == ("onyx-flow", b"query")) and topic != topics.DEAD_LETTER:
                counts["control_sent"] += 1  # routing deltas, catalog packets, a plan for the broker itself
            elif topic.startswith(topics.BROKER_PREFIX):
                counts["forwarded"] += 1
                counts["link_bytes"] += size
                if headers and any(k == "onyx-transform" for k, _ in headers[-2:]):  # a projection (last fields)
                    counts["projected"] += 1
                    counts["projected_bytes"] += size
            elif topic == topics.DEAD_LETTER:
                counts["dead_letters"] += 1
            else:
                counts["delivered"] += 1
                counts["delivered_bytes"] += size
            counts["bytes_written"] += size
        self.sink.send(rows)
        self.times[broker]["write"] += time.perf_counter() - t

    def source_owner(self, source: str) -> str | None:
        """The broker of this job that handles records of ``source``: its root, or the
        guard while no broker here knows the source."""
        if source not in self.owner:
            owner, known = None, False
            for broker in self.spec.brokers:
                owned = self.plan(broker).owns_source(source)
                known = known or owned is not None
                if owned:
                    owner = broker
                    break
            if owner is None and not known:
                owner = next((b for b in self.spec.brokers if self.spec.settings[b].guard), None)
            self.owner[source] = owner
        return self.owner[source]

    def deliver_waiting(self) -> None:
        """Match the routed messages against local profiles (after their link rows went out)."""
        for broker, plan, inbound, forwarded in self.waiting:
            t = time.perf_counter()
            rows = plan.deliver(inbound)
            self.times[broker]["deliver"] += time.perf_counter() - t
            if not forwarded and not rows and inbound.record[0].startswith(topics.BROKER_PREFIX):
                # Sent here by the parent's table and of no use below: its false positive.
                link = f"{plan.node.parent(inbound.header.root_broker)}>{broker}"
                self.false_positives.setdefault(broker, Counter())[link] += 1
            self.write(broker, rows)
        self.waiting = []

    def control(self, broker: str, packet: Packet) -> None:
        plan = self.plan(broker)
        self.counts[broker]["control_packets"] += 1
        if plan.state.is_applied(packet.coordinates):
            return  # a replayed batch: the packet is in the state (and its log) already
        self.deliver_waiting()  # the messages before the packet see the state before it
        t = time.perf_counter()
        rows = plan.control(packet.flow, packet.key, packet.value, packet.headers, packet.topic,
                            packet.coordinates, defer=True)
        self.times[broker]["control"] += time.perf_counter() - t
        self.write(broker, rows, control=True)
        self.applied.append((broker, packet))
        self.copies.grown = True
        self.owner.clear()  # a catalog packet may have made a broker a source's root

    def message(self, broker: str, topic: str, key, value, headers, partition: int, offset: int) -> None:
        plan = self.plan(broker)
        times = self.times[broker]
        t0 = time.perf_counter()
        inbound, rows = plan.receive(topic, key, value, headers, partition, offset)
        t1 = time.perf_counter()
        times["receive"] += t1 - t0
        if inbound is not None:
            self.counts[broker]["messages"] += 1
            rows = plan.route(inbound)
            times["route"] += time.perf_counter() - t1
            forwarded = any(topic.startswith(topics.BROKER_PREFIX) and topic != topics.broker_topic(broker)
                            for topic, *_ in rows)
            self.waiting.append((broker, plan, inbound, forwarded))
        self.write(broker, rows)

    def records(self, batch) -> None:
        local = self.spec.brokers
        cols = {name: batch.column(name).to_pylist() for name in INPUT_COLUMNS}
        partitions, offsets = cols["partition"], cols["offset"]
        keys, values, all_headers = cols["key"], cols["value"], cols["headers"]
        for i, topic in enumerate(cols["topic"]):
            headers = [(h["key"], h["value"]) for h in all_headers[i] or ()]
            if topic.startswith(topics.BROKER_PREFIX):
                broker = topic[len(topics.BROKER_PREFIX):]
                if broker not in local:
                    continue  # not this job's (its pattern never selects it)
                flow = next((v for k, v in headers if k == "onyx-flow"), b"xml")
                if flow != b"xml":
                    self.control(broker, Packet(topic, partitions[i], offsets[i],
                                                (flow or b"").decode("utf-8", "replace"), keys[i], values[i], headers))
                    continue
            else:
                broker = self.source_owner(topic[len(topics.SOURCE_PREFIX):])
                if broker is None:
                    continue  # another application's root broker handles this source
            self.message(broker, topic, keys[i], values[i], headers, partitions[i], offsets[i])

    def send_routes(self) -> None:
        """The routing deltas the task's control packets caused, one packet per parent
        and tree (see :meth:`BrokerState.routes`)."""
        for broker, copy in self.used.items():
            if copy.plan.state.outbox:
                t = time.perf_counter()
                rows = copy.plan.state.routes()
                self.times[broker]["control"] += time.perf_counter() - t
                self.write(broker, rows, control=True)

    def finish(self) -> None:
        self.deliver_waiting()
        for broker, copy in self.used.items():
            self.write(broker, copy.plan.planned(), control=True)
        self.send_routes()
        t = time.perf_counter()
        self.sink.flush()
        if self.applied:
            self.sink.send([log_record(broker, packet) for broker, packet in self.applied])
            self.sink.flush()
        flush = time.perf_counter() - t
        for copy in self.used.values():
            copy.in_use = False
        t = time.perf_counter()
        self.copies.settle()
        settle = time.perf_counter() - t
        stats = {}
        for broker, counts in self.counts.items():
            self.times[broker]["flush"] += flush / len(self.counts)
            if settle > 1e-3:
                self.times[broker]["settle"] += settle / len(self.counts)
            stats[broker] = {"counts": dict(counts), "seconds": dict(self.times[broker])}
            if self.false_positives.get(broker):
                stats[broker]["false_positives"] = dict(self.false_positives[broker])
        if stats:
            self.spec.stats.add(stats)

    def run(self, batches) -> Iterator:
        import pyarrow as pa

        # No collector passes during the task: what control packets build lives as long
        # as the broker's state, and passes over a growing state while 100k profiles
        # arrive cost more than applying them. The task ends with a full pass (settle,
        # or PySpark's own after every task).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for batch in batches:
                if batch.num_rows:
                    self.records(batch)
            self.finish()
        finally:
            if collecting:
                gc.enable()
        yield pa.RecordBatch.from_pydict({"topic": [], "value": []},
                                         schema=pa.schema([("topic", pa.string()), ("value", pa.binary())]))


def task_function(spec: TaskSpec):
    """The function ``mapInArrow`` runs on every task of the query (closes over the spec only)."""

    def process(batches):
        yield from _Task(spec).run(batches)

    return process
