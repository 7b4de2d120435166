"""Kafka cluster metadata and small admin operations over confluent-kafka.

librdkafka reports problems as ``KafkaException`` wrapping a ``KafkaError``; they are mapped to
:class:`drsvc.errors.KafkaUnavailableError` (retryable) here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
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
