"""Kafka's ACLs for real: a local Kafka with SASL/SCRAM and the standard authorizer, its users
and ACLs made from broker/deploy/acls.py (what the Helm chart's KafkaUsers hold), clients of
every kind refused what the rules refuse; and the whole overlay, secure, delivering exactly
what a centralized engine says to subscribers reading with their own users."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.packets import profile_ids
from broker import topics
from broker.clients import api
from broker.deploy import acls
from broker.kafka_auth import Credentials, librdkafka_options
from broker.local import kafka_users
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.devcluster import KafkaDevCluster
from routing.overlay import builtin
from yfilter import Engine

pytestmark = [pytest.mark.kafka]

OVERLAY = builtin("figure4")
WAIT_S = 30.0  # liveness bound of one client's answer


@pytest.fixture(scope="module")
def secure_kafka():
    """A real one-node KRaft Kafka with SASL/SCRAM and the standard authorizer, for this module."""
    kafka = KafkaDevCluster(name=f"acls-{os.getpid()}", secure=True)
    kafka.start()
    yield kafka
    kafka.stop()
    shutil.rmtree(kafka.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def users(secure_kafka, tmp_path_factory):
    """Makes users with :class:`broker.local.kafka_users.KafkaUsers` (as the overlay does)."""
    return kafka_users.KafkaUsers(secure_kafka.bootstrap_servers, secure_kafka.super_user,
                                  tmp_path_factory.mktemp("kafka-users"))


SOURCE = "acltest"  # not the overlay's source: the overlay below shares this Kafka


@pytest.fixture(scope="module")
def admin(secure_kafka):
    """The topics the tests touch, made as the super user, with a record in each they read (none
    in the overlay's own logs, which the overlay below reads too)."""
    from broker.topics import ensure_topics

    readable = [topics.delivery_topic(s) for s in ("sa", "sb", "s1", "s10", "sa.alerts")]
    readable += [topics.source_topic(SOURCE), topics.source_topic("other"), "alerts.sf"]
    ensure_topics(secure_kafka.bootstrap_servers, readable + [topics.broker_topic("b1"), topics.broker_topic("b2"),
                                                              topics.CATALOG, topics.PROFILES, topics.METADATA,
                                                              topics.DEAD_LETTER], auth=secure_kafka.admin_options())
    for topic in readable:
        assert write(secure_kafka, secure_kafka.super_user, topic) is None


def _conf(kafka: KafkaDevCluster, user: Credentials | None) -> dict:
    return {"bootstrap.servers": kafka.bootstrap_servers,
            **(librdkafka_options(*user) if user else librdkafka_options(None, None))}


def write(kafka: KafkaDevCluster, user: Credentials, topic: str) -> KafkaError | None:
    """Write one record to ``topic`` as ``user`` (idempotent, acks=all: as Onyx's producers do);
    Kafka's error, or None."""
    got: list = []
    producer = Producer({**_conf(kafka, user), "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(WAIT_S * 1000)})
    producer.produce(topic, b"<x/>", b"k", headers=[("onyx-message-id", uuid.uuid4().hex.encode())],
                     on_delivery=lambda err, msg: got.append(err))
    try:
        producer.flush(WAIT_S + 5)
    except KafkaException as exc:  # a fatal error: no producer id for a user who may write nowhere
        return exc.args[0]
    return got[0]


def read(kafka: KafkaDevCluster, user: Credentials, topic: str, group: str) -> KafkaError | bytes:
    """The first record of ``topic`` read as ``user`` in consumer group ``group``, or Kafka's error."""
    consumer = Consumer({**_conf(kafka, user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            return m.error() if m.error() is not None else m.value()
        raise AssertionError(f"neither a record nor an error from {topic} in {WAIT_S:.0f}s")
    finally:
        consumer.close()


def topic_refused(result) -> bool:
    """Whether Kafka refused a read or write on the topic itself (no ACL allows it, or one denies it)."""
    return isinstance(result, KafkaError) and result.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def refused(result) -> bool:
    """Whether Kafka refused for want of an ACL at all: on the topic, or before it is reached: the
    idempotent producer's id, which Kafka gives only to a user who may write some topic, or the
    consumer group, for a user who may use none."""
    return topic_refused(result) or (isinstance(result, KafkaError) and result.code() in (
        KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED))


def test_a_subscriber_reads_its_own_deliveries_and_is_refused_anothers(secure_kafka, users, admin):
    a = users.ensure(kafka_users.subscriber_user("sa"), acls.subscriber_rules("sa", ["alerts.sf"]))
    b = users.ensure(kafka_users.subscriber_user("sb"), acls.subscriber_rules("sb"))
    # its own topic, the topics of its namespace, the topic it claimed
    for topic in ("onyx.deliver.sa", "onyx.deliver.sa.alerts", "alerts.sf"):
        assert read(secure_kafka, a, topic, "sa-reader") == b"<x/>", topic
    assert topic_refused(read(secure_kafka, a, "onyx.deliver.sb", "sa-reader"))
    assert topic_refused(read(secure_kafka, b, "onyx.deliver.sa", "sb-reader"))
    assert topic_refused(read(secure_kafka, b, "alerts.sf", "sb-reader"))
    # a literal name: s1 never reads s10's topic
    s1 = users.ensure(kafka_users.subscriber_user("s1"), acls.subscriber_rules("s1"))
    assert read(secure_kafka, s1, "onyx.deliver.s1", "s1-r") == b"<x/>"
    assert topic_refused(read(secure_kafka, s1, "onyx.deliver.s10", "s1-r"))
    # ... nor writes anything, nor reads with another subscriber's consumer group
    assert refused(write(secure_kafka, a, "onyx.deliver.sa"))
    error = read(secure_kafka, a, "onyx.deliver.sa", "sb-reader")
    assert isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_publisher_writes_its_sources_and_nothing_else(secure_kafka, users, admin):
    wire = users.ensure(kafka_users.publisher_user("wire"), acls.publisher_rules([SOURCE]))
    assert write(secure_kafka, wire, topics.source_topic(SOURCE)) is None
    for topic in (topics.source_topic("other"), topics.broker_topic("b1"), topics.CATALOG, topics.PROFILES,
                  "onyx.deliver.sa"):
        assert topic_refused(write(secure_kafka, wire, topic)), topic
    assert refused(read(secure_kafka, wire, topics.source_topic(SOURCE), "wire"))


@pytest.mark.parametrize("brokers", [["b1"], OVERLAY.brokers], ids=["one-broker", "one-application"])
def test_a_broker_writes_its_links_and_deliveries_never_the_overlays_own_topics(secure_kafka, users, admin, brokers):
    """A broker's user (and one Spark application's serving every broker) writes its links
    and any delivery topic; it is denied the source topics and the compacted logs, whatever
    a profile names."""
    user = users.ensure(kafka_users.broker_user(brokers), acls.application_rules(OVERLAY, brokers))
    for topic in (topics.broker_topic("b2"), "onyx.deliver.sa", topics.DEAD_LETTER):
        assert write(secure_kafka, user, topic) is None, topic
    for topic in (topics.source_topic(SOURCE), topics.source_topic("other"), topics.CATALOG, topics.PROFILES,
                  topics.METADATA):
        assert topic_refused(write(secure_kafka, user, topic)), topic
    assert read(secure_kafka, user, topics.source_topic(SOURCE), "spark-kafka-source-test") == b"<x/>"
    assert topic_refused(read(secure_kafka, user, "onyx.deliver.sa", "spark-kafka-source-test"))


def test_the_archive_writer_reads_sources_and_profiles_and_writes_nothing(secure_kafka, users, admin):
    archive = users.ensure(kafka_users.ARCHIVE, acls.archive_rules(OVERLAY))
    assert read(secure_kafka, archive, topics.source_topic(SOURCE), "spark-kafka-source-archive") == b"<x/>"
    for topic in (topics.source_topic(SOURCE), topics.PROFILES, "onyx.deliver.sa"):
        assert refused(write(secure_kafka, archive, topic)), topic
    for topic in (topics.CATALOG, topics.broker_topic("b1"), "onyx.deliver.sa"):
        assert topic_refused(read(secure_kafka, archive, topic, "spark-kafka-source-archive")), topic


def test_a_users_acls_become_exactly_its_rules(secure_kafka, users, admin):
    """Made again with fewer rules, a user loses what they no longer allow (and keeps its password)."""
    name = kafka_users.publisher_user("shrinking")
    first = users.ensure(name, acls.publisher_rules([SOURCE, "other"]))
    assert write(secure_kafka, first, topics.source_topic("other")) is None
    again = users.ensure(name, acls.publisher_rules([SOURCE]))
    assert again == first
    assert topic_refused(write(secure_kafka, again, topics.source_topic("other")))
    assert write(secure_kafka, again, topics.source_topic(SOURCE)) is None


def test_a_client_without_a_valid_login_is_refused(secure_kafka, users, admin):
    """No SASL at all, or a wrong password: Kafka answers nothing but the refusal."""
    from confluent_kafka.admin import AdminClient

    wire = users.ensure(kafka_users.publisher_user("wire"), acls.publisher_rules([SOURCE]))
    errors: list[KafkaError] = []
    wrong = AdminClient({**_conf(secure_kafka, Credentials(wire.username, "not-" + wire.password)),
                         "error_cb": errors.append, "log_level": 0})
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=5)
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:
        wrong.poll(0.5)  # serves the error callback
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    anonymous = AdminClient({**_conf(secure_kafka, None), "log_level": 0})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=5)


# -- the overlay, secure, end to end ---------------------------------------------------------

PROFILES = {  # subscriber -> its profiles
    "alice": ["/nitf//hl1", "/nitf[head/pubdata/@edition.area='SF']"],
    "bob": ["/newsMessage", "//body.content/p"],
    "carol": ["/rss/channel/item", "/nitf/head/title", "/NewsML//HeadLine"],
}


@pytest.fixture(scope="module")
def secure_overlay(secure_kafka, spark):
    """ONYX Figure 4 on the secure Kafka: every component its own user (`onyx up --secure`)."""
    cluster = LocalOverlay(OVERLAY, OverlaySettings(name=f"acls-{os.getpid()}", secure=True),
                           spark=spark, kafka=secure_kafka)
    cluster.log_start = secure_kafka.log_file.stat().st_size  # Kafka's log from here on is the overlay's
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def test_the_secure_overlay_delivers_exactly_what_the_centralized_engine_says(secure_overlay, secure_kafka,
                                                                              corpus_files):
    cluster = secure_overlay
    # Every component is a user of its own, with the rules the chart's KafkaUsers hold.
    assert sorted(cluster.users) == sorted([kafka_users.REGISTRY, kafka_users.MONITOR,
                                            kafka_users.broker_user(OVERLAY.brokers)])
    assert oct(cluster.users_file.stat().st_mode & 0o777) == "0o600"
    assert "password" not in str(cluster.cluster_info()) and not any(
        u.password in str(cluster.cluster_info()) for u in cluster.users.values())

    # Subscribers register over HTTP (anonymously: each gets an id, a token and its own topic) ...
    subscribers, owner, engine = {}, {}, Engine()
    for name, texts in PROFILES.items():
        for text in texts:
            reg = api("POST", f"{cluster.api_url}/profiles", {"text": text},
                      subscriber_token=subscribers[name]["subscriber_token"] if name in subscribers else None)
            subscribers.setdefault(name, reg)
            owner[reg["profile_id"]] = name
            engine.add(reg["profile_id"], text)
        assert subscribers[name]["delivery_topic"] == topics.delivery_topic(subscribers[name]["subscriber_id"])
    cluster.wait_idle(timeout=120)
    # ... and get Kafka users from the operator (`onyx kafka-user add`), as a publisher does.
    info = cluster.cluster_info()
    readers = {name: kafka_users.add_client_user(info, subscriber=reg["subscriber_id"])[0]
               for name, reg in subscribers.items()}
    publisher, _ = kafka_users.add_client_user(info, publisher="newsroom", sources=["news"])

    docs = [p.read_bytes() for p in corpus_files]
    producer = Producer({**_conf(secure_kafka, publisher), "acks": "all", "enable.idempotence": True})
    failed = []
    for i, doc in enumerate(docs):
        producer.produce(topics.source_topic("news"), doc, f"m{i}".encode(),
                         headers=[("onyx-message-id", f"corpus-{i}".encode())],
                         on_delivery=lambda err, msg: failed.append(err) if err else None)
    assert producer.flush(WAIT_S) == 0 and not failed

    expected = defaultdict(lambda: defaultdict(set))  # subscriber -> message id -> profile ids
    for i, doc in enumerate(docs):
        for pid in engine.match(doc):
            expected[owner[pid]][f"corpus-{i}"].add(pid)
    assert sum(len(p) for per in expected.values() for p in per.values()) >= 10, "the corpus should match some"

    got = {name: _deliveries(secure_kafka, readers[name], reg, expected[name], cluster)
           for name, reg in subscribers.items()}
    for name in subscribers:
        assert got[name] == expected[name], name
    # Nothing of the overlay itself was refused anything on the way (Kafka logs each refusal).
    own = tuple(f"User:{name} " for name in cluster.users)
    with open(secure_kafka.log_file, errors="replace") as log:
        log.seek(cluster.log_start)
        refusals = [line for line in log if "is Denied" in line and any(u in line for u in own)]
    assert refusals == []
    # ... and none of the subscribers reads another's deliveries.
    alice, bob = subscribers["alice"], subscribers["bob"]
    assert topic_refused(read(secure_kafka, readers["alice"], bob["delivery_topic"], f"{alice['subscriber_id']}-peek"))
    assert topic_refused(read(secure_kafka, readers["bob"], alice["delivery_topic"], f"{bob['subscriber_id']}-peek"))


def _deliveries(kafka: KafkaDevCluster, user: Credentials, reg: dict, expected: dict, cluster) -> dict:
    """What the subscriber of ``reg`` finds on its delivery topic, read as ``user`` (message id ->
    profile ids), once it holds every delivery ``expected`` and the overlay is idle."""
    consumer = Consumer({**_conf(kafka, user), "group.id": f"{reg['subscriber_id']}-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(reg["delivery_topic"], 0, 0)])
    got: dict = defaultdict(set)

    def drain() -> None:
        while True:
            batch = consumer.consume(500, timeout=0.5)
            if not batch:
                return
            for m in batch:
                assert m.error() is None, m.error()
                got[dict(m.headers())["onyx-message-id"].decode()].update(profile_ids(m.key(), m.headers()))
    try:
        deadline = time.monotonic() + 180
        while not all(got.get(mid, set()) >= pids for mid, pids in expected.items()):
            assert time.monotonic() < deadline, f"missing deliveries on {reg['delivery_topic']}"
            drain()
        cluster.wait_idle(timeout=60)
        drain()
        return got
    finally:
        consumer.close()
