"""The running system: the local Kafka dev cluster, the SparkSession wired to
Kafka, the Spark Structured Streaming broker job with its packet flows and catalog,
the HTTP registration service and the ``onyx`` command line.
"""
