"""The centralized peer of :mod:`bench.overlay`: what a user would run on one machine
instead of the overlay — one consumer process with the same Kafka client as the brokers
(confluent-kafka), one :class:`yfilter.Engine` holding every profile, and for each message
one record per delivery topic with a matching profile, written with the brokers' own
producer settings (:func:`broker.dataplane.sink.producer_conf`: linger, zstd, acks=all).
A record carries the message, its ``onyx-message-id`` and an ``onyx-profiles`` header
listing the matching profile ids of that topic (the overlay's delivery records since
issue 41; before, the overlay wrote one record per matching profile).

Run as a child process by :class:`Peer` (``python -m bench.peer PROFILES.json``)::

    {"bootstrap": "...", "source": "topic", "profiles": [[id, text, delivery topic], ...]}

It loads the profiles (``Engine.add_many``), says ``{"ready": ...}`` on stdout, then reads
the source topic from its start. Commands on stdin: ``expect <prefix> <n>`` — say
``{"done": <monotonic time>}`` once ``n`` messages whose id starts with ``<prefix>`` have
been matched and their records acknowledged by Kafka; ``stats`` — say the counts so far;
end of input — stop. ``time.monotonic`` is the machine's CLOCK_MONOTONIC, the same in
every process, so the bench compares it with its own send times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(spec: dict) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    from broker import config
    from broker.dataplane.sink import producer_conf
    from yfilter import Engine

    profiles = spec["profiles"]
    topic_of = {pid: topic for pid, _, topic in profiles}
    t0 = time.monotonic()
    engine = Engine()
    engine.add_many((pid, text) for pid, text, _ in profiles)
    load_s = time.monotonic() - t0
    producer = Producer(producer_conf(spec["bootstrap"], config.BROKER_LINGER_MS, config.BROKER_COMPRESSION))
    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": f"peer-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    source = spec["source"]
    parts = consumer.list_topics(source, timeout=10).topics[source].partitions
    consumer.assign([TopicPartition(source, p, 0) for p in sorted(parts) or [0]])
    lock = threading.Lock()
    counts = {"messages": 0, "matched_messages": 0, "matches": 0, "records": 0, "errors": 0}
    by_prefix: dict[str, int] = {}
    expect: dict[str, int] = {}
    stop = threading.Event()

    def commands() -> None:
        for line in sys.stdin:
            parts = line.split()
            with lock:
                if parts[:1] == ["expect"]:
                    expect[parts[1]] = int(parts[2])
                elif parts[:1] == ["stats"]:
                    _say({"stats": dict(counts)})
        stop.set()

    threading.Thread(target=commands, daemon=True).start()
    _say({"ready": True, "load_s": load_s, "profiles": len(engine)})
    while not stop.is_set():
        batch = consumer.consume(500, timeout=0.05)
        for msg in batch:
            if msg.error() is not None:
                counts["errors"] += 1
                continue
            mid = dict(msg.headers() or ()).get("onyx-message-id", msg.key() or b"").decode()
            value = msg.value()
            try:
                matched = engine.match(value)
            except ValueError:
                counts["errors"] += 1
                matched = frozenset()
            per_topic: dict[str, list[str]] = {}
            for pid in matched:
                per_topic.setdefault(topic_of[pid], []).append(pid)
            for topic, pids in per_topic.items():
                headers = [("onyx-message-id", mid.encode()), ("onyx-profiles", ",".join(sorted(pids)).encode())]
                while True:
                    try:
                        producer.produce(topic, value, mid.encode(), headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.05)
                counts["records"] += 1
            producer.poll(0)
            counts["messages"] += 1
            counts["matches"] += len(matched)
            counts["matched_messages"] += bool(matched)
            prefix = mid.rsplit("-", 1)[0]
            by_prefix[prefix] = by_prefix.get(prefix, 0) + 1
        with lock:  # every pass: an expectation may come after its messages were matched
            finished = [p for p, n in expect.items() if by_prefix.get(p, 0) >= n]
        if finished:
            producer.flush()  # the records are in Kafka: the messages are done
            now = time.monotonic()
            with lock:
                for p in finished:
                    del expect[p]
                    _say({"done": now, "prefix": p, "stats": dict(counts)})
    producer.flush()
    consumer.close()


class Peer:
    """The peer as a child process (see the module): start, :meth:`expect`, :meth:`stats`, :meth:`stop`."""

    def __init__(self, bootstrap: str, source: str, profiles: list[tuple[str, str, str]], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.spec = workdir / f"peer-{time.time_ns()}.json"
        self.spec.write_text(json.dumps({"bootstrap": bootstrap, "source": source,
                                         "profiles": [list(p) for p in profiles]}))
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.peer", str(self.spec)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ready = self._read()
        if "ready" not in self.ready:
            raise RuntimeError(f"peer did not start: {self.ready}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"peer ended (exit code {self.proc.wait()})")
        return json.loads(line)

    def expect(self, prefix: str, n: int) -> None:
        self.proc.stdin.write(f"expect {prefix} {n}\n")
        self.proc.stdin.flush()

    def wait_done(self) -> dict:
        """The next ``done`` report (blocks)."""
        while True:
            out = self._read()
            if "done" in out:
                return out

    def stats(self) -> dict:
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        while True:
            out = self._read()
            if "stats" in out and "done" not in out:
                return out["stats"]

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.spec.unlink(missing_ok=True)


if __name__ == "__main__":
    serve(json.loads(Path(sys.argv[1]).read_text()))
