"""Prometheus metrics of heartbeat emitters and observers.

They are created on first use, once per registry (the process's default registry unless a test
passes its own), so that several emitters and observers in one process share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge


@dataclass(frozen=True)
class HeartbeatMetrics:
    """The collectors; labels: ``cluster`` (where the heartbeats are written or observed) and
    ``source`` (whose heartbeats they are)."""

    freshness_seconds: Gauge
    last_offset: Gauge
    emitted: Counter
    emit_failures: Counter


@cache
def heartbeat_metrics(registry: CollectorRegistry = REGISTRY) -> HeartbeatMetrics:
    """The heartbeat collectors of ``registry``, registered there on the first call."""
    return HeartbeatMetrics(
        freshness_seconds=Gauge(
            "drsvc_heartbeat_freshness_seconds",
            "Seconds since the heartbeat offset of source, observed on cluster, last advanced"
            " (observer's monotonic clock).",
            ["cluster", "source"],
            registry=registry,
        ),
        last_offset=Gauge(
            "drsvc_heartbeat_last_offset",
            "Offset of the last heartbeat of source seen on cluster.",
            ["cluster", "source"],
            registry=registry,
        ),
        emitted=Counter(
            "drsvc_heartbeats_emitted",
            "Heartbeats written to cluster and acknowledged by it.",
            ["cluster"],
            registry=registry,
        ),
        emit_failures=Counter(
            "drsvc_heartbeat_emit_failures",
            "Heartbeats that could not be written to cluster (not delivered, or not sent).",
            ["cluster"],
            registry=registry,
        ),
    )
