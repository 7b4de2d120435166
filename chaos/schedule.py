"""A scenario's fault schedule: when each fault starts and how long it lasts (pure).

A schedule is a list of :class:`FaultStep` (start ``at_s`` seconds into the fault phase, a fault
kind from :data:`chaos.nemesis.catalogue.FAULT_KINDS`, its parameters and a bounded duration).
:func:`events` turns it into start and stop events in time order, with a seeded jitter on the
starts so that two seeds hit the system at slightly different moments while one seed always
replays the same moments.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

#: the longest any single fault may last: every nemesis is bounded
MAX_DURATION_S = 120.0


@dataclass(frozen=True)
class FaultStep:
    """One fault: ``kind`` with ``params`` from ``at_s`` for ``duration_s`` seconds."""

    at_s: float
    kind: str
    duration_s: float
    params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.at_s < 0:
            raise ValueError(f"{self.kind}: a fault starts at or after 0 s (got {self.at_s})")
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(
                f"{self.kind}: a fault lasts more than 0 and at most {MAX_DURATION_S:.0f} s "
                f"(got {self.duration_s})"
            )

    @property
    def label(self) -> str:
        target = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind}({target})" if target else self.kind


@dataclass(frozen=True, order=True)
class Event:
    """Start or stop fault number ``index`` of the schedule at ``at_s``."""

    at_s: float
    order: int
    index: int
    action: Literal["start", "stop"]


def events(steps: Sequence[FaultStep], seed: int, jitter_s: float = 0.0) -> list[Event]:
    """The start and stop events of ``steps`` in time order. Each start moves by a seeded
    ``[0, jitter_s]``; the fault still lasts its duration. At the same moment a stop comes
    before a start (heal first)."""
    rng = random.Random(seed)
    out: list[Event] = []
    for index, step in enumerate(steps):
        start = step.at_s + (rng.uniform(0, jitter_s) if jitter_s > 0 else 0.0)
        out.append(Event(round(start, 3), 1, index, "start"))
        out.append(Event(round(start + step.duration_s, 3), 0, index, "stop"))
    return sorted(out)


def span_s(steps: Sequence[FaultStep], jitter_s: float = 0.0) -> float:
    """When the last fault of ``steps`` is healed at the latest."""
    return max((s.at_s + jitter_s + s.duration_s for s in steps), default=0.0)
