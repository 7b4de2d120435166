"""A flow's checkpoints topic on its target: created compacted, read back to its end.

The topic is its own changelog: compaction keeps the newest checkpoint of every (group, topic,
partition), so reading it from the start to its end gives the state a restarted agent continues
from (:func:`read_checkpoints`), and it is what operators and failover read
(:func:`read_flow_checkpoints`).

One partition by default: the whole state is one ordered log and every writer, whatever its
partitioner, writes to the same place. A record that is not a checkpoint this build can read stops
the read with a :class:`~drsvc.errors.PermanentError` naming it: emitting on top of state that was
only partly understood could move a checkpoint backwards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drsvc.errors import PermanentError
from drsvc.kafka.admin import create_topic
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from failover import naming
from failover.checkpoints import (
    Checkpoint,
    CheckpointFormatError,
    CheckpointKey,
    decode_key,
    decode_value,
)

__all__ = [
    "CHECKPOINT_TOPIC_CONFIGS",
    "CheckpointsRead",
    "checkpoint_as_dict",
    "ensure_checkpoints_topic",
    "read_checkpoints",
]

log = logging.getLogger(__name__)

CHECKPOINT_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    # Old values of a key are useless once a newer one exists; let the cleaner act soon.
    "min.cleanable.dirty.ratio": "0.1",
    "segment.ms": str(6 * 3600 * 1000),
}


def ensure_checkpoints_topic(
    client_config: Mapping[str, str],
    topic: str,
    *,
    cluster: str,
    timeout_s: float = 30.0,
    clients: KafkaClients | None = None,
) -> bool:
    """Create ``topic`` (compacted, one partition) on ``cluster`` unless it exists, through the
    admin client of ``clients`` (built from ``client_config`` when None). Errors name the
    cluster.

    Returns True when it was created now.
    """
    if clients is None:
        clients = KafkaClients.for_configs({cluster: client_config})
    created = create_topic(
        clients.admin(cluster),
        topic,
        partitions=1,
        config=CHECKPOINT_TOPIC_CONFIGS,
        timeout_s=timeout_s,
        cluster=cluster,
    )
    if created:
        log.info("created checkpoints topic %s on %s (compacted)", topic, cluster)
    return created


@dataclass
class CheckpointsRead:
    """The newest checkpoint of every key in a checkpoints topic, and what the read saw."""

    cluster: str
    topic: str
    checkpoints: dict[CheckpointKey, Checkpoint] = field(default_factory=dict)
    exists: bool = True
    records: int = 0
    #: per partition of the topic, the offset the read stopped at (its end when it started)
    ends: dict[int, int] = field(default_factory=dict)

    def add_record(
        self, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        """Apply one record (in topic order): a checkpoint, or a tombstone that deletes its key."""
        self.records += 1
        where = f"record {offset} of {self.topic}-{partition} on {self.cluster}"
        if key is None:
            raise PermanentError(f"{where} has no key: it is not a checkpoint")
        try:
            decoded_key = decode_key(key)
            if value is None:
                self.checkpoints.pop(decoded_key, None)
                return
            self.checkpoints[decoded_key] = decode_value(value)
        except CheckpointFormatError as err:
            raise PermanentError(
                f"{where} is not a checkpoint this build can read ({err}); nothing is emitted on "
                "top of state that was only partly read"
            ) from err


def read_checkpoints(
    client_config: Mapping[str, str],
    topic: str,
    *,
    cluster: str,
    timeout_s: float = 60.0,
    clients: KafkaClients | None = None,
) -> CheckpointsRead:
    """Read ``topic`` on ``cluster`` from its start to the end it has now (blocking),
    ``read_committed``, through a reader of ``clients`` (built from ``client_config`` when
    None).

    ``timeout_s`` is the read's stall period: it gives up, with a
    :class:`~drsvc.errors.KafkaUnavailableError` naming the topic, the cluster and where each
    partition stopped, only after that long without progress. A long topic (a flow with many
    groups and partitions, compaction behind) is read however long it takes, and says how far
    it is while it does: a stream's start or a failover must not fail because the state is big.
    """
    result = CheckpointsRead(cluster=cluster, topic=topic)
    if clients is None:
        clients = KafkaClients.for_configs({cluster: client_config})
    with clients.reader(
        cluster,
        topic,
        what="checkpoints topic",
        group=naming.CHECKPOINTS_READER_GROUP,  # assigned: never joined nor committed
        committed=True,
        limits=ReadLimits(stall_s=timeout_s),
    ) as reader:
        ends = reader.each_record_to_end(result.add_record)
    if ends is None:
        result.exists = False
    else:
        result.ends = ends
    return result


def checkpoint_as_dict(key: CheckpointKey, checkpoint: Checkpoint) -> dict[str, Any]:
    """One checkpoint as JSON-ready fields (``drsvc checkpoints --once --json``)."""
    return {
        "group": key.group,
        "topic": key.topic,
        "partition": key.partition,
        "source_topic": checkpoint.source_topic,
        "source_offset": checkpoint.source_offset,
        "target_offset": checkpoint.target_offset,
        "exact": checkpoint.exact,
        "reason": checkpoint.reason,
        "pending": checkpoint.pending,
        "direction": checkpoint.direction,
        "metadata": checkpoint.metadata,
        "time_ms": checkpoint.time_ms,
    }
