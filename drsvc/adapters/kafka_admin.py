"""Kafka cluster metadata and small admin operations over confluent-kafka.

librdkafka reports problems as ``KafkaException`` wrapping a ``KafkaError``; they are mapped to
:class:`drsvc.errors.KafkaUnavailableError` (retryable) here.
"""

from __future__ import annotations

import concurrent.futures
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from drsvc.errors import ConfigError, KafkaUnavailableError


def admin_client(bootstrap_servers: str, extra: Mapping[str, str] | None = None) -> AdminClient:
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap_servers,
        "socket.connection.setup.timeout.ms": "3000",
        # Warnings and errors only: informational lines (queue purges at close) are noise here.
        "log_level": "4",
    }
    config.update(extra or {})
    return AdminClient(config)


def broker_ids(admin: AdminClient, timeout_s: float = 2.0) -> set[int]:
    """IDs of the brokers the cluster metadata lists right now."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as err:
        raise KafkaUnavailableError(f"cluster metadata unavailable: {err}") from err
    return set(metadata.brokers)


def wait_for_brokers(
    bootstrap_servers: str, expected: int, timeout_s: float, poll_s: float = 0.5
) -> set[int]:
    """Block until ``expected`` brokers are listed in the metadata, or raise after ``timeout_s``."""
    admin = admin_client(bootstrap_servers)
    deadline = time.monotonic() + timeout_s
    seen: set[int] = set()
    while True:
        try:
            seen = broker_ids(admin)
        except KafkaUnavailableError:
            seen = set()
        if len(seen) >= expected:
            return seen
        if time.monotonic() >= deadline:
            raise KafkaUnavailableError(
                f"{bootstrap_servers}: {len(seen)} of {expected} brokers ready "
                f"after {timeout_s:.0f}s"
            )
        time.sleep(poll_s)


def create_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int = -1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 15.0,
) -> bool:
    """Create ``name``; return False if it already existed. Invalid requests are ConfigErrors."""
    topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    future = admin.create_topics([topic], operation_timeout=timeout_s)[name]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as err:
        error: KafkaError = err.args[0]
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if error.retriable() or error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT):
            raise KafkaUnavailableError(f"creating topic {name}: {error.str()}") from err
        raise ConfigError(f"cannot create topic {name}: {error.str()}") from err
    return True


@dataclass(frozen=True)
class TopicInfo:
    """What the replicator needs to know of a topic: its id and partition count."""

    name: str
    topic_id: bytes
    partitions: int
    offline_partitions: tuple[int, ...] = ()


def _uuid_bytes(uuid: object) -> bytes:
    msb = uuid.get_most_significant_bits()  # type: ignore[attr-defined]
    lsb = uuid.get_least_significant_bits()  # type: ignore[attr-defined]
    return struct.pack(">qq", msb, lsb)


def _result(future: Any, what: str, timeout_s: float) -> Any:
    try:
        return future.result(timeout=timeout_s)
    except KafkaException as err:
        error: KafkaError = err.args[0]
        if error.retriable() or error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT):
            raise KafkaUnavailableError(f"{what}: {error.str()}") from err
        raise ConfigError(f"{what}: {error.str()}") from err
    except concurrent.futures.TimeoutError as err:
        raise KafkaUnavailableError(f"{what}: no answer within {timeout_s:.0f}s") from err


def list_topic_names(admin: AdminClient, timeout_s: float = 10.0) -> set[str]:
    """Names of all topics on the cluster (internal ones included)."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as err:
        raise KafkaUnavailableError(f"listing topics: {err}") from err
    return set(metadata.topics)


def describe_topics(
    admin: AdminClient, names: list[str], timeout_s: float = 10.0
) -> dict[str, TopicInfo]:
    """Ids and partition counts of ``names``; topics that vanished meanwhile are left out."""
    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    found: dict[str, TopicInfo] = {}
    for name, future in futures.items():
        try:
            description = future.result(timeout=timeout_s)
        except KafkaException as err:
            if err.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise KafkaUnavailableError(f"describing topic {name}: {err.args[0].str()}") from err
        offline = tuple(p.id for p in description.partitions if p.leader is None)
        found[name] = TopicInfo(
            name=name,
            topic_id=_uuid_bytes(description.topic_id),
            partitions=len(description.partitions),
            offline_partitions=offline,
        )
    return found


@dataclass(frozen=True)
class TopicConfigs:
    """A topic's explicitly set configs and its effective ``max.message.bytes``."""

    explicit: dict[str, str]
    effective: dict[str, str]


def describe_topic_configs(admin: AdminClient, name: str, timeout_s: float = 10.0) -> TopicConfigs:
    resource = ConfigResource("TOPIC", name)
    future = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
    entries = _result(future, f"describing configs of {name}", timeout_s)
    explicit = {
        key: entry.value
        for key, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None
    }
    effective = {key: entry.value for key, entry in entries.items() if entry.value is not None}
    return TopicConfigs(explicit=explicit, effective=effective)


def grow_partitions(admin: AdminClient, name: str, total: int, timeout_s: float = 15.0) -> None:
    future = admin.create_partitions([NewPartitions(name, total)], request_timeout=timeout_s)[name]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as err:
        if err.args[0].code() == KafkaError.INVALID_PARTITIONS:
            return  # someone (another worker) grew it already
        raise KafkaUnavailableError(f"growing {name} to {total} partitions: {err}") from err


def set_topic_configs(
    admin: AdminClient, name: str, configs: Mapping[str, str], timeout_s: float = 15.0
) -> None:
    """Set ``configs`` on topic ``name`` incrementally (other configs stay as they are)."""
    if not configs:
        return
    resource = ConfigResource(
        "TOPIC",
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs.items()
        ],
    )
    future = admin.incremental_alter_configs([resource], request_timeout=timeout_s)[resource]
    _result(future, f"setting configs of {name}", timeout_s)
