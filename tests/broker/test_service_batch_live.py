"""POST /profiles:batch for real: uvicorn, a SQLite file, real Kafka."""

import json
import time

import pytest
from kafka import KafkaAdminClient

from broker.clients import TopicTail, api
from broker.local.devcluster import free_port
from broker.registry.serve import BackgroundServer, ServiceSettings
from routing.overlay import builtin

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def service(kafka, tmp_path_factory):
    db = tmp_path_factory.mktemp("svc-batch") / "onyx.db"
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{db}",
                                              "127.0.0.1", free_port())).start()
    yield server
    server.stop()


def test_a_batch_reaches_each_host_broker_and_its_bad_item_is_reported_with_its_position(service, kafka, unique):
    hosts = ["b2", "b5", "b6"]
    # Other tests share this Kafka and these topics: read only what arrives after the request.
    reader = TopicTail(kafka.bootstrap_servers, [f"onyx.broker.{b}" for b in hosts] + ["onyx.profiles"])
    good = {b: f"/nitf/head/title[contains(., 'BATCH-{unique}-{b}')]" for b in hosts}
    bad = f"/nitf[@id = 'BATCH-{unique}'"
    items = [{"text": good["b2"], "near": "b2"}, {"text": bad, "near": "b5"},
             {"text": good["b5"], "near": "b5"}, {"text": good["b6"], "near": "b6"}]
    body = api("POST", f"{service.url}/profiles:batch", {"profiles": items})
    assert [r["status"] for r in body["results"]] == [201, 422, 201, 201]
    assert (body["registered"], body["failed"]) == (3, 1)
    error = body["results"][1]["error"]
    assert error["column"] == len(bad) + 1 and f"at column {len(bad) + 1}" in error["detail"]
    registered = {r["profile"]["host_broker"]: r["profile"] for r in body["results"] if r["status"] == 201}
    assert sorted(registered) == hosts

    seen: dict[str, list] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(len(v) for v in seen.values()) < 6:
        for record in reader:
            if record.value is not None and f"BATCH-{unique}".encode() in record.value:
                seen.setdefault(record.topic, []).append(record)
    reader.close()
    for b in hosts:
        [record] = seen[f"onyx.broker.{b}"]
        packet = json.loads(record.value)
        assert ("onyx-flow", b"query") in record.headers and record.key == registered[b]["profile_id"].encode()
        assert (packet["op"], packet["text"], packet["host_broker"], packet["version"]) == ("add", good[b], b, 1)
        assert packet["delivery_topic"] == registered[b]["delivery_topic"] == f"onyx.deliver.{body['subscriber_id']}"
    assert sorted(r.key.decode() for r in seen["onyx.profiles"]) == sorted(p["profile_id"] for p in registered.values())
    assert not any(bad.encode() in r.value for records in seen.values() for r in records)

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:  # the subscriber created for the batch has its own topic, ready for a consumer
        assert f"onyx.deliver.{body['subscriber_id']}" in admin.list_topics()
    finally:
        admin.close()
    for p in registered.values():  # each registered profile is stored and answers to its own token
        assert api("GET", f"{service.url}/profiles/{p['profile_id']}", token=p["token"])["host_broker"] == \
            p["host_broker"]
        assert api("GET", f"{service.url}/profiles/{p['profile_id']}", subscriber_token=body["subscriber_token"]
                   )["profile_id"] == p["profile_id"]
    api("DELETE", f"{service.url}/profiles/{registered['b6']['profile_id']}", token=registered["b6"]["token"])


def test_the_kafka_sender_partitions_keys_as_kafka_python_did(kafka, unique):
    """The compacted profile log keeps one record per profile only if every version of it
    lands in one partition: the sender partitions keys as the producer before it did."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    from broker.registry.control_packets import KafkaSender

    topic = f"test.partitions.{unique}"
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=8, replication_factor=1)])
    admin.close()
    keys = [f"p{i:04x}".encode() for i in range(40)]
    old = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
    expected = {k: old.send(topic, key=k, value=b"old").get(30).partition for k in keys}
    old.close()
    sender = KafkaSender(kafka.bootstrap_servers)
    sender.send_batch([(topic, (k, b"new", [])) for k in keys])
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    got = {r.key: r.partition for r in consumer if r.value == b"new"}
    consumer.close()
    assert got == expected and len(set(expected.values())) > 1
