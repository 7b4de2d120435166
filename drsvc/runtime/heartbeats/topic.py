"""The heartbeats topics: the local one every emitter writes and the copies flows make of it."""

from __future__ import annotations

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import (
    TopicInfo,
    broker_ids,
    create_topic,
    describe_topics,
)
from drsvc.kafka.types import AdminClient

#: A day of heartbeats is plenty to look back at an outage; older ones are of no use.
HEARTBEAT_RETENTION_MS = 24 * 3600 * 1000

#: Most replicas a heartbeats topic asks for; fewer on clusters with fewer brokers.
MAX_REPLICATION_FACTOR = 3


def heartbeat_topic_configs(retention_ms: int = HEARTBEAT_RETENTION_MS) -> dict[str, str]:
    """Configs of every heartbeats topic, local or copied."""
    return {
        "cleanup.policy": "delete",
        "retention.ms": str(retention_ms),
        "message.timestamp.type": "CreateTime",
    }


def ensure_heartbeat_topic(
    admin: AdminClient,
    name: str,
    partitions: int = 1,
    retention_ms: int = HEARTBEAT_RETENTION_MS,
    timeout_s: float = 5.0,
) -> bool:
    """Create heartbeats topic ``name`` unless it exists (return whether it was created), with as
    many replicas as the cluster has brokers, up to three.

    Raises :class:`drsvc.errors.KafkaUnavailableError` when the cluster does not answer.
    """
    replicas = max(1, min(MAX_REPLICATION_FACTOR, len(broker_ids(admin, timeout_s=timeout_s))))
    try:
        return create_topic(
            admin,
            name,
            partitions,
            replication_factor=replicas,
            config=heartbeat_topic_configs(retention_ms),
            timeout_s=timeout_s,
        )
    except TimeoutError as err:
        raise KafkaUnavailableError(
            f"creating topic {name}: no answer within {timeout_s:g}s"
        ) from err


def find_topics(admin: AdminClient, names: list[str], timeout_s: float) -> dict[str, TopicInfo]:
    """Id and partition count of those of ``names`` that exist; a request the cluster does not
    answer in time raises :class:`drsvc.errors.KafkaUnavailableError` like any unavailability."""
    try:
        return describe_topics(admin, names, timeout_s)
    except TimeoutError as err:
        raise KafkaUnavailableError(
            f"describing {', '.join(names)}: no answer within {timeout_s:g}s"
        ) from err
