"""The archive writer as a Spark application of its own (what the Helm chart's archive
``SparkApplication`` runs; ``onyx up`` runs the same query in its one Spark application):
:func:`archive.writer.start` with this deployment's Kafka, credentials and folders.

>>> build_parser().parse_args(["--directory", "/a", "--checkpoint", "/c",
...                            "--bootstrap-servers", "k:9092"]).directory
PosixPath('/a')
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from broker import config


def _env_path(name: str) -> Path | None:
    return Path(os.environ[name]) if os.environ.get(name) else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m broker.archive_job",
        description="Archive every source message and profile change of an Onyx overlay (a Spark Structured "
                    "Streaming query over onyx.src.* and onyx.profiles) for time travel.")
    parser.add_argument("--bootstrap-servers", default=os.environ.get("ONYX_KAFKA_BOOTSTRAP"),
                        help="Kafka bootstrap servers (default $ONYX_KAFKA_BOOTSTRAP)")
    parser.add_argument("--directory", type=Path, default=_env_path("ONYX_ARCHIVE_DIR"),
                        help="the archive's folder, shared with the registration service (default $ONYX_ARCHIVE_DIR)")
    parser.add_argument("--checkpoint", type=Path, default=_env_path("ONYX_CHECKPOINT_DIR"),
                        help="the query's checkpoint folder (default $ONYX_CHECKPOINT_DIR)")
    parser.add_argument("--trigger", default=config.ARCHIVE_TRIGGER,
                        help=f"micro-batch interval (default {config.ARCHIVE_TRIGGER!r})")
    parser.add_argument("--stop-with-stdin", action="store_true",
                        help="stop (between batches, as on SIGTERM) when standard input closes: the process that "
                             "started the writer with a pipe there died (`onyx up` uses it, so that a killed overlay "
                             "leaves no writer behind)")
    return parser


def _stop_when_stdin_closes(stop) -> None:
    """Call ``stop`` once standard input reaches its end, from a daemon thread: the
    write end of the pipe closes with the process holding it, however it ended."""
    def wait() -> None:
        # os.read, not sys.stdin: a thread blocked in the buffered reader holds its lock,
        # and the interpreter aborts at exit when it cannot take it.
        while os.read(0, 4096):
            pass
        stop()
    threading.Thread(target=wait, name="onyx-stdin-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("bootstrap_servers", "directory", "checkpoint"):
        if getattr(args, name) is None:
            parser.error(f"--{name.replace('_', '-')} is required (or its environment variable)")
    from archive import writer
    from broker.kafka_auth import spark_options
    from broker.spark.session import build_session

    spark = build_session("onyx-archive-writer")
    query = writer.start(spark, args.bootstrap_servers, args.directory, args.checkpoint,
                         processing_time=args.trigger, kafka_options=spark_options())
    # SIGTERM (`onyx down`, Kubernetes) stops the query between batches: what a batch
    # archived is flushed, the checkpoint says so.
    signal.signal(signal.SIGTERM, lambda *_: query.stop())
    if args.stop_with_stdin:
        _stop_when_stdin_closes(query.stop)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
