"""``/v1/events``: the steps of every failover of the namespace, in the order they happened.

Events come from the failover records in Consul (whoever ran the failover: this API, the CLI,
the controller). An event's id is derived from its record: the step's time, the failover id and
the step's index in the record, as ``<at_ms, 13 digits>-<failover id>-<index, 4 digits>``. Ids
sort as strings in the order the steps happened, every API process that reads the same records
gives the same ids, and a client's cursor (the last id it got) stays good across a restart of
the API and between replicas. ``0`` is the cursor before every event.

A step becomes visible in Consul a moment after the time it records, and two executors' clocks
may differ a little: an event is handed out only once it is ``settle_ms`` old, so that one
written a moment late still sorts after every cursor already handed out.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from failover.failover_plan import FailoverRecord

__all__ = ["EVENT_CURSOR", "START", "Event", "EventLog", "event_id"]

#: the cursor before every event
START = "0"
#: what ``after`` may be: the start, or an id this API handed out
EVENT_CURSOR = re.compile(r"^(0|\d{13}-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}-\d{4})$")
#: how old an event must be before it is handed out (see the module's docstring)
DEFAULT_SETTLE_MS = 2000


def event_id(at_ms: int, failover_id: str, index: int) -> str:
    """The id of step ``index`` of a failover's record, recorded at ``at_ms``."""
    return f"{at_ms:013d}-{failover_id}-{index:04d}"


@dataclass(frozen=True)
class Event:
    id: str
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
    """The most recent ``capacity`` events, kept in id order."""

    def __init__(self, capacity: int = 1000, settle_ms: int = DEFAULT_SETTLE_MS) -> None:
        self._capacity = capacity
        self._settle_ms = settle_ms
        self._ids: list[str] = []  # sorted
        self._events: dict[str, Event] = {}
        self._lock = threading.Lock()

    def note(self, records: Iterable[FailoverRecord]) -> None:
        """Take the steps of ``records`` not seen yet."""
        with self._lock:
            for record in records:
                fid = record.plan.failover_id
                for index, step in enumerate(record.events):
                    eid = event_id(step.at_ms, fid, index)
                    if eid in self._events:
                        continue
                    self._events[eid] = Event(
                        eid,
                        step.at_ms,
                        fid,
                        record.plan.app,
                        step.step.value,
                        step.outcome.value,
                        step.detail,
                    )
                    insort(self._ids, eid)
            while len(self._ids) > self._capacity:
                del self._events[self._ids.pop(0)]

    def after(self, cursor: str, now_ms: int) -> list[Event]:
        """The events after ``cursor`` that are at least the settle time old at ``now_ms``."""
        with self._lock:
            start = 0 if cursor == START else bisect_right(self._ids, cursor)
            settled = now_ms - self._settle_ms
            found = []
            for eid in self._ids[start:]:
                event = self._events[eid]
                if event.at_ms > settled:
                    # ids sort by time first: this one and every later one are too fresh
                    break
                found.append(event)
            return found
