"""The executor side of the broker job without Spark or Kafka: tasks in two "workers"
(two sets of broker copies) over one state log, with the sink and the log reader faked."""

import json

import pyarrow as pa
import pytest

from broker import topics
from broker.control.state_log import packet_of
from broker.dataplane import executor
from broker.dataplane.executor import Copies, TaskSpec, _Task
from broker.dataplane.plan import PlanSettings
from routing.overlay import builtin

FIGURE4 = builtin("figure4")
DOC = b"<nitf><head><title>t</title></head></nitf>"


class FakeKafka:
    """Every row written, and the state logs as lists of records."""

    def __init__(self):
        self.rows = []
        self.logs = {}

    def send(self, rows):
        for row in rows:
            self.rows.append(row)
            if row[0].startswith(topics.STATE_PREFIX):
                self.logs.setdefault(row[0][len(topics.STATE_PREFIX):], []).append(row)

    def flush(self, timeout=60.0):
        pass

    def ends(self, brokers):
        return {b: len(self.logs.get(b, [])) for b in brokers}

    def read(self, broker, start, end):
        for _, key, value, headers in self.logs.get(broker, [])[start:end]:
            yield packet_of(key, value, headers)

    def deliveries(self, topic="onyx.deliver.s1"):
        return [(r[1].decode(), dict(r[3])["onyx-message-id"].decode()) for r in self.rows if r[0] == topic]


@pytest.fixture
def kafka(monkeypatch):
    fake = FakeKafka()
    monkeypatch.setattr(executor, "sink_for", lambda conf: fake)
    return fake


class Stats:
    def __init__(self):
        self.added = []

    def add(self, value):
        self.added.append(value)


def _spec(job="j"):
    brokers = tuple(FIGURE4.brokers)
    return TaskSpec(job, FIGURE4, brokers, {b: PlanSettings(guard=b == "b1") for b in brokers}, {}, {}, Stats())


def _worker(kafka, spec):
    copies = Copies(spec)
    copies.reader = kafka  # the fake has the reader's two methods
    return copies


def _batch(records):
    """Records (topic, offset, flow, key, value, headers) as the Arrow batch a task reads (the
    flow is only a reminder: the task reads it from the headers, as from Kafka)."""
    cols = {"topic": [], "partition": [], "offset": [], "key": [], "value": [], "headers": []}
    for topic, offset, flow, key, value, headers in records:
        assert dict(headers).get("onyx-flow", b"xml").decode() == flow
        for name, v in zip(cols, (topic, 0, offset, key, value, [{"key": k, "value": x} for k, x in headers])):
            cols[name].append(v)
    header = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.RecordBatch.from_pydict(cols, schema=pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()),
        ("value", pa.binary()), ("headers", header)]))


def _profile(op, version, text="/nitf/head/title"):
    body = {"op": op, "profile_id": "p1", "version": version, "text": text, "delivery_topic": "onyx.deliver.s1"}
    return json.dumps(body).encode()


def _run(worker, records):
    task = _Task(worker.spec, worker)
    list(task.run([_batch(records)]))
    return task


def _message(offset, mid):
    return ("onyx.broker.b6", offset, "xml", mid.encode(), None, [])


def _route_to_b6(kafka, worker, mid, offset):
    """A message from the source, through b1 -> b2 -> b4 -> b6, as each broker's task writes it."""
    _run(worker, [("onyx.src.news", offset, "xml", b"k", DOC, [("onyx-message-id", mid.encode())])])
    for hop in ("b2", "b4", "b6"):
        (row,) = [r for r in kafka.rows if r[0] == topics.broker_topic(hop) and dict(r[3]).get("onyx-message-id")
                  == mid.encode()]
        _run(worker, [(row[0], offset, "xml", row[1], row[2], row[3])])


def test_a_profile_applied_in_one_worker_reaches_the_other_through_the_state_log(kafka):
    spec = _spec()
    a, b = _worker(kafka, spec), _worker(kafka, spec)
    _run(a, [("onyx.broker.b6", 0, "query", b"p1", _profile("add", 1), [("onyx-flow", b"query")])])
    assert [r[0] for r in kafka.logs["b6"]] == ["onyx.state.b6"]
    # b6's routing delta went up to b4; each broker's task on worker a or b applies it
    for hop, parent in (("b4", "b2"), ("b2", "b1")):
        (delta,) = [r for r in kafka.rows if r[0] == topics.broker_topic(hop)]
        _run(a if hop == "b4" else b, [(delta[0], 0, "query", delta[1], delta[2], delta[3])])
    (delta,) = [r for r in kafka.rows if r[0] == topics.broker_topic("b1")]
    _run(a, [(delta[0], 0, "query", delta[1], delta[2], delta[3])])
    _route_to_b6(kafka, b, "m1", 1)  # worker b never saw a control packet: it reads the logs
    assert kafka.deliveries() == [("p1", "m1")]


def test_a_control_packet_met_again_changes_nothing_and_is_logged_once(kafka):
    spec = _spec()
    a = _worker(kafka, spec)
    packet = ("onyx.broker.b6", 5, "query", b"p1", _profile("add", 1), [("onyx-flow", b"query")])
    _run(a, [packet])
    _run(a, [packet])  # a replayed batch
    b = _worker(kafka, spec)
    _run(b, [packet])  # another worker, after reading the log
    assert len(kafka.logs["b6"]) == 1
    assert len([r for r in kafka.rows if r[0] == topics.broker_topic("b4")]) == 1  # one routing delta up


def test_a_control_packet_takes_effect_between_the_messages_around_it(kafka):
    spec = _spec()
    a = _worker(kafka, spec)
    _run(a, [("onyx.broker.b6", 0, "query", b"p1", _profile("add", 1), [("onyx-flow", b"query")])])
    header = [("onyx-flow", b"xml"), ("onyx-format", b"text"), ("onyx-root-broker", b"b1")]
    _run(a, [("onyx.broker.b6", 1, "xml", b"m1", DOC, header + [("onyx-message-id", b"m1")]),
             ("onyx.broker.b6", 2, "query", b"p1", _profile("delete", 2), [("onyx-flow", b"query")]),
             ("onyx.broker.b6", 3, "xml", b"m2", DOC, header + [("onyx-message-id", b"m2")])])
    assert kafka.deliveries() == [("p1", "m1")]


def test_a_copy_a_failed_task_left_behind_is_rebuilt_from_the_log(kafka):
    spec = _spec()
    a = _worker(kafka, spec)
    _run(a, [("onyx.broker.b6", 0, "query", b"p1", _profile("add", 1), [("onyx-flow", b"query")])])
    half_done = a.get("b6", 1)  # a task takes the copy ...
    half_done.plan.control("query", b"p1", _profile("delete", 9), [], "onyx.broker.b6", ("x", 0, 0))
    # ... changes it and dies before its packets reach the log: the next task must not use it
    assert a.get("b6", 1) is not half_done
    assert "p1" in a.copies["b6"].plan.state.profiles


def test_a_run_of_messages_goes_down_its_links_before_any_is_matched_locally(kafka):
    """ONYX 4.3.1's priority as the executor realises it: b4 hosts a profile and forwards
    to b6, which hosts one too; every link row of a run of messages reaches the sink
    before the first delivery row of any of them."""
    spec = _spec()
    a = _worker(kafka, spec)
    _run(a, [("onyx.broker.b6", 0, "query", b"p1", _profile("add", 1), [("onyx-flow", b"query")])])
    (delta,) = [r for r in kafka.rows if r[0] == topics.broker_topic("b4")]
    _run(a, [(delta[0], 0, "query", delta[1], delta[2], delta[3])])
    at_b4 = json.dumps({"op": "add", "profile_id": "p4", "version": 1, "text": "/nitf/head",
                        "delivery_topic": "onyx.deliver.s1"}).encode()
    _run(a, [("onyx.broker.b4", 1, "query", b"p4", at_b4, [("onyx-flow", b"query")])])
    start = len(kafka.rows)
    header = [("onyx-flow", b"xml"), ("onyx-format", b"text"), ("onyx-root-broker", b"b1")]
    mids = ["m1", "m2", "m3"]
    _run(a, [("onyx.broker.b4", 2 + i, "xml", mid.encode(), DOC, header + [("onyx-message-id", mid.encode())])
             for i, mid in enumerate(mids)])
    rows = [(i, r[0], dict(r[3])["onyx-message-id"].decode()) for i, r in enumerate(kafka.rows[start:])
            if r[0] in (topics.broker_topic("b6"), "onyx.deliver.s1")]
    forwards = {mid: i for i, topic, mid in rows if topic == topics.broker_topic("b6")}
    delivered = {mid: i for i, topic, mid in reversed(rows) if topic == "onyx.deliver.s1"}  # the first
    assert sorted(forwards) == sorted(delivered) == mids
    assert max(forwards.values()) < min(delivered.values())
