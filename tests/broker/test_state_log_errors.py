"""Which Kafka errors the state-log reader waits out (broker.control.state_log)."""

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from broker.control.state_log import LogReader


class _Consumer:
    """A consumer whose first ListOffsets fails as librdkafka fails it for a partition its
    metadata does not hold yet."""

    def __init__(self, error: int) -> None:
        self.error, self.calls = error, 0

    def offsets_for_times(self, asked, timeout):
        self.calls += 1
        if self.calls == 1:
            raise KafkaException(KafkaError(self.error))
        return [TopicPartition(tp.topic, 0, 5) for tp in asked]


def _reader(consumer) -> LogReader:
    reader = LogReader.__new__(LogReader)  # no Kafka: the consumer is the fake
    reader.consumer = consumer
    return reader


def test_a_partition_the_client_does_not_know_yet_is_waited_out():
    """Regression (CI, test_distributed_failures): on a 3-node Kafka a broker application
    read the ends of the other brokers' state logs while one of them was being created;
    librdkafka said ``_UNKNOWN_PARTITION`` and the application ended."""
    consumer = _Consumer(KafkaError._UNKNOWN_PARTITION)
    assert _reader(consumer).ends(["b1", "b2"]) == {"b1": 5, "b2": 5} and consumer.calls == 2


def test_an_error_that_stays_is_raised():
    consumer = _Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    try:
        _reader(consumer).ends(["b1"])
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    else:
        raise AssertionError("an authorization error was waited out")
