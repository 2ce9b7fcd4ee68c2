"""Errors of the running system that a user can act on."""


class SetupError(RuntimeError):
    """The machine is not ready: Java or the fetched jars are missing, a port is taken."""


class KafkaStartError(RuntimeError):
    """The local Kafka broker did not come up; the message quotes its log."""


class SparkClusterError(RuntimeError):
    """The local Spark standalone cluster, or an application submitted to it, did not come up
    or stopped; the message names the log to read."""
