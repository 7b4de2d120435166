"""librdkafka lines of heartbeat clients: once a minute per kind, with a count of the rest."""

from __future__ import annotations

import logging

import pytest

from drsvc.runtime.heartbeats.client_logs import CLIENT_LOGGER, RepeatFilter, kafka_client_logger


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def line(ms: int, port: int = 9092) -> logging.LogRecord:
    return logging.LogRecord(
        "drsvc.kafka.heartbeats",
        logging.ERROR,
        __file__,
        1,
        "FAIL [%s] 127.0.0.1:%d/bootstrap: Connection refused (after %dms in state CONNECT)",
        ("rdkafka#consumer-1", port, ms),
        None,
    )


def test_repeats_are_held_back_and_counted() -> None:
    clock = Clock()
    repeats = RepeatFilter(window_s=60.0, clock=clock)
    assert repeats.filter(line(0))
    passed = 0
    for ms in range(1, 100):
        clock.now += 0.05
        passed += repeats.filter(line(ms))
    assert passed == 0
    clock.now = 61.0
    record = line(3)
    assert repeats.filter(record)
    assert record.getMessage().endswith(
        "(after 3ms in state CONNECT) (99 more like it in the last 60s)"
    )


def test_different_lines_pass_on_their_own() -> None:
    repeats = RepeatFilter(window_s=60.0, clock=Clock())
    other = logging.LogRecord("x", logging.ERROR, __file__, 1, "SSL handshake failed", None, None)
    assert repeats.filter(line(0))
    assert repeats.filter(other)
    assert not repeats.filter(line(5, port=9093))  # only numbers differ: the same kind


def test_the_client_logger_gets_one_filter(caplog: pytest.LogCaptureFixture) -> None:
    logger = kafka_client_logger()
    assert kafka_client_logger() is logger
    assert logger.name == CLIENT_LOGGER
    assert sum(isinstance(f, RepeatFilter) for f in logger.filters) == 1
