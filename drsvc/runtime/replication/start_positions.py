"""Where the lanes a worker is given start copying (both delivery modes ask it).

Each partition starts at its committed progress (the source group's at least once, the slot's
exactly once), clamped to the log start (records deleted before they were copied are counted
and reported), else where the flow starts (earliest, latest, a timestamp), and never below the
control document's ``skip_below`` floor: see :func:`failover.partition_state.start_position`.
"""

from __future__ import annotations

import logging

from drsvc.kafka.types import Consumer, TopicPartition
from drsvc.runtime.replication.control import ControlFollower
from drsvc.runtime.replication.metrics import WorkerStats
from drsvc.runtime.replication.settings import WorkerSettings
from failover.partition_state import (
    CommittedProgress,
    FlowStart,
    StartPosition,
    start_position,
    timestamp_to_look_up,
)

log = logging.getLogger(__name__)


class StartPositions:
    """Start positions of one flow's partitions (see the module docstring)."""

    def __init__(
        self,
        settings: WorkerSettings,
        flow_start: FlowStart,
        control: ControlFollower,
        stats: WorkerStats,
    ) -> None:
        self._settings = settings
        self._flow_start = flow_start
        self._control = control
        self._stats = stats

    def of(
        self, consumer: Consumer, wanted: list[tuple[str, int, CommittedProgress | None]]
    ) -> dict[tuple[str, int], StartPosition]:
        """Where to start each ``(topic, partition, committed progress)``, asking the source
        ``consumer`` for the logs' ends and for offsets by timestamp."""
        # Floors of the control document apply from the first record: read it first.
        self._control.refresh()
        control = self._control.control
        marks: dict[tuple[str, int], tuple[int, int]] = {}
        lookups: list[TopicPartition] = []
        for topic, partition, committed in wanted:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
            marks[(topic, partition)] = (low, high)
            timestamp = timestamp_to_look_up(committed, self._flow_start)
            if timestamp is not None:
                lookups.append(TopicPartition(topic, partition, timestamp))
        found: dict[tuple[str, int], int] = {}
        if lookups:
            for tp in consumer.offsets_for_times(lookups, timeout=30):
                found[(tp.topic, tp.partition)] = tp.offset
        starts = {}
        for topic, partition, committed in wanted:
            key = (topic, partition)
            low, high = marks[key]
            floor = control.floor(topic, partition)
            start = start_position(
                committed, low, high, self._flow_start, found.get(key), floor=floor
            )
            if floor is not None and start.offset == floor:
                log.warning(
                    "%s-%s starts at %d: the flow's control document says to copy nothing "
                    "below it (skip_below)",
                    topic,
                    partition,
                    floor,
                )
            if start.lost_to_retention:
                self._report_lost(topic, partition, start.lost_to_retention, low)
            starts[key] = start
        return starts

    def _report_lost(self, topic: str, partition: int, lost: int, low: int) -> None:
        s = self._settings
        self._stats.records_lost_to_retention += lost
        log.error(
            "%d record(s) of %s-%s were deleted by retention on %s before they were copied "
            "(progress %d, log starts at %d); they are missing on %s",
            lost,
            topic,
            partition,
            s.source_alias,
            low - lost,
            low,
            s.target_alias,
        )
