"""Which source topic configs a remote topic gets, and which it never does.

A remote topic mirrors its source's data semantics (compaction, retention, segment sizes) but not
settings that would weaken the target's durability, fight the replicator, or reject old records:

* **Never copied** — durability and broker-local settings stay the target cluster's own
  (``min.insync.replicas``, ``unclean.leader.election.enable``, replication throttles,
  ``compression.type`` — the flow's producer decides compression — and placement configs).
* **Always set** — ``message.timestamp.type=CreateTime`` (the copy keeps the original timestamp;
  LogAppendTime would rewrite it) and unbounded ``message.timestamp.before.max.ms`` /
  ``after.max.ms`` (a backfill of week-old records must not be refused as "too old").
* **Adjusted** — ``max.message.bytes`` gets room for the provenance header every copy carries, so
  a record the source accepted always fits the target.
* Everything else that the source sets explicitly is copied as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

NEVER_COPIED: frozenset[str] = frozenset(
    {
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "message.timestamp.type",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "message.timestamp.difference.max.ms",
        "message.downconversion.enable",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
        "confluent.placement.constraints",
    }
)

LONG_MAX = str((1 << 63) - 1)

ALWAYS_SET: Mapping[str, str] = {
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": LONG_MAX,
}

MAX_MESSAGE_BYTES = "max.message.bytes"
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
"""Kafka's default ``max.message.bytes``."""

INT32_MAX = (1 << 31) - 1

HEADER_ALLOWANCE_BYTES = 64 * 1024
"""Room added to ``max.message.bytes`` for the provenance header (and a batch's framing)."""


def remote_topic_configs(
    source_explicit: Mapping[str, str], source_max_message_bytes: int | None = None
) -> dict[str, str]:
    """Configs for the remote topic of a source topic.

    ``source_explicit`` holds the configs the source topic sets itself (not broker defaults);
    ``source_max_message_bytes`` is the source topic's effective limit, default or not.
    """
    configs = {k: v for k, v in source_explicit.items() if k not in NEVER_COPIED}
    configs.update(ALWAYS_SET)
    limit = source_max_message_bytes
    if limit is None:
        limit = int(source_explicit.get(MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_BYTES))
    # Brokers hold this config in a signed 32-bit int: a source at the top keeps the top.
    configs[MAX_MESSAGE_BYTES] = str(min(limit + HEADER_ALLOWANCE_BYTES, INT32_MAX))
    return configs


def config_drift(desired: Mapping[str, str], actual: Mapping[str, str]) -> dict[str, str]:
    """The desired configs whose value on the target differs (what a periodic re-sync sets)."""
    return {k: v for k, v in desired.items() if actual.get(k) != v}


def retention_shorter_than(configs: Mapping[str, str], record_age_ms: int) -> bool:
    """True when a remote topic with ``configs`` would delete a record of ``record_age_ms``
    on arrival: a backfill of old records into such a topic loses them again at once."""
    retention = configs.get("retention.ms")
    if retention is None:
        return False
    value = int(retention)
    return value >= 0 and record_age_ms > value
