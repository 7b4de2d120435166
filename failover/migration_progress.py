"""Lag and time to catch up of a migration's copy, per topic (pure).

From two looks at the flow a moment apart (how far the copy had got, and the source's end),
:func:`topic_progress` says per topic how many records are copied, how many are left, the copy
rate and the estimated time until nothing is left. The estimate is None while the copy does not
gain on the source (the rate of copying is not above the rate of writing). A copy whose lag is
at most :data:`KEEPING_UP_S` seconds of its rate is *keeping up*: the flow commits its progress
about every second, so a topic written all the time never shows a lag of 0 for long.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Partition = tuple[str, int]

#: a lag of at most this many seconds of copying counts as keeping up
KEEPING_UP_S = 2.0


@dataclass(frozen=True)
class TopicProgress:
    topic: str
    copied: int
    lag: int
    records_per_s: float
    eta_s: float | None

    @property
    def keeping_up(self) -> bool:
        return self.lag == 0 or self.lag <= self.records_per_s * KEEPING_UP_S

    def as_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "copied": self.copied,
            "lag": self.lag,
            "records_per_s": round(self.records_per_s, 1),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
            "keeping_up": self.keeping_up,
        }


@dataclass(frozen=True)
class Look:
    """One look at the flow: per partition the next source offset copied (absent: none yet),
    the source's start and end, at ``at_s`` (monotonic seconds)."""

    at_s: float
    replicated: Mapping[Partition, int]
    starts: Mapping[Partition, int]
    ends: Mapping[Partition, int]


def topic_progress(before: Look | None, now: Look) -> list[TopicProgress]:
    """Per topic, in name order; without ``before`` no rate (and no estimate) is known."""
    topics = sorted({topic for topic, _p in now.ends})
    found = []
    for topic in topics:
        parts = [tp for tp in now.ends if tp[0] == topic]
        copied = sum(_copied(now, tp) for tp in parts)
        lag = sum(
            max(0, now.ends[tp] - now.replicated.get(tp, now.starts.get(tp, 0))) for tp in parts
        )
        rate = 0.0
        eta: float | None = None
        if before is not None and now.at_s > before.at_s:
            span = now.at_s - before.at_s
            copied_before = sum(_copied(before, tp) for tp in parts if tp in before.ends)
            lag_before = sum(_lag(before, tp) for tp in parts if tp in before.ends)
            rate = max(0.0, (copied - copied_before) / span)
            gain = (lag_before - lag) / span
            if lag == 0:
                eta = 0.0
            elif gain > 0:
                eta = lag / gain
        elif lag == 0:
            eta = 0.0
        found.append(TopicProgress(topic, copied, lag, rate, eta))
    return found


def _copied(look: Look, tp: Partition) -> int:
    start = look.starts.get(tp, 0)
    return max(0, look.replicated.get(tp, start) - start)


def _lag(look: Look, tp: Partition) -> int:
    return max(0, look.ends[tp] - look.replicated.get(tp, look.starts.get(tp, 0)))
