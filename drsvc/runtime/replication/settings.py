"""Everything one replication worker needs to know, resolved from a topology and the environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drsvc.errors import ConfigError
from drsvc.topology.models import Flow, Topology
from failover import naming
from failover.keepalive import KeepalivePolicy
from failover.replication_policy import ReplicationPolicy
from failover.topic_rules import InternalTopicNames, NameFilter

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

#: Kafka's default ``offsets.retention.minutes`` (7 days): committed offsets of a group without
#: members expire that long after their last commit
KAFKA_DEFAULT_OFFSETS_RETENTION_S = 7 * 24 * 3600.0
#: exactly-once progress is committed again at least this often: a seventh of Kafka's default
#: offsets retention, so a worker that is down for up to six days still finds its progress
DEFAULT_PROGRESS_REFRESH_S = KAFKA_DEFAULT_OFFSETS_RETENTION_S / 7


@dataclass(frozen=True)
class WorkerSettings:
    """Resolved settings of one flow's worker. Defaults suit the embedded local environment."""

    flow_id: str
    source_alias: str
    target_alias: str
    policy: ReplicationPolicy
    topics: NameFilter
    names: InternalTopicNames
    allow_multi_hop: bool
    source_client: Mapping[str, str]
    target_client: Mapping[str, str]
    group_id: str
    sync_topic: str
    #: Consul HTTP address and KV key of the flow's control document (pause, resume, throttle)
    consul_http_addr: str | None = None
    control_key: str | None = None
    #: Consul KV key where the flow's workers list records written under a stale epoch
    stale_records_key: str | None = None
    #: bytes per second of keys and values, unless the control document says otherwise
    throttle_bytes_per_s: int | None = None
    start_kind: str = "earliest"
    start_timestamp_ms: int | None = None
    #: records per consume() call
    batch_size: int = 10_000
    poll_timeout_s: float = 0.1
    #: how often source topics are re-discovered (new topics and partitions)
    refresh_interval_s: float = 5.0
    #: how often finished runs become offset syncs
    seal_interval_s: float = 0.2
    #: how often source progress is committed
    commit_interval_s: float = 1.0
    #: the flow's linger_ms (how long the target producer waits to fill a batch)
    linger_ms: int = 5
    compression: str = "lz4"
    producer_queue_messages: int = 200_000
    producer_queue_kbytes: int = 64 * 1024
    #: prefetched records per worker. Since the consumer fetches again 10 ms after its queue
    #: drains below this (not 1 s), the queue stays near full: with 64 MiB of 1 KiB records a
    #: worker peaked at 290 MiB, with 32 MiB at about 240 MiB, at the same rate (bench/README.md)
    fetch_queue_kbytes: int = 32 * 1024
    #: how long a record may wait for the target before its delivery fails (and is retried)
    message_timeout_ms: int = 120_000
    #: largest produce request; records above a topic's own limit are refused by the broker
    max_request_bytes: int = 16 * 1024 * 1024
    #: warn when a partition's position has not moved for this long while its log has more
    stall_warning_s: float = 60.0
    settle_timeout_s: float = 30.0
    max_retry_backoff_s: float = 30.0
    sync_retention_ms: int = 7 * 24 * 3600 * 1000
    #: at-least-once or exactly-once (see :mod:`.exactly_once`)
    delivery: str = "at-least-once"
    #: the way back of an active/passive pair: copies only topics a failover started
    standby: bool = False
    #: exactly-once: slots of the flow (None: as the slots topic already has, else the default)
    slots: int | None = None
    #: exactly-once: kept short because librdkafka treats a timed-out transaction as fatal
    transaction_timeout_ms: int = 20_000
    #: exactly-once: how long a slot's transaction stays open before it is committed
    transaction_interval_s: float = 0.2
    #: exactly-once: records per transaction before it is committed early
    transaction_max_records: int = 50_000
    #: how soon a silent worker loses its partitions (or slots) to the others
    membership_session_timeout_ms: int = 10_000
    #: exactly-once: after being fenced, wait this long before taking the slot back (if still
    #: assigned), so a paused worker learns it lost the slot rather than fence the new owner
    fenced_retry_s: float = 15.0
    #: exactly-once: after the target's transaction coordinator aborted a transaction that
    #: outlived transaction.timeout.ms (the slot is still ours), take the slot again after this
    #: long, doubling with every such failure in a row up to ``timed_out_retry_max_s``
    timed_out_retry_s: float = 0.1
    timed_out_retry_max_s: float = 5.0
    #: exactly-once: every partition's progress is committed again (in a transaction) at least
    #: this often, idle and paused ones included; keep it well below the target cluster's
    #: offsets.retention.minutes, or the progress of a partition idle for longer expires
    progress_refresh_s: float = DEFAULT_PROGRESS_REFRESH_S
    #: how long an idle partition goes before its last copy is written again as a keepalive
    #: offset sync (:mod:`failover.keepalive`); must be shorter than ``sync_retention_ms``;
    #: None: a quarter of it
    sync_keepalive_s: float | None = None


def worker_settings(
    topology: Topology,
    flow: Flow,
    bootstrap: Mapping[str, str],
    **overrides: object,
) -> WorkerSettings:
    """Settings for ``flow`` of ``topology``; ``bootstrap`` maps aliases to bootstrap servers
    resolved for clusters whose file omits them."""
    source = topology.cluster(flow.source)
    target = topology.cluster(flow.target)
    names = topology.internal_topics.to_names()
    values: dict[str, object] = {
        "flow_id": flow.id,
        "source_alias": flow.source,
        "target_alias": flow.target,
        "policy": topology.policy_for(flow),
        "topics": flow.topics.to_filter(),
        "names": names,
        "allow_multi_hop": flow.multi_hop,
        "source_client": source.client_config(bootstrap.get(flow.source)),
        "target_client": target.client_config(bootstrap.get(flow.target)),
        "group_id": naming.replicator_group(flow.source, flow.target),
        "sync_topic": names.offset_syncs_topic(flow.source),
        "start_kind": flow.start.kind,
        "start_timestamp_ms": flow.start.timestamp_ms,
        "control_key": naming.flow_control_key(topology.namespace, flow.source, flow.target),
        "stale_records_key": naming.flow_stale_records_key(
            topology.namespace, flow.source, flow.target
        ),
        "delivery": flow.delivery,
        "standby": flow.standby,
        "linger_ms": flow.linger_ms,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return WorkerSettings(**values)  # type: ignore[arg-type]


def keepalive_policy(settings: WorkerSettings) -> KeepalivePolicy:
    """When a worker writes an idle partition's last copy again (both delivery modes)."""
    interval_ms = (
        None if settings.sync_keepalive_s is None else round(settings.sync_keepalive_s * 1000)
    )
    try:
        return KeepalivePolicy.for_retention(settings.sync_retention_ms, interval_ms)
    except ValueError as err:
        raise ConfigError(f"flow {settings.flow_id}: {err}") from err
