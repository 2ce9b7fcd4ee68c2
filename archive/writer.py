"""The archive writer: a Spark Structured Streaming query beside the brokers that stores
every record of the source topics (``onyx.src.*``) in the archive, one
:class:`~archive.partition.PartitionArchive` per source topic partition under a
directory (``<directory>/<source>/<partition>/``), and every profile change of the
registration service's profile log (``onyx.profiles``: a record per registration or
update, a tombstone per deletion) as a profile lifetime in a
:class:`~archive.profiles.ProfileHistory` (``<directory>/_profiles/``; no source id
starts with ``_``), and every version of a source of the catalog log (``onyx.catalog``)
the same way (``<directory>/_catalog/``, the version's text being its catalog record). The Spark edge of the archive: the only module of the package that
imports PySpark.

Each micro-batch is archived by ``foreachPartition`` on the executors: the Kafka source
gives one Spark partition per Kafka partition, so writers scale with the topics'
partitions, and each archives its partition's records in offset order under a lock on
that partition's folder, flushing and letting readers in every
:data:`~archive.defaults.WRITER_CHUNK` records. A batch that Spark runs again after a failure is
harmless: offsets already archived are skipped.

>>> start(spark, "127.0.0.1:9092", "/data/archive", "/data/ckpt")   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from archive import defaults
from archive.locks import locked
from archive.partition import PartitionArchive
from archive.profiles import ProfileHistory

SOURCE_PREFIX = "onyx.src."
"""Publishers' topics, ``onyx.src.<source>`` (DESIGN.md section 5, ``broker/topics.py``)."""

PROFILE_LOG = "onyx.profiles"
"""The registration service's profile log (DESIGN.md section 5, ``broker/topics.py``)."""

PROFILES_FOLDER = "_profiles"
"""Where under the archive's directory the profile lifetimes are kept."""

CATALOG_LOG = "onyx.catalog"
"""The registration service's catalog log: a record per source registered or changed."""

CATALOG_FOLDER = "_catalog"
"""Where under the archive's directory the sources' versions are kept."""

SOURCE_PATTERN = r"onyx\.src\..+|onyx\.profiles|onyx\.catalog"
"""The topics the writer subscribes to (new sources are picked up as they appear)."""


def source_of(topic: str) -> str:
    return topic[len(SOURCE_PREFIX):] if topic.startswith(SOURCE_PREFIX) else topic


def archive_rows(directory: str | os.PathLike, rows, chunk: int = defaults.WRITER_CHUNK) -> dict[tuple[str, int], int]:
    """Archive ``rows`` (``topic, partition, offset, ts_ms, value, headers``) into the
    partition archives under ``directory``, ``chunk`` records per hold of a partition's
    lock; returns records archived per partition."""
    groups, changes, sources = defaultdict(list), [], []
    for r in rows:
        if r["topic"] == PROFILE_LOG:
            changes.append(r)
        elif r["topic"] == CATALOG_LOG:
            sources.append(r)
        else:
            groups[(source_of(r["topic"]), int(r["partition"]))].append(r)
    done = {}
    if changes:
        done[(PROFILES_FOLDER, 0)] = archive_keyed_changes(Path(directory) / PROFILES_FOLDER, changes, profile_text)
    if sources:
        done[(CATALOG_FOLDER, 0)] = archive_keyed_changes(Path(directory) / CATALOG_FOLDER, sources, catalog_text)
    for (source, partition), group in groups.items():
        where = Path(directory) / source / str(partition)
        group.sort(key=lambda r: r["offset"])
        done[(source, partition)] = sum(_archive_chunk(where, source, partition, group[i:i + chunk])
                                        for i in range(0, len(group), chunk))
    return done


def _archive_chunk(where: Path, source: str, partition: int, rows) -> int:
    """Archive ``rows`` (in offset order) into one partition archive under its lock, and
    flush: the lock is held for one chunk at a time, so readers get in between."""
    n = 0
    with locked(where):                        # one writer per partition archive
        part = PartitionArchive(where, source, partition)
        try:
            for r in rows:
                headers = [(h["key"], bytes(h["value"] or b"")) for h in (r["headers"] or [])]
                if part.add(bytes(r["value"] or b""), offset=int(r["offset"]), timestamp=int(r["ts_ms"]),
                            headers=headers) is not None:
                    n += 1
            part.flush()
        finally:
            part.close()
    return n


def profile_text(value: bytes | None) -> str | None:
    """A profile-log record's profile text (``None``: deleted).

    >>> profile_text(b'{"op": "add", "text": "/a"}'), profile_text(b'{"op": "delete"}'), profile_text(None)
    ('/a', None, None)
    """
    if value is None:
        return None
    body = json.loads(bytes(value))
    return None if body.get("op") == "delete" else body.get("text")


def catalog_text(value: bytes | None) -> str | None:
    """A catalog-log record as a source's version: the record itself (``None``: deleted)."""
    return None if value is None else bytes(value).decode(errors="replace")


def archive_keyed_changes(where: str | os.PathLike, rows, text_of) -> int:
    """Record log ``rows`` (``partition, offset, ts_ms, key, value``; the key names what
    changed, ``text_of(value)`` its new text or ``None`` when it is gone) as lifetimes in
    the :class:`ProfileHistory` at ``where``; returns the changes recorded. Offsets
    already recorded are skipped, so a replayed batch is harmless."""
    n = 0
    with locked(where):
        history = ProfileHistory(where)
        try:
            seen = history.log_offsets
            for r in sorted(rows, key=lambda r: (int(r["partition"]), int(r["offset"]))):
                partition, offset = int(r["partition"]), int(r["offset"])
                if offset <= seen.get(partition, -1) or r["key"] is None:
                    continue
                pid = bytes(r["key"]).decode(errors="replace")
                n += history.record(pid, text_of(r["value"]), int(r["ts_ms"]))
                seen[partition] = offset
        finally:
            history.close()
    return n


def start(spark, bootstrap_servers: str, directory: str | os.PathLike, checkpoint: str | os.PathLike, *,
          pattern: str = SOURCE_PATTERN, starting_offsets: str = "earliest", available_now: bool = False,
          processing_time: str | None = None, kafka_options: dict[str, str] | None = None):
    """Start the archive writer; returns the ``StreamingQuery``. ``available_now`` archives
    what the topics hold and stops (backfilling an archive, tests); ``kafka_options`` are
    more settings of Spark's Kafka source (``kafka.sasl.*``, say)."""
    from pyspark.sql import functions as F

    directory = str(Path(directory).resolve())
    rows = (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribePattern", pattern)
            .option("startingOffsets", starting_offsets)
            .option("includeHeaders", "true")
            .options(**(kafka_options or {}))
            .load()
            .select("topic", "partition", "offset", "key", "value", "headers",
                    (F.unix_micros("timestamp") / 1000).cast("long").alias("ts_ms")))

    def batch(df, batch_id: int) -> None:
        df.foreachPartition(lambda it: archive_rows(directory, (r.asDict(recursive=True) for r in it)))

    writer = rows.writeStream.foreachBatch(batch).option("checkpointLocation", str(checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time:
        writer = writer.trigger(processingTime=processing_time)
    return writer.queryName("onyx-archive-writer").start()
