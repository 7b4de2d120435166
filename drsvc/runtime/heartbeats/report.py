"""The freshness of every (observer, source) heartbeat pair as one JSON document
(``drsvc heartbeats --once --json`` and the API's ``/v1/clusters``)."""

from __future__ import annotations

from drsvc.runtime.heartbeats.observer import FreshnessKey
from failover.heartbeats import Freshness

__all__ = ["freshness_report"]


def freshness_report(
    freshness: dict[FreshnessKey, Freshness],
    expected: list[FreshnessKey],
    stale_after_s: float,
    watched_s: float,
) -> dict[str, object]:
    """The JSON document ``--once --json`` prints."""
    return {
        "stale_after_s": stale_after_s,
        "watched_s": round(watched_s, 3),
        "freshness": [
            {
                "observer": observer,
                "source": source,
                "state": fresh.state.value,
                "freshness_s": round(fresh.seconds, 3),
                "last_offset": fresh.last_offset,
                "expected": (observer, source) in expected,
            }
            for (observer, source), fresh in sorted(freshness.items())
        ],
    }
