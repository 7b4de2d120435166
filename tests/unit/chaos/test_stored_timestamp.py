"""The produced history logs the timestamp the broker stores: the one the producer set, unless
the topic stamps records itself. A delivery report is not trusted on a CreateTime topic: for a
retried batch the broker already held, it carries the batch's largest timestamp, typed
LogAppendTime, for each of its records."""

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


def test_a_duplicate_batchs_log_append_time_on_a_create_time_topic_is_not_the_stored_one() -> None:
    assert stored_timestamp(Reported(TIMESTAMP_LOG_APPEND_TIME, 1_260), requested_ms=1_250) == 1_250


def test_a_topic_that_stamps_records_itself_keeps_the_brokers() -> None:
    reported = Reported(TIMESTAMP_LOG_APPEND_TIME, 9_999)
    assert stored_timestamp(reported, requested_ms=1_250, topic_stamps=True) == 9_999
