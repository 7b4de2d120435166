"""The one clock of drsvc's Kafka and coordination code.

Monotonic time measures every deadline and duration; wall time is only compared with what other
machines wrote (record timestamps, leases). Code takes a :class:`Clock` instead of calling
:mod:`time`, so that unit tests drive it with a fake clock that advances on ``sleep`` and a long
read or a lease runs out in no real time.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time for deadlines, wall time for timestamps, and waiting."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never goes back: for deadlines and durations."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch: only to compare with record timestamps."""
        ...

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch: the unit of Kafka timestamps and leases."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fake clock advances instead)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def time_ms(self) -> int:
        # From nanoseconds, not time() * 1000: no float rounding for a value compared exactly
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
