"""The produced history logs the timestamp the broker stores: the one the producer set, unless
the topic stamps records itself (a delivery report's CreateTime is not trusted: after a retried
batch librdkafka reported the batch's last timestamp for each of its records)."""

from __future__ import annotations

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

from chaos.workload.producer import stored_timestamp


class Reported:
    def __init__(self, kind: int, value: int) -> None:
        self._timestamp = (kind, value)

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp


def test_create_time_is_the_one_the_producer_set() -> None:
    assert stored_timestamp(Reported(TIMESTAMP_CREATE_TIME, 1_253), requested_ms=1_250) == 1_250


def test_log_append_time_is_the_brokers() -> None:
    assert stored_timestamp(Reported(TIMESTAMP_LOG_APPEND_TIME, 9_999), requested_ms=1_250) == 9_999
