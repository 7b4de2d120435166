"""Prometheus metrics of the checkpoint stream (created when the service starts, never at import).

Per flow:

* ``drsvc_checkpoint_latency_ms`` (gauge): for the newest checkpoints that carried a new committed
  offset, milliseconds from the start of the previous poll (the last moment the commit was not yet
  seen) to the target's acknowledgement: an upper bound on commit-to-checkpoint latency;
* ``drsvc_checkpoints_emitted_total`` (counter): checkpoints written;
* ``drsvc_checkpoint_cycle_errors_total`` (counter): cycles that failed (and are retried);
* ``drsvc_checkpoint_numbers_as_of_seconds`` (gauge): when the numbers below were computed.

Per flow, group, topic (as the group reads it on the flow's source) and partition:

* ``drsvc_group_would_lose_records``, ``drsvc_group_would_reread_records``: what failing the group
  over right now would lose and read twice (:func:`failover.checkpoints.exposure`);
* ``drsvc_group_translation_exact``: 1 when the translated position is exact, else 0.

Series of groups and partitions that went away are removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from failover.checkpoints import Exposure

__all__ = ["CheckpointMetrics", "PartitionNumbers"]

_PARTITION_LABELS = ("flow", "group", "topic", "partition")


@dataclass(frozen=True)
class PartitionNumbers:
    """The numbers of one group partition in one cycle."""

    group: str
    topic: str
    partition: int
    exposure: Exposure
    exact: bool


class CheckpointMetrics:
    """The metrics above, registered in ``registry`` (the process's default one unless given)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.latency_ms = Gauge(
            "drsvc_checkpoint_latency_ms",
            "Upper bound on milliseconds from a group's commit on the source to its checkpoint "
            "acknowledged on the target, for the newest checkpoints with a new committed offset.",
            ["flow"],
            registry=registry,
        )
        self.emitted = Counter(
            "drsvc_checkpoints_emitted_total",
            "Checkpoints written to the flow's checkpoints topic.",
            ["flow"],
            registry=registry,
        )
        self.cycle_errors = Counter(
            "drsvc_checkpoint_cycle_errors_total",
            "Checkpoint cycles that failed (retried at the next interval).",
            ["flow"],
            registry=registry,
        )
        self.as_of = Gauge(
            "drsvc_checkpoint_numbers_as_of_seconds",
            "Unix time at which the would-lose and would-re-read numbers were computed.",
            ["flow"],
            registry=registry,
        )
        self.would_lose = Gauge(
            "drsvc_group_would_lose_records",
            "Records a failover right now would lose: not consumed by the group and not on the "
            "target yet (offsets; an upper bound on records).",
            _PARTITION_LABELS,
            registry=registry,
        )
        self.would_reread = Gauge(
            "drsvc_group_would_reread_records",
            "Records a failover right now would make the group read twice (offsets; an upper "
            "bound on records).",
            _PARTITION_LABELS,
            registry=registry,
        )
        self.exact = Gauge(
            "drsvc_group_translation_exact",
            "1 when the group's translated position is exact (zero skipped, zero re-read).",
            _PARTITION_LABELS,
            registry=registry,
        )
        self._series: dict[str, set[tuple[str, str, str]]] = {}

    def record_numbers(self, flow: str, rows: Iterable[PartitionNumbers], as_of_s: float) -> None:
        """Set the per-partition numbers of ``flow`` to ``rows``; drop series not among them."""
        seen: set[tuple[str, str, str]] = set()
        for row in rows:
            labels = (row.group, row.topic, str(row.partition))
            seen.add(labels)
            self._set(self.would_lose, flow, labels, row.exposure.would_lose)
            self._set(self.would_reread, flow, labels, row.exposure.would_reread)
            self.exact.labels(flow, *labels).set(1 if row.exact else 0)
        for labels in self._series.get(flow, set()) - seen:
            for gauge in (self.would_lose, self.would_reread, self.exact):
                self._remove(gauge, flow, labels)
        self._series[flow] = seen
        self.as_of.labels(flow).set(as_of_s)

    @classmethod
    def _set(cls, gauge: Gauge, flow: str, labels: tuple[str, str, str], value: int | None) -> None:
        if value is None:
            cls._remove(gauge, flow, labels)
        else:
            gauge.labels(flow, *labels).set(value)

    @staticmethod
    def _remove(gauge: Gauge, flow: str, labels: tuple[str, str, str]) -> None:
        with contextlib.suppress(KeyError):  # never set
            gauge.remove(flow, *labels)
