"""Spark as the brokers run it: the SparkSession wired to Kafka without any download
(``session.py``, the connector jars fetched by ``make jvm``, quiet logs from
``log4j2.properties``, checkpoints under ``.run/``) and the Python worker daemon that
spares every task a re-read of ``pyspark.zip`` (``daemon.py``, run by PySpark as
``spark.python.daemon.module``, so this package must stay cheap to import).
"""
