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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from drsvc.errors import KafkaUnavailableError, PermanentError
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.runtime.translation.sync_reader import QUIET, topic_bounds
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
    client_config: Mapping[str, str], topic: str, *, cluster: str, timeout_s: float = 30.0
) -> bool:
    """Create ``topic`` (compacted, one partition) on ``cluster`` unless it exists.

    Returns True when it was created now.
    """
    admin = admin_client(client_config["bootstrap.servers"], {**client_config, **QUIET})
    try:
        created = create_topic(
            admin, topic, partitions=1, config=CHECKPOINT_TOPIC_CONFIGS, timeout_s=timeout_s
        )
    except KafkaUnavailableError as err:
        raise KafkaUnavailableError(f"cluster '{cluster}': {err}") from err
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
) -> CheckpointsRead:
    """Read ``topic`` on ``cluster`` from its start to the end it has now (blocking)."""
    result = CheckpointsRead(cluster=cluster, topic=topic)
    consumer = Consumer(
        {
            **client_config,
            "group.id": naming.CHECKPOINTS_READER_GROUP,  # assigned: never joined nor committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "socket.connection.setup.timeout.ms": 3000,
            **QUIET,
        }
    )
    where = f"checkpoints topic {topic} on {cluster}"
    try:
        bounds = topic_bounds(consumer, topic, where, timeout_s)
        if bounds is None:
            result.exists = False
            return result
        result.ends = {p: low for p, (low, _high) in bounds.items()}
        todo = {p: high for p, (low, high) in bounds.items() if high > low}
        if todo:
            consumer.assign([KafkaPartition(topic, p, bounds[p][0]) for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo:
            if time.monotonic() > deadline:
                behind = ", ".join(
                    f"partition {p} at {result.ends[p]} of {end}" for p, end in todo.items()
                )
                raise KafkaUnavailableError(
                    f"{where}: not read to its end within {timeout_s:.0f}s ({behind})"
                )
            for msg in consumer.consume(10_000, 0.5):
                partition, offset = msg.partition(), msg.offset()
                if partition is None or offset is None or partition not in todo:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        result.ends[partition] = offset
                        todo.pop(partition)
                    elif error.fatal():
                        raise KafkaUnavailableError(f"{where}: {error.str()}")
                    continue
                if offset >= todo[partition]:
                    todo.pop(partition)
                    continue
                result.add_record(partition, offset, msg.key(), msg.value())
                result.ends[partition] = offset + 1
                if offset + 1 >= todo[partition]:
                    todo.pop(partition)
    except KafkaException as err:
        raise KafkaUnavailableError(f"{where}: {err.args[0].str()}") from err
    finally:
        consumer.close()
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
