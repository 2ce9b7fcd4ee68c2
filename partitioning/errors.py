"""The one exception of the partitioning package."""


class PartitioningError(ValueError):
    """A partitioning or placement request that cannot be carried out as asked
    (no partitions, unknown broker, a schema that cannot be read, ...)."""
