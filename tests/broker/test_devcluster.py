"""The local Kafka launcher on the real broker: start, errors a user can act on, clean stop."""

import base64
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from broker import jvm
from broker.errors import SetupError
from broker.local import devcluster
from broker.local.devcluster import KafkaDevCluster


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_taken_port_is_reported_in_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SetupError, match=f"port {port} on 127.0.0.1 is already in use"):
            KafkaDevCluster(name="busy", port=port).start()


def test_missing_java_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match="Java not found"):
        jvm.find_java()


def test_missing_jars_are_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm.config, "JVM_LIB_DIR", tmp_path)
    with pytest.raises(SetupError, match="make jvm"):
        jvm.jar_dir("kafka")


def test_cli_reports_taken_port_and_exits_nonzero():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "broker.cli", "kafka", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"onyx: error: port {port} on 127.0.0.1 is already in use; pick another or stop what holds it"]


@pytest.mark.kafka
def test_fixture_broker_serves_clients(kafka):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        assert admin.describe_cluster()["controller_id"] == 1
    finally:
        admin.close()
    assert kafka.bootstrap_servers.startswith("127.0.0.1:")
    assert kafka.log_file.exists()


@pytest.mark.kafka
def test_jvm_dies_with_the_process_that_started_it(tmp_path):
    """No orphaned JVM: SIGKILL the Python process that started Kafka, the JVM follows."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from broker.local.devcluster import KafkaDevCluster\n"
        f"k = KafkaDevCluster(name='orphan', run_dir=Path({str(tmp_path)!r})).start()\n"
        "print(k.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        jvm_pid = int(parent.stdout.readline())
        assert _alive(jvm_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 20
        while _alive(jvm_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(jvm_pid), f"Kafka JVM {jvm_pid} outlived its parent"
    finally:
        parent.kill()


@pytest.mark.kafka
def test_stop_ends_the_jvm(tmp_path):
    cluster = KafkaDevCluster(name="stop", run_dir=tmp_path).start()
    pid = cluster.proc.pid
    cluster.stop()
    assert not cluster.running
    assert not _alive(pid)


def _dash_first_uuids(monkeypatch) -> list[uuid.UUID]:
    """Make devcluster draw a UUID whose base64 starts with '-' first, then random ones."""
    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))
    assert base64.urlsafe_b64encode(dashed.bytes).startswith(b"-")
    drawn = [dashed]
    real_uuid4 = uuid.uuid4
    monkeypatch.setattr(devcluster.uuid, "uuid4", lambda: drawn.pop(0) if drawn else real_uuid4())
    return drawn


def test_cluster_id_never_starts_with_a_dash(monkeypatch):
    drawn = _dash_first_uuids(monkeypatch)
    cluster_id = devcluster.new_cluster_id()
    assert not drawn, "the dashed UUID was not drawn"
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22


@pytest.mark.kafka
def test_storage_formats_when_the_first_random_id_starts_with_a_dash(monkeypatch, tmp_path):
    """The storage tool reads '-t -AbC...' as two options; one start in 64 used to fail on it."""
    _dash_first_uuids(monkeypatch)
    cluster = KafkaDevCluster(name="dash", run_dir=tmp_path).start()
    try:
        meta = next(tmp_path.rglob("meta.properties")).read_text()
        cluster_id = re.search(r"^cluster\.id=(.+)$", meta, re.M).group(1)
        assert not cluster_id.startswith("-")
    finally:
        cluster.stop()
