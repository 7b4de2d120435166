"""Conditions a replication worker reports loudly but cannot fix itself (a stalled partition is
the lane state machine's: :class:`failover.partition_state.ReportStall`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from drsvc.kafka.clock import Clock
from drsvc.kafka.types import TIMESTAMP_NOT_AVAILABLE, Message
from drsvc.runtime.replication.topics import MirroredTopic
from failover.topic_configs import retention_shorter_than

log = logging.getLogger(__name__)


@dataclass
class BackfillAgeCheck:
    """Warns once per topic when copies are older than the remote topic keeps records."""

    target_alias: str
    #: wall time, compared with the records' timestamps
    clock: Clock
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
        age_ms = self.clock.time_ms() - ts
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
