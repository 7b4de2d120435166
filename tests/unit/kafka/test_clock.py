"""The port's one clock: the system clock reads the machine's clocks, and it can stand in for
the other clock the runtime declares today (the failover executor's)."""

from __future__ import annotations

import time

from drsvc.kafka.clock import Clock, SystemClock
from drsvc.runtime.failover import executor


def _executor_reading(clock: executor.Clock) -> tuple[int, float]:
    clock.sleep(0)
    return clock.time_ms(), clock.monotonic()


def test_the_system_clock_is_a_clock_for_the_port_and_the_executors_protocol() -> None:
    # The annotations are the check (the protocols are structural): a type checker refuses the
    # call below if SystemClock lacks a method the executor's protocol needs.
    clock: Clock = SystemClock()
    monotonic, wall = clock.monotonic(), clock.time()
    wall_ms, later = _executor_reading(clock)
    assert later >= monotonic
    assert wall_ms >= int(wall * 1000) - 1


def test_monotonic_is_the_machines_monotonic_clock() -> None:
    clock = SystemClock()
    before = time.monotonic()
    now = clock.monotonic()
    after = time.monotonic()
    assert before <= now <= after


def test_time_is_wall_seconds_and_time_ms_the_same_in_milliseconds() -> None:
    clock = SystemClock()
    before_ns = time.time_ns()
    seconds = clock.time()
    millis = clock.time_ms()
    after_ns = time.time_ns()
    assert before_ns / 1e9 - 0.001 <= seconds <= after_ns / 1e9 + 0.001
    assert before_ns // 1_000_000 <= millis <= after_ns // 1_000_000
    assert isinstance(millis, int)


def test_sleep_waits_at_least_as_long_as_asked() -> None:
    clock = SystemClock()
    started = time.monotonic()
    clock.sleep(0.02)
    assert time.monotonic() - started >= 0.02
