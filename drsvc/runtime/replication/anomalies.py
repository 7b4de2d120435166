"""Conditions a replication worker reports loudly but cannot fix itself."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, Message

from drsvc.runtime.replication.lane import Lane, WorkerStats
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.topics import MirroredTopic
from failover.topic_configs import retention_shorter_than

log = logging.getLogger(__name__)


@dataclass
class BackfillAgeCheck:
    """Warns once per topic when copies are older than the remote topic keeps records."""

    target_alias: str
    warned: set[str] = field(default_factory=set)

    def check(self, msg: Message, mirrored_topics: Mapping[str, MirroredTopic]) -> None:
        """Warn (once per topic) when copies would be older than the remote topic's retention:
        the target would delete them again right away. One record per batch is enough."""
        topic = msg.topic()
        if topic is None or topic in self.warned:
            return
        mirrored = mirrored_topics.get(topic)
        ts_type, ts = msg.timestamp()
        if mirrored is None or ts_type == TIMESTAMP_NOT_AVAILABLE:
            return
        age_ms = int(time.time() * 1000) - ts
        if retention_shorter_than(mirrored.configs, age_ms):
            self.warned.add(topic)
            log.warning(
                "copying %s records %.1f h old into %s on %s, whose retention.ms is %s: the target "
                "will delete them soon after they arrive",
                topic,
                age_ms / 3_600_000,
                mirrored.remote_name,
                self.target_alias,
                mirrored.configs.get("retention.ms"),
            )


def watch_for_stalls(
    consumer: Consumer, lanes: list[Lane], now: float, settings: WorkerSettings, stats: WorkerStats
) -> None:
    """Warn when a partition's position stops moving while its log has more records: with
    read_committed that is an open (hung) transaction holding every consumer back."""
    watched = {
        (lane.source.topic, lane.source.partition): lane for lane in lanes if lane.resume_at is None
    }
    if not watched:
        return
    for position in consumer.position([lane.source for lane in watched.values()]):
        lane = watched[(position.topic, position.partition)]
        if position.offset != lane.watched_position:
            lane.watched_position = position.offset
            lane.watched_since = now
            lane.stall_reported = False
            continue
        if lane.stall_reported or now - lane.watched_since < settings.stall_warning_s:
            continue
        _low, high = consumer.get_watermark_offsets(lane.source, cached=True) or (-1, -1)
        if high > position.offset >= 0:
            log.warning(
                "%s-%s on %s has not advanced past offset %d for %.0fs although the log ends "
                "at %d: an open transaction (hung producer?) holds read_committed readers back",
                lane.source.topic,
                lane.source.partition,
                settings.source_alias,
                position.offset,
                now - lane.watched_since,
                high,
            )
            stats.stalled_partitions += 1
            lane.stall_reported = True
