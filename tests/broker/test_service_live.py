"""The registration service for real: uvicorn on a free port, a SQLite file, real Kafka."""

import json
import time
import urllib.error
import urllib.request

import pytest
from kafka import KafkaAdminClient, KafkaConsumer

from broker.clients import TopicTail
from broker.local.devcluster import free_port
from broker.registry.serve import BackgroundServer, ServiceSettings
from routing.overlay import builtin

pytestmark = pytest.mark.kafka


def _call(method, url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


PREFIX = "alerts-live."  # the operator's delivery topic prefix here (ONYX_DELIVERY_TOPIC_PREFIXES)


@pytest.fixture(scope="module")
def service(kafka, tmp_path_factory):
    db = tmp_path_factory.mktemp("svc") / "onyx.db"
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{db}",
                                              "127.0.0.1", free_port(), delivery_prefixes=(PREFIX,))).start()
    yield server
    server.stop()


def test_profile_lifecycle_over_http_sends_query_packets_to_the_host_broker(service, kafka):
    status, body = _call("POST", f"{service.url}/profiles", {"text": "/nitf[head/pubdata/@edition.area='SF']", "near": "b5"})
    assert status == 201 and body["host_broker"] == "b5"
    pid, token = body["profile_id"], body["token"]
    status, _ = _call("PUT", f"{service.url}/profiles/{pid}", {"text": "/nitf//hl1"}, {"X-Onyx-Token": token})
    assert status == 200
    status, _ = _call("DELETE", f"{service.url}/profiles/{pid}", headers={"X-Onyx-Token": token})
    assert status == 204

    consumer = KafkaConsumer("onyx.broker.b5", bootstrap_servers=kafka.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    ops = []
    for record in consumer:
        if record.key == pid.encode():
            assert ("onyx-flow", b"query") in record.headers
            ops.append((json.loads(record.value)["op"], json.loads(record.value)["version"]))
        if len(ops) == 3:
            break
    consumer.close()
    assert ops == [("add", 1), ("update", 2), ("delete", 3)]


def test_bad_profile_over_http_is_422_and_nothing_reaches_kafka(service, kafka):
    # Other tests share this Kafka and topic: read only what arrives after the request.
    reader = TopicTail(kafka.bootstrap_servers, ["onyx.broker.b3"])
    status, body = _call("POST", f"{service.url}/profiles", {"text": "/nitf[", "near": "b3"})
    assert status == 422 and "column" in body
    time.sleep(2)
    assert [r for r in reader if r.headers and ("onyx-flow", b"query") in r.headers] == []
    reader.close()


def test_health_and_openapi_over_http(service):
    assert _call("GET", f"{service.url}/health")[1]["status"] == "ok"
    assert "/profiles" in _call("GET", f"{service.url}/openapi.json")[1]["paths"]


def test_a_subscriber_topic_exists_in_kafka_when_registration_returns(service, kafka):
    status, body = _call("POST", f"{service.url}/profiles", {"text": "/nitf/head/title", "near": "b6"})
    assert status == 201 and body["delivery_topic"] == f"onyx.deliver.{body['subscriber_id']}"
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers)
    try:  # what a subscriber's consumer sees at once, without waiting for anything
        assert consumer.partitions_for_topic(body["delivery_topic"])
    finally:
        consumer.close()
    status, sub = _call("POST", f"{service.url}/subscribers")
    assert status == 201
    as_sub = {"X-Onyx-Subscriber-Token": sub["token"]}
    # A topic of its namespace, and one under the operator's prefix: created before the answer.
    status, mine = _call("POST", f"{service.url}/profiles",
                         {"text": "/nitf", "delivery": {"topic": f"{sub['delivery_topic']}.mine"}}, as_sub)
    assert status == 201 and mine["subscriber_id"] == sub["subscriber_id"] and "subscriber_token" not in mine
    status, named = _call("POST", f"{service.url}/profiles",
                          {"text": "/nitf", "delivery": {"topic": f"{PREFIX}{sub['subscriber_id']}"}}, as_sub)
    assert status == 201 and named["delivery_topic"] == f"{PREFIX}{sub['subscriber_id']}"
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        assert {sub["delivery_topic"], mine["delivery_topic"], named["delivery_topic"]} <= set(admin.list_topics())
    finally:
        admin.close()
    # The profile's token and its subscriber's read it; nothing else does.
    assert _call("GET", f"{service.url}/profiles/{mine['profile_id']}", headers=as_sub)[0] == 200
    assert _call("GET", f"{service.url}/profiles/{mine['profile_id']}")[0] == 401
    assert _call("GET", f"{service.url}/profiles/{mine['profile_id']}",
                 headers={"X-Onyx-Subscriber-Token": body["subscriber_token"]})[0] == 404


def test_a_foreign_topic_under_the_prefix_is_409_over_http(service, kafka, unique):
    from kafka.admin import NewTopic

    foreign = f"{PREFIX}someone-elses-{unique}"  # in Kafka already, created by someone else
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(foreign, num_partitions=1, replication_factor=1)])
        status, body = _call("POST", f"{service.url}/profiles", {"text": "/nitf", "delivery": {"topic": foreign}})
        assert status == 409 and "exists in Kafka" in body["detail"], body
        status, body = _call("POST", f"{service.url}/profiles",
                             {"text": "/nitf", "delivery": {"topic": f"elsewhere.{unique}"}})
        assert status == 422 and "outside your namespace" in body["detail"]
        assert f"elsewhere.{unique}" not in set(admin.list_topics())
    finally:
        admin.close()


@pytest.mark.parametrize("topic, status", [
    ("onyx.src.news", 422), ("onyx.broker.b2", 422), ("onyx.profiles", 422), ("onyx.catalog", 422),
    ("onyx.dead-letter", 422), ("onyx_src_news", 422), ("__consumer_offsets", 422),
    ("onyx.deliver.b4", 409),  # a delivery topic the service assigned to someone else (a broker)
])
def test_internal_delivery_topics_are_refused_over_http_and_nothing_reaches_kafka(service, kafka, topic, status):
    reader = TopicTail(kafka.bootstrap_servers, ["onyx.broker.b1", "onyx.profiles"])
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        before = set(admin.list_topics())
        answer, body = _call("POST", f"{service.url}/profiles",
                             {"text": "/nitf/head/title[contains(., 'PROBE')]", "delivery": {"topic": topic}, "near": "b1"})
        assert answer == status and topic in body["detail"]
        time.sleep(1)
        assert set(admin.list_topics()) == before  # not even the would-be subscriber's topic
        # (the metadata provider's batch of the profiles earlier tests registered may land meanwhile:
        # catalog packets naming those; the refused profile has no document)
        assert [r for r in reader if dict(r.headers).get("onyx-flow") != b"catalog" or b"PROBE" in r.value] == []
    finally:
        admin.close()
        reader.close()


def test_the_event_stream_gives_each_profile_the_shared_records_that_list_it(service, kafka):
    """A broker writes one record for all the profiles of a topic that matched a message
    (``onyx-profiles``): each profile's stream has it as a delivery of its own, with its id; a
    profile the record does not list does not get it. A reference names the streamed profile."""
    from confluent_kafka import Producer

    from broker import packets
    from broker.clients import api, stream_deliveries

    first = api("POST", f"{service.url}/profiles", {"text": "/nitf"})
    sub = first["subscriber_token"]
    second, third = (api("POST", f"{service.url}/profiles", {"text": "/nitf"}, subscriber_token=sub) for _ in range(2))
    p1, p2, p3 = (p["profile_id"] for p in (first, second, third))
    topic = first["delivery_topic"]
    shared = sorted([p1, p2])
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b"<nitf>shared</nitf>", shared[0].encode(),
                     headers=[("onyx-message-id", b"m-shared"), (packets.PROFILES, ",".join(shared).encode())])
    producer.produce(topic, packets.reference("m-ref", "news", p3), p3.encode(),
                     headers=[("onyx-message-id", b"m-ref"), ("onyx-source", b"news"),
                              (packets.PROFILES, p3.encode()), (packets.DELIVERY, packets.REFERENCE)])
    assert producer.flush(30) == 0

    def first_event(profile) -> dict:
        stream = stream_deliveries(service.url, profile["profile_id"], profile["token"], from_start=True, timeout=30)
        try:
            return next(e for e in stream if e is not None)
        finally:
            stream.close()

    for profile in (first, second):
        event = first_event(profile)
        assert (event["profile_id"], event["message_id"], event["value"], event["offset"]) == (
            profile["profile_id"], "m-shared", "<nitf>shared</nitf>", 0)
    event = first_event(third)  # not listed on the shared record: its first delivery is its own
    assert (event["message_id"], event["offset"]) == ("m-ref", 1)
    assert json.loads(event["value"])["href"] == f"/profiles/{p3}/messages/m-ref"
