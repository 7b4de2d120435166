"""librdkafka settings of a replication worker's source consumer and target producer."""

from __future__ import annotations

from typing import Any

from drsvc.runtime.replication.settings import WorkerSettings
from failover import naming


def consumer_config(s: WorkerSettings) -> dict[str, Any]:
    """The source consumer: read_committed, manual commits, never a silent offset reset."""
    config: dict[str, Any] = dict(s.source_client)
    config.update(
        {
            "group.id": s.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            # Never jump silently: a position deleted by retention is reported and handled.
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
            "partition.assignment.strategy": "roundrobin",
            # A worker that died (kill -9, lost machine) gives its partitions up in seconds, and
            # a restarted one gets them back as fast (librdkafka's default is 45 s).
            "session.timeout.ms": s.membership_session_timeout_ms,
            "heartbeat.interval.ms": max(500, s.membership_session_timeout_ms // 10),
            "topic.metadata.refresh.interval.ms": int(s.refresh_interval_s * 1000),
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": s.fetch_queue_kbytes,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
            "client.id": naming.flow_client_id(s.flow_id),
            "log_level": 4,
        }
    )
    return config


def producer_config(s: WorkerSettings) -> dict[str, Any]:
    """The target producer: idempotent, acks=all, bounded queues."""
    config: dict[str, Any] = dict(s.target_client)
    config.update(
        {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": s.linger_ms,
            "batch.size": 1024 * 1024,
            "batch.num.messages": 10000,
            "compression.type": s.compression,
            "queue.buffering.max.messages": s.producer_queue_messages,
            "queue.buffering.max.kbytes": s.producer_queue_kbytes,
            "message.timeout.ms": s.message_timeout_ms,
            # The topic's max.message.bytes on the target decides what fits, not the client.
            "message.max.bytes": s.max_request_bytes,
            # Learn about grown remote topics quickly (the default is five minutes).
            "topic.metadata.refresh.interval.ms": int(s.refresh_interval_s * 1000),
            "client.id": naming.flow_client_id(s.flow_id),
            "log_level": 4,
        }
    )
    return config
