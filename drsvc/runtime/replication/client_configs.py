"""librdkafka settings of every client of a replication worker, both delivery modes.

Each function gives a role's own settings only (an overlay): where the cluster is and how to
authenticate to it are merged by the port's client factory
(:meth:`drsvc.kafka.clients.KafkaClients.config`), which refuses an overlay that sets them.
"""

from __future__ import annotations

from typing import Any

from drsvc.runtime.replication.settings import WorkerSettings
from failover import naming

#: how soon the source consumer fetches again once its prefetch queue is back under its limits
FETCH_QUEUE_BACKOFF_MS = 10


def consumer_config(s: WorkerSettings) -> dict[str, Any]:
    """The source consumer: read_committed, manual commits, never a silent offset reset."""
    return {
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
        # Let the broker gather 16 KiB (or 10 ms) per fetch instead of answering each new
        # record at once: at 10,000 records/s on loopback two workers otherwise sent fetches
        # nonstop, the source broker's own acknowledgements slowed, and p99 reached seconds
        # (bench/README.md). Costs an idle worker 100 empty fetches/s per broker.
        "fetch.min.bytes": 16 * 1024,
        "fetch.wait.max.ms": 10,
        "queued.max.messages.kbytes": s.fetch_queue_kbytes,
        # What one fetch response may hold per partition. Every queued record costs librdkafka
        # about 600 bytes on top of its payload, so at 100-byte records a 4 MiB slice of each
        # of 12 partitions held 440,000 records and peaked a worker at 360 MiB; 1 MiB (the
        # Kafka default) keeps it near 200 MiB. The rate stayed within the runs' spread, at
        # 1 KB with medians 5-10 % lower (bench/README.md). Larger records still arrive whole.
        "max.partition.fetch.bytes": 1024 * 1024,
        # Once queued.min.messages (100,000) records or queued.max.messages.kbytes wait in
        # the consumer's queue, librdkafka stops fetching and looks again only after this
        # backoff, 1 s by default. Two workers copying 100-byte records empty that queue in
        # under a second and then waited for the source a fifth of the time; with 5-20 ms
        # they drained a backlog a quarter faster (bench/README.md). The queue's limits
        # still cap the prefetch: the backoff only decides how soon fetching resumes once it
        # is back under them.
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "client.id": naming.flow_client_id(s.flow_id),
        "log_level": 4,
    }


def producer_config(s: WorkerSettings) -> dict[str, Any]:
    """The target producer: idempotent, acks=all, bounded queues."""
    return {
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


#: the longest an offset sync waits to fill a batch: a consumer's translated position on the target
#: waits for it, so syncs do not wait out a volume flow's long linger_ms (copies of 50-100 ms)
SYNC_LINGER_MS = 5


def sync_producer_config(s: WorkerSettings) -> dict[str, Any]:
    """The offset-sync producer of an at-least-once worker: the copy producer's settings with
    a short linger of its own. Syncs are written only once the copies they map are acknowledged,
    so the two producers need no order between them."""
    config = producer_config(s)
    config["linger.ms"] = min(s.linger_ms, SYNC_LINGER_MS)
    config["client.id"] = naming.flow_client_id(s.flow_id, "syncs")
    return config


# ---------------------------------------------------------------------------- exactly once


def slot_source_config(s: WorkerSettings) -> dict[str, Any]:
    """The source consumer of an exactly-once worker: partitions are assigned by slot, not by a
    group, so its group id is never used to commit."""
    config = consumer_config(s)
    config["group.id"] = naming.progress_reader_group(s.source_alias, s.target_alias)
    config["client.id"] = naming.flow_client_id(s.flow_id, "eos")
    return config


def progress_reader_config(s: WorkerSettings) -> dict[str, Any]:
    """Reads the slots' committed progress on the target (never joins the group)."""
    return {
        "group.id": naming.replicator_group(s.source_alias, s.target_alias),
        "enable.auto.commit": False,
        # Only stable (committed) progress is read: see KIP-447.
        "isolation.level": "read_committed",
        "client.id": naming.flow_client_id(s.flow_id, "progress"),
        "log_level": 4,
    }


def slot_membership_config(s: WorkerSettings) -> dict[str, Any]:
    """The member of the slot group on the target: its assignment is the slots it owns."""
    return {
        "group.id": naming.slot_membership_group(s.source_alias, s.target_alias),
        "enable.auto.commit": False,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": s.membership_session_timeout_ms,
        "heartbeat.interval.ms": max(500, s.membership_session_timeout_ms // 10),
        "client.id": naming.flow_client_id(s.flow_id, "slots"),
        "log_level": 4,
    }


def slot_producer_config(s: WorkerSettings, slot: int) -> dict[str, Any]:
    """The transactional producer of one slot."""
    config = producer_config(s)
    config.update(
        {
            "transactional.id": naming.transactional_id(s.source_alias, s.target_alias, slot),
            "transaction.timeout.ms": s.transaction_timeout_ms,
            "client.id": naming.flow_client_id(s.flow_id, f"slot-{slot}"),
        }
    )
    # A transaction must finish within its timeout: no record may wait longer than that.
    config["message.timeout.ms"] = min(s.message_timeout_ms, s.transaction_timeout_ms)
    return config


def judge_reader_config(s: WorkerSettings) -> dict[str, Any]:
    """The source consumer that reads records again to judge them by their epoch: assigned only
    (its group is never joined), never committing, and never copying."""
    return {
        "group.id": naming.judge_reader_group(s.source_alias, s.target_alias),
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    }
