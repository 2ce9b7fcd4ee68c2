"""The registration service killed between sending a change to Kafka and committing it:
after a restart the profile is either fully registered (stored, live at its host) or
absent, never half. Unit checks of the repairs, and the real thing: a service process
that dies (SIGKILL) right after its packets were acknowledged, then the real service
started on the same database and Kafka."""

import json
import os
import subprocess
import sys
import time

import pytest

from broker.clients import ApiError, TopicTail, api
from broker.local.devcluster import free_port
from broker.registry.recovery import recover, repairs
from broker.registry.serve import BackgroundServer, ServiceSettings
from broker.registry.store import ProfileRecord, Store
from routing.overlay import builtin
from tests.broker.test_service_batch import BatchSender

P = ProfileRecord("p1", "/a", "b2", "t", 3)


@pytest.mark.parametrize("told, stored, expected", [
    (P, None, [("delete", "b2", 4)]),                                        # added, never committed
    (P, ProfileRecord("p1", "/old", "b2", "t", 2), [("update", "b2", 4)]),  # updated, never committed
    (P, ProfileRecord("p1", "/old", "b5", "t", 2), [("delete", "b2", 4), ("update", "b5", 5)]),  # moved
    (None, ProfileRecord("p1", "/a", "b2", "t", 3), [("add", "b2", 5)]),    # deleted, never committed
    (P, P, []),                                                              # agreed
    (None, None, []),
])
def test_repairs_make_the_brokers_hold_what_the_database_holds(told, stored, expected):
    fixes = repairs({"p1": told}, {"p1": stored} if stored else {})
    assert [(op, r.host_broker, r.version) for op, r in fixes] == expected
    for op, r in fixes:
        if op != "delete":
            assert r.text == stored.text  # the stored text comes back


def test_recover_stores_the_new_versions_with_the_packets(tmp_path):
    store, sender = Store(f"sqlite:///{tmp_path / 'db'}"), BatchSender()
    with store.transaction() as tx:
        tx.add_profile(ProfileRecord("p1", "/old", "b5", "t", 2), "token")
    fixes = recover(store, sender, {"p1": P, "orphan": ProfileRecord("orphan", "/x", "b3", "t", 1)})
    assert [(op, r.id, r.version) for op, r in fixes] == [
        ("delete", "orphan", 2), ("delete", "p1", 4), ("update", "p1", 5)]
    assert store.profile("p1").version == 5 and store.profile("orphan") is None
    assert [(t, json.loads(v)["op"]) for t, (_, v, _) in sender.batches[0] if t.startswith("onyx.broker.")] == [
        ("onyx.broker.b3", "delete"), ("onyx.broker.b2", "delete"), ("onyx.broker.b5", "update")]
    assert recover(store, sender, {"p1": ProfileRecord("p1", "/old", "b5", "t", 5)}) == []


DYING = """
import os, signal, sys
import uvicorn
from broker.registry import serve
from broker.registry.control_packets import KafkaSender
from routing.overlay import builtin

class Dying(KafkaSender):
    '''Dies (SIGKILL) once a request's profile change was acknowledged, before the commit.'''
    armed = False  # not while the service starts (and recovers)
    def send_batch(self, items):
        super().send_batch(items)
        if self.armed and any(topic == "onyx.profiles" for topic, _ in items):
            os.kill(os.getpid(), signal.SIGKILL)

serve.KafkaSender = Dying
settings = serve.ServiceSettings(sys.argv[1], builtin(), sys.argv[2], "127.0.0.1", int(sys.argv[3]))
app = serve.build_app(settings)
Dying.armed = True
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
"""


def _dying_request(kafka, db, method, path, body=None, token=None) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", DYING, kafka.bootstrap_servers, db, str(port)],
                            stderr=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                api("GET", f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except (ApiError, OSError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise AssertionError(f"the dying service did not start: {proc.communicate()[1][-2000:]}")
                time.sleep(0.2)
        with pytest.raises((ApiError, OSError)):
            api(method, f"http://127.0.0.1:{port}{path}", body, token=token, timeout=30)
        assert proc.wait(30) == -9  # killed between the send and the commit
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.kafka
def test_a_service_killed_before_its_commit_leaves_nothing_half_registered(kafka, tmp_path, unique):
    db = f"sqlite:///{tmp_path / 'onyx.db'}"
    settings = ServiceSettings(kafka.bootstrap_servers, builtin(), db, "127.0.0.1", free_port())
    server = BackgroundServer(settings).start()
    try:  # one profile registered for real
        kept = api("POST", f"{server.url}/profiles", {"text": f"/kept[@u = '{unique}']", "near": "b5"})
    finally:
        server.stop()
    host_topics = [f"onyx.broker.{b}" for b in builtin().brokers]
    tail = TopicTail(kafka.bootstrap_servers, host_topics)
    _dying_request(kafka, db, "POST", "/profiles", {"text": f"/orphan[@u = '{unique}']", "near": "b3"})
    _dying_request(kafka, db, "PUT", f"/profiles/{kept['profile_id']}", {"text": f"/changed[@u = '{unique}']"},
                   token=kept["token"])

    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), db, "127.0.0.1",
                                              free_port())).start()  # recovers as it starts
    try:
        records, packets, orphan = [], [], None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(packets) < 5:
            records += [r for r in tail if r.key and r.value]
            orphan = next((json.loads(r.value)["profile_id"] for r in records if b"/orphan" in r.value), None)
            packets = [json.loads(r.value) for r in records if r.key.decode() in (orphan, kept["profile_id"])]
        tail.close()
        told = [(p["op"], p["profile_id"], p.get("text"), p["version"]) for p in packets]
        # The orphan: added at its host, then deleted there; nobody has it.
        assert ("add", orphan, f"/orphan[@u = '{unique}']", 1) in told and ("delete", orphan, None, 2) in told
        assert Store(db).profile(orphan) is None
        with pytest.raises(ApiError, match="404"):
            api("GET", f"{server.url}/profiles/{orphan}", subscriber_token=kept["subscriber_token"])
        # The update never committed: the host gets the stored text back, at a newer version.
        kid = kept["profile_id"]
        assert ("update", kid, f"/changed[@u = '{unique}']", 2) in told and ("update", kid, f"/kept[@u = '{unique}']", 3) in told
        view = api("GET", f"{server.url}/profiles/{kept['profile_id']}", token=kept["token"])
        assert (view["text"], view["version"]) == (f"/kept[@u = '{unique}']", 3)
        # and the service works on: the token still updates it
        api("PUT", f"{server.url}/profiles/{kept['profile_id']}", {"text": "/again"}, token=kept["token"])
        assert api("GET", f"{server.url}/profiles/{kept['profile_id']}",
                   subscriber_token=kept["subscriber_token"])["version"] == 4
    finally:
        server.stop()
