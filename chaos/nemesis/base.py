"""What every nemesis is: a fault with a start and a heal, both idempotent, on a timeline.

A :class:`Nemesis` injects one fault on :meth:`~Nemesis.start` and heals it on
:meth:`~Nemesis.stop`; calling either twice does nothing the second time, and ``stop`` without a
``start`` does nothing at all, so a scenario can heal everything it may have started in a
``finally`` block. Each start and heal is recorded on a :class:`Timeline` as a
:class:`~drsvc.verify.histories.FaultEvent` (name, target, start, end, detail), which the
scenario writes into the ``faults`` history table and its report draws.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod

from drsvc.verify.histories import FaultEvent


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Timeline:
    """Fault events of one scenario, appended from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[FaultEvent] = []

    def open(self, name: str, target: str, detail: str) -> int:
        with self._lock:
            self._events.append(FaultEvent(name, target, now_ms(), None, detail))
            return len(self._events) - 1

    def close(self, index: int, detail: str | None = None) -> None:
        with self._lock:
            event = self._events[index]
            self._events[index] = event._replace(
                end_ms=now_ms(), detail=detail if detail is not None else event.detail
            )

    def add(self, name: str, target: str, start_ms: int, end_ms: int | None, detail: str) -> None:
        """A finished event known from elsewhere (a failover's steps, say)."""
        with self._lock:
            self._events.append(FaultEvent(name, target, start_ms, end_ms, detail))

    @property
    def events(self) -> list[FaultEvent]:
        with self._lock:
            return list(self._events)


class Nemesis(ABC):
    """One fault of bounded duration (the schedule bounds it; :meth:`stop` heals it)."""

    #: the fault kind, as schedules name it
    kind: str = "nemesis"

    def __init__(self, timeline: Timeline, target: str) -> None:
        self.timeline = timeline
        self.target = target
        self._lock = threading.Lock()
        self._event: int | None = None
        self._healed = False

    @property
    def active(self) -> bool:
        return self._event is not None and not self._healed

    def start(self) -> None:
        """Inject the fault (once; a second call does nothing)."""
        with self._lock:
            if self._event is not None:
                return
            detail = self.inject()
            self._event = self.timeline.open(self.kind, self.target, detail)

    def stop(self) -> None:
        """Heal the fault (once, and only if it was injected)."""
        with self._lock:
            if self._event is None or self._healed:
                return
            self._healed = True
            detail = self.heal()
            self.timeline.close(self._event, detail)

    @abstractmethod
    def inject(self) -> str:
        """Cause the fault; returns a line saying what was done."""

    @abstractmethod
    def heal(self) -> str | None:
        """Undo the fault or wait until the system undid it; a line to replace the detail."""
