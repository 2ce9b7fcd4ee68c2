"""The SparkSession every broker runs in, wired to Kafka without any download.

The Kafka connector jars come from ``deploy/jvm/lib/spark-kafka`` (fetched by
``make jvm``) through ``spark.jars``; logs are quiet; checkpoints, local dirs and the
warehouse live under ``.run/``.

>>> spark = build_session("onyx-demo")          # doctest: +SKIP
>>> spark.readStream.format("kafka")            # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

from broker import config
from broker.jvm import find_java, jar_dir

LOG4J2_FILE = Path(__file__).with_name("log4j2.properties")


def checkpoint_root() -> Path:
    """Default parent folder of streaming checkpoints (``.run/checkpoints``)."""
    return config.RUN_DIR / "checkpoints"


def connector_jars() -> list[str]:
    """Absolute paths of the Spark Kafka connector and its runtime dependencies."""
    return sorted(str(p) for p in jar_dir("spark-kafka").glob("*.jar"))


def build_session(
    app_name: str = "onyx",
    master: str | None = None,
    ui: bool = False,
    conf: Mapping[str, str] | None = None,
):
    """Create (or return the running) SparkSession configured for Onyx brokers.

    ``master`` defaults to ``config.SPARK_MASTER`` (``local[2]``); ``ui`` turns the
    Spark web UI on; ``conf`` adds or overrides Spark settings.
    """
    java = find_java()
    os.environ.setdefault("JAVA_HOME", str(Path(java).resolve().parent.parent))
    # Python workers must run this interpreter (the venv), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    run = config.RUN_DIR
    (run / "spark-local").mkdir(parents=True, exist_ok=True)
    log_opt = f"-Dlog4j2.configurationFile=file:{LOG4J2_FILE}"
    settings = {
        "spark.master": master or config.SPARK_MASTER,
        "spark.app.name": app_name,
        "spark.jars": ",".join(connector_jars()),
        "spark.jars.ivy": str(run / "ivy"),  # never used for downloads; keeps ~/.ivy2 untouched
        "spark.driver.memory": config.SPARK_DRIVER_MEMORY,
        "spark.driver.extraJavaOptions": log_opt,
        "spark.executor.extraJavaOptions": log_opt,
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(run / "spark-local"),
        "spark.sql.adaptive.enabled": "false",  # brokers are streaming queries; AQE does not apply
        "spark.sql.warehouse.dir": str(run / "spark-warehouse"),
        "spark.sql.streaming.checkpointLocation": str(checkpoint_root()),
        # Every micro-batch writes an offset and a commit file. Through Hadoop's FileContext
        # and checksummed local file system that took 40-90 ms each here; through the
        # FileSystem API on the raw local file system (no .crc side files), about 10 ms.
        # The files are still written to a temporary name and renamed (atomic locally).
        "spark.sql.streaming.checkpointFileManagerClass":
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        # PySpark's daemon re-reads pyspark.zip's directory before every task (0.1-1 s
        # a task here); ours does not (see broker/spark/daemon.py).
        "spark.python.daemon.module": "broker.spark.daemon",
        "spark.sql.streaming.pollingDelay": f"{config.BROKER_POLL_MS}ms",
    }
    settings.update(conf or {})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
