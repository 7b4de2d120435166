"""Kafka cluster metadata and small admin operations over confluent-kafka: topics, their
configs, log offsets, and consumer groups' committed offsets.

librdkafka reports problems as ``KafkaException`` wrapping a ``KafkaError``; they are mapped to
:class:`drsvc.errors.KafkaUnavailableError` (retryable) here.
"""

from __future__ import annotations

import concurrent.futures
import struct
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
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
    except concurrent.futures.TimeoutError as err:
        raise KafkaUnavailableError(f"creating topic {name}: no answer in {timeout_s}s") from err
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
        except concurrent.futures.TimeoutError as err:
            raise KafkaUnavailableError(
                f"describing topic {name}: no answer in {timeout_s}s"
            ) from err
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
    except concurrent.futures.TimeoutError as err:
        raise KafkaUnavailableError(f"growing {name}: no answer in {timeout_s}s") from err
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


# -- consumer groups ------------------------------------------------------------------------------

#: The group's coordinator is loading, moving or not elected yet: ask again shortly.
_COORDINATOR_NOT_READY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

#: Answers to an offset commit without a member id that mean "this group has live members".
#: Kafka 4.1 answers UNKNOWN_MEMBER_ID for classic and for consumer-protocol (KIP-848) groups
#: alike (checked by the integration tests); the others are how the group coordinator rejects a
#: commit that does not come from a current member, and mean the same here.
GROUP_HAS_MEMBERS_ERRORS = frozenset(
    {
        "UNKNOWN_MEMBER_ID",
        "ILLEGAL_GENERATION",
        "REBALANCE_IN_PROGRESS",
        "STALE_MEMBER_EPOCH",
        "FENCED_MEMBER_EPOCH",
        "FENCED_INSTANCE_ID",
        "NON_EMPTY_GROUP",
    }
)

Partition = tuple[str, int]
"""A topic and partition number."""


@dataclass(frozen=True)
class PartitionError:
    """The broker's answer for one partition: its error name (``UNKNOWN_MEMBER_ID``) and text."""

    name: str
    description: str

    @property
    def group_has_members(self) -> bool:
        """The commit was refused because the group has live members on the cluster."""
        return self.name in GROUP_HAS_MEMBERS_ERRORS


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group as the cluster describes it right now."""

    group: str
    state: str
    """Lower case: ``empty``, ``stable``, ``preparing_rebalancing``, ``dead`` (no such group) ..."""
    group_type: str
    """``classic``, ``consumer`` (KIP-848) or ``unknown``."""
    members: int


def describe_group(admin: AdminClient, group: str, timeout_s: float = 10.0) -> GroupDescription:
    """State, protocol type and member count of ``group`` (``dead`` when it does not exist).

    For reports and tests: deciding whether offsets may be changed must not rest on this answer,
    which is stale as soon as it arrives (the broker refuses a commit to a group with members).
    """
    future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    description = _result(future, f"describing consumer group '{group}'", timeout_s)
    return GroupDescription(
        group=group,
        state=description.state.name.lower(),
        group_type=description.type.name.lower(),
        members=len(description.members),
    )


def alter_group_offsets(
    admin: AdminClient,
    group: str,
    offsets: Mapping[Partition, int],
    timeout_s: float = 30.0,
    retry_backoff_s: float = 0.2,
    metadata: Mapping[Partition, str] | None = None,
) -> dict[Partition, PartitionError | None]:
    """Commit ``offsets`` for ``group`` as an outsider (no member id, no generation), each with
    its ``metadata`` string when one is given (the commit's metadata, as a consumer's commit
    carries it; empty otherwise).

    Returns, per partition, None when it was committed or the broker's refusal. The broker only
    accepts such a commit while the group has no members; otherwise every partition comes back
    with an error for which :attr:`PartitionError.group_has_members` is true. Answers that mean
    the group's coordinator is loading or moving are asked again until ``timeout_s``, then raise
    :class:`KafkaUnavailableError`.
    """
    pending = dict(offsets)
    answers: dict[Partition, PartitionError | None] = {}
    deadline = time.monotonic() + timeout_s
    while pending:
        remaining = max(1.0, deadline - time.monotonic())
        retry: dict[Partition, int] = {}
        last: KafkaError | None = None
        for tp, error in _alter_once(admin, group, pending, remaining, metadata or {}).items():
            if error is not None and error.code() in _COORDINATOR_NOT_READY:
                retry[tp] = pending[tp]
                last = error
            else:
                answers[tp] = None if error is None else PartitionError(error.name(), error.str())
        if retry and last is not None and time.monotonic() >= deadline:
            raise KafkaUnavailableError(
                f"committing offsets of group '{group}': {last.str()} (for {timeout_s:.0f}s)"
            )
        if retry:
            time.sleep(retry_backoff_s)
        pending = retry
    return answers


def _alter_once(
    admin: AdminClient,
    group: str,
    offsets: Mapping[Partition, int],
    timeout_s: float,
    metadata: Mapping[Partition, str],
) -> dict[Partition, KafkaError | None]:
    request = ConsumerGroupTopicPartitions(
        group,
        [
            _partition_to_commit(topic, partition, offset, metadata.get((topic, partition)))
            for (topic, partition), offset in offsets.items()
        ],
    )
    futures = admin.alter_consumer_group_offsets([request], request_timeout=timeout_s)
    future = next(iter(futures.values()))
    try:
        answer = future.result(timeout=timeout_s + 5)
    except KafkaException as err:
        error: KafkaError = err.args[0]
        if error.code() in _COORDINATOR_NOT_READY:
            return dict.fromkeys(offsets, error)
        if error.retriable():
            raise KafkaUnavailableError(
                f"committing offsets of group '{group}': {error.str()}"
            ) from err
        raise ConfigError(f"committing offsets of group '{group}': {error.str()}") from err
    except concurrent.futures.TimeoutError as err:
        raise KafkaUnavailableError(
            f"committing offsets of group '{group}': no answer within {timeout_s:.0f}s"
        ) from err
    found: dict[Partition, KafkaError | None] = {
        (tp.topic, tp.partition): tp.error for tp in answer.topic_partitions
    }
    missing = [tp for tp in offsets if tp not in found]
    if missing:
        raise KafkaUnavailableError(
            f"committing offsets of group '{group}': no answer for {missing[:5]}"
        )
    return found


def _partition_to_commit(
    topic: str, partition: int, offset: int, metadata: str | None
) -> TopicPartition:
    # The client refuses None as metadata: leave the argument out when there is none.
    if metadata:
        return TopicPartition(topic, partition, offset, metadata)
    return TopicPartition(topic, partition, offset)


def list_offsets(
    admin: AdminClient,
    partitions: Collection[Partition],
    which: Literal["earliest", "latest"],
    timeout_s: float = 10.0,
) -> dict[Partition, int]:
    """Log start (``earliest``) or last stable (``latest``) offsets of those of ``partitions``
    that exist; partitions of missing topics are left out."""
    if not partitions:
        return {}
    make_spec = OffsetSpec.earliest if which == "earliest" else OffsetSpec.latest
    spec = make_spec()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(
        {TopicPartition(topic, partition): spec for topic, partition in partitions},
        isolation_level=IsolationLevel.READ_COMMITTED,
        request_timeout=timeout_s,
    )
    found: dict[Partition, int] = {}
    for kafka_tp, future in futures.items():
        tp = (kafka_tp.topic, kafka_tp.partition)
        try:
            info = future.result(timeout=timeout_s + 5)
        except KafkaException as err:
            if err.args[0].code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_PARTITION,
                KafkaError._UNKNOWN_TOPIC,
            ):
                continue
            raise KafkaUnavailableError(
                f"{which} offset of {tp[0]}-{tp[1]}: {err.args[0].str()}"
            ) from err
        except concurrent.futures.TimeoutError as err:
            raise KafkaUnavailableError(
                f"{which} offset of {tp[0]}-{tp[1]}: no answer within {timeout_s:.0f}s"
            ) from err
        found[tp] = info.offset
    return found


#: The group's coordinator is moving or loading: an offset fetch is worth asking again.
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def group_offsets_consumer(client_config: Mapping[str, str], group: str) -> Consumer:
    """A consumer of ``group`` that never joins it (no subscribe, no commit), to read the group's
    committed offsets. Not the Admin API: librdkafka's ListConsumerGroupOffsets crashes the
    process when the coordinator answers NOT_COORDINATOR (librdkafka issue 5040, still in 2.16).
    """
    return Consumer(
        {
            **client_config,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 2,
        }
    )


def ask_committed(
    consumer: Consumer,
    partitions: list[TopicPartition],
    timeout_s: float,
    retry_on: Collection[int] = COORDINATOR_MOVING,
    pause_s: float = 0.2,
) -> list[TopicPartition]:
    """``consumer.committed(partitions)``, asked again while the answer is one of ``retry_on``
    (the group's coordinator moving or loading) for up to ``timeout_s``. Any other error, and the
    last one once the time is up, is raised as the KafkaException it came as."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer: list[TopicPartition] = consumer.committed(partitions, timeout=timeout_s)
            return answer
        except KafkaException as err:
            if err.args[0].code() not in retry_on or time.monotonic() > deadline:
                raise
            time.sleep(pause_s)


@dataclass(frozen=True)
class GroupOffset:
    """A group's committed offset of one partition and the metadata string committed with it."""

    offset: int
    metadata: str = ""


def committed_offsets(
    client_config: Mapping[str, str],
    group: str,
    partitions: Collection[Partition],
    timeout_s: float = 30.0,
) -> dict[Partition, int]:
    """``group``'s committed offsets of those of ``partitions`` that have one (read as
    :func:`group_offsets_consumer` says)."""
    found = committed_offsets_with_metadata(client_config, group, partitions, timeout_s)
    return {tp: committed.offset for tp, committed in found.items()}


def committed_offsets_with_metadata(
    client_config: Mapping[str, str],
    group: str,
    partitions: Collection[Partition],
    timeout_s: float = 30.0,
) -> dict[Partition, GroupOffset]:
    """``group``'s committed offsets, with their metadata, of those of ``partitions`` that have
    one (read as :func:`group_offsets_consumer` says: by a consumer that never joins the group)."""
    if not partitions:
        return {}
    consumer = group_offsets_consumer(client_config, group)
    what = f"committed offsets of group '{group}'"
    wanted = [TopicPartition(topic, partition) for topic, partition in sorted(set(partitions))]
    try:
        answer = ask_committed(consumer, wanted, timeout_s, retry_on=_COORDINATOR_NOT_READY)
    except KafkaException as err:
        error: KafkaError = err.args[0]
        if error.retriable() or error.code() in _COORDINATOR_NOT_READY:
            raise KafkaUnavailableError(f"{what}: {error.str()}") from err
        raise ConfigError(f"{what}: {error.str()}") from err
    finally:
        consumer.close()
    return {
        (tp.topic, tp.partition): GroupOffset(tp.offset, tp.metadata or "")
        for tp in answer
        if tp.error is None and tp.offset >= 0
    }
