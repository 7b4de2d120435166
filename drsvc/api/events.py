"""``/v1/events``: the steps of every failover of the namespace, in the order they happened.

Events come from the failover records in Consul (whoever ran the failover: this API, the CLI,
the controller), so nothing is missed when the API restarts; their ids are this process's
sequence numbers, handed out as the API first sees each step. A client long-polls with the
last id it got.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from failover.failover_plan import FailoverRecord

__all__ = ["Event", "EventLog"]


@dataclass(frozen=True)
class Event:
    id: int
    at_ms: int
    failover_id: str
    app: str
    step: str
    outcome: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at_ms": self.at_ms,
            "failover_id": self.failover_id,
            "app": self.app,
            "step": self.step,
            "outcome": self.outcome,
            "detail": self.detail,
        }


class EventLog:
    """The most recent ``capacity`` events, numbered as first seen."""

    def __init__(self, capacity: int = 1000) -> None:
        self._events: deque[Event] = deque(maxlen=capacity)
        self._seen: dict[str, int] = {}  # failover id -> events of it seen
        self._next_id = 1
        self._lock = threading.Lock()

    def note(self, records: Iterable[FailoverRecord]) -> None:
        """Take the steps of ``records`` not seen yet."""
        fresh: list[tuple[int, str, str, Any]] = []
        with self._lock:
            for record in records:
                fid = record.plan.failover_id
                known = self._seen.get(fid, 0)
                for event in record.events[known:]:
                    fresh.append((event.at_ms, fid, record.plan.app, event))
                self._seen[fid] = max(known, len(record.events))
            for at_ms, fid, app, event in sorted(fresh, key=lambda f: (f[0], f[1])):
                self._events.append(
                    Event(
                        self._next_id,
                        at_ms,
                        fid,
                        app,
                        event.step.value,
                        event.outcome.value,
                        event.detail,
                    )
                )
                self._next_id += 1

    def after(self, last_id: int) -> list[Event]:
        with self._lock:
            return [e for e in self._events if e.id > last_id]

    def wait(
        self,
        last_id: int,
        wait_s: float,
        refresh: Callable[[], None],
        sleep: Callable[[float], None],
        poll_s: float = 0.5,
    ) -> list[Event]:
        """Events after ``last_id``, waiting up to ``wait_s`` (refreshing every ``poll_s``) for
        the first one."""
        remaining = wait_s
        while True:
            refresh()
            found = self.after(last_id)
            if found or remaining <= 0:
                return found
            step = min(poll_s, remaining)
            sleep(step)
            remaining -= step
