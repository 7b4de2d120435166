"""The real times of a failover's steps when its executor's wall clock was stepped (pure).

A failover record holds the times its executor's clock gave. A scenario that steps that clock
forward (``step-clock``) knows when it did and by how much (a :class:`ClockStep`); the histories
must hold when things really happened, since the checks compare them with the times of the
clients and the brokers. An event the executor recorded after the step reads at least
``offset_ms`` past the step's real time (its clock ran that far ahead from then on), one
recorded before reads no later than it: only forward steps are told apart this way, and only
those are made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClockStep:
    """The executor of ``failover_id`` read its wall clock ``offset_ms`` (> 0) ahead of real
    time from ``at_ms`` (real time) on."""

    failover_id: str
    at_ms: int
    offset_ms: int

    def __post_init__(self) -> None:
        if self.offset_ms <= 0:
            raise ValueError(f"only forward clock steps are told apart (got {self.offset_ms} ms)")


def real_times(record: Mapping[str, Any], steps: Sequence[ClockStep]) -> dict[str, Any]:
    """``record`` (a failover record document) with each event's ``at_ms`` in real time."""
    mine = [s for s in steps if s.failover_id == record["id"]]
    if not mine:
        return dict(record)
    events = []
    for event in record["events"]:
        at = int(event["at_ms"])
        for step in mine:
            if at >= step.at_ms + step.offset_ms:
                at -= step.offset_ms
        events.append({**event, "at_ms": at})
    return {**record, "events": events}
