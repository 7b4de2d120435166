"""Kafka cluster metadata and small admin operations over confluent-kafka: topics, their
configs, log offsets, and consumer groups' committed offsets.

librdkafka reports problems as ``KafkaException`` wrapping a ``KafkaError``, and a future that
gets no answer in time gives up with ``TimeoutError``; both reach the caller as the drsvc error
:mod:`drsvc.kafka.errors` maps them to. Only the answers an operation expects are handled here
first: a topic that exists already, a partition that is gone, a coordinator that is moving.
Functions that take a ``cluster`` (an alias) name it in their errors.
"""

from __future__ import annotations

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

from drsvc.errors import ConfigError, DrsvcError, KafkaUnavailableError
from drsvc.kafka import errors
from drsvc.kafka.clock import Clock, SystemClock
from drsvc.kafka.errors import kafka_error, to_drsvc, translated


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
    with translated("reading the cluster metadata"):
        metadata = admin.list_topics(timeout=timeout_s)
    return set(metadata.brokers)


def wait_for_brokers(
    bootstrap_servers: str,
    expected: int,
    timeout_s: float,
    poll_s: float = 0.5,
    extra: Mapping[str, str] | None = None,
) -> set[int]:
    """Block until ``expected`` brokers are listed in the metadata, or raise after ``timeout_s``.
    ``extra``: client settings for a secured listener."""
    admin = admin_client(bootstrap_servers, extra)
    deadline = time.monotonic() + timeout_s
    seen: set[int] = set()
    while True:
        try:
            seen = broker_ids(admin)
        except DrsvcError:  # brokers starting answer oddly for a moment: wait them out
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
    *,
    cluster: str | None = None,
) -> bool:
    """Create ``name``; return False if it already existed. A request the cluster refuses as
    invalid (:data:`TOPIC_REQUEST_INVALID`: a replication factor above the brokers' count, a
    policy) is a :class:`~drsvc.errors.ConfigError`, other failures are mapped by
    :mod:`drsvc.kafka.errors`."""
    topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    what = f"creating topic {name}"
    with translated(what, cluster):
        future = admin.create_topics([topic], operation_timeout=timeout_s)[name]
    try:
        future.result(timeout=timeout_s)
    except (KafkaException, TimeoutError) as err:
        error = kafka_error(err)
        if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if error is not None and error.code() in TOPIC_REQUEST_INVALID:
            where = f"cluster '{cluster}': " if cluster else ""
            raise ConfigError(
                f"{where}cannot create topic {name}: {errors.describe(error)}"
            ) from err
        raise to_drsvc(err, what, cluster) from err
    return True


#: answers to a topic creation that say the request itself is wrong: no retry changes them
TOPIC_REQUEST_INVALID = frozenset(
    {
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_REPLICA_ASSIGNMENT,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.POLICY_VIOLATION,
    }
)


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


def _result(future: Any, what: str, timeout_s: float, cluster: str | None = None) -> Any:
    with translated(what, cluster):
        return future.result(timeout=timeout_s)


def list_topic_names(admin: AdminClient, timeout_s: float = 10.0) -> set[str]:
    """Names of all topics on the cluster (internal ones included)."""
    with translated("listing topics"):
        metadata = admin.list_topics(timeout=timeout_s)
    return set(metadata.topics)


def describe_topics(
    admin: AdminClient, names: list[str], timeout_s: float = 10.0, *, cluster: str | None = None
) -> dict[str, TopicInfo]:
    """Ids and partition counts of ``names``; topics that vanished meanwhile are left out."""
    if not names:
        return {}
    with translated("describing topics", cluster):
        futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    found: dict[str, TopicInfo] = {}
    for name, future in futures.items():
        try:
            description = future.result(timeout=timeout_s)
        except (KafkaException, TimeoutError) as err:
            error = kafka_error(err)
            if error is not None and error.code() in errors.GONE:
                continue
            raise to_drsvc(err, f"describing topic {name}", cluster) from err
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
    what = f"describing configs of {name}"
    with translated(what):
        future = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
    entries = _result(future, what, timeout_s)
    explicit = {
        key: entry.value
        for key, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None
    }
    effective = {key: entry.value for key, entry in entries.items() if entry.value is not None}
    return TopicConfigs(explicit=explicit, effective=effective)


def grow_partitions(admin: AdminClient, name: str, total: int, timeout_s: float = 15.0) -> None:
    what = f"growing {name} to {total} partitions"
    with translated(what):
        futures = admin.create_partitions([NewPartitions(name, total)], request_timeout=timeout_s)
    try:
        futures[name].result(timeout=timeout_s)
    except (KafkaException, TimeoutError) as err:
        error = kafka_error(err)
        if error is not None and error.code() == KafkaError.INVALID_PARTITIONS:
            return  # someone (another worker) grew it already
        raise to_drsvc(err, what) from err


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
    what = f"setting configs of {name}"
    with translated(what):
        future = admin.incremental_alter_configs([resource], request_timeout=timeout_s)[resource]
    _result(future, what, timeout_s)


# -- consumer groups ------------------------------------------------------------------------------

#: The group's coordinator is loading, moving or not elected yet, or the cluster did not answer
#: in time: a group-offset request is asked again shortly (within its time).
_COORDINATOR_NOT_READY = errors.UNAVAILABLE

#: The names (``UNKNOWN_MEMBER_ID``...) of :data:`drsvc.kafka.errors.GROUP_HAS_MEMBERS`: the
#: answers to an offset commit without a member id that mean "this group has live members"
#: (Kafka 4.1 answers UNKNOWN_MEMBER_ID for classic and consumer-protocol groups alike, checked
#: by the integration tests). A :class:`PartitionError` carries the name.
GROUP_HAS_MEMBERS_ERRORS = frozenset(KafkaError(code).name() for code in errors.GROUP_HAS_MEMBERS)

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
    what = f"describing consumer group '{group}'"
    with translated(what):
        future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    description = _result(future, what, timeout_s)
    return GroupDescription(
        group=group,
        state=description.state.name.lower(),
        group_type=description.type.name.lower(),
        members=len(description.members),
    )


def consumer_group_members(
    admin: AdminClient, group: str, timeout_s: float = 10.0, *, cluster: str | None = None
) -> list[Any]:
    """The members of ``group`` as the cluster describes them right now (confluent-kafka's
    member descriptions: ``member_id``, ``client_id``, ``host``, ``assignment``); none when the
    group does not exist. Errors are mapped by :mod:`drsvc.kafka.errors`, naming ``cluster``."""
    what = f"members of group '{group}'"
    with translated(what, cluster):
        future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    try:
        description = future.result(timeout=timeout_s)
    except (KafkaException, TimeoutError) as err:
        error = kafka_error(err)
        if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return []
        raise to_drsvc(err, what, cluster) from err
    return list(description.members)


def alter_group_offsets(
    admin: AdminClient,
    group: str,
    offsets: Mapping[Partition, int],
    timeout_s: float = 30.0,
    retry_backoff_s: float = 0.2,
    metadata: Mapping[Partition, str] | None = None,
    *,
    clock: Clock | None = None,
) -> dict[Partition, PartitionError | None]:
    """Commit ``offsets`` for ``group`` as an outsider (no member id, no generation), each with
    its ``metadata`` string when one is given (the commit's metadata, as a consumer's commit
    carries it; empty otherwise).

    Returns, per partition, None when it was committed or the broker's refusal. The broker only
    accepts such a commit while the group has no members; otherwise every partition comes back
    with an error for which :attr:`PartitionError.group_has_members` is true. Answers that mean
    the group's coordinator is loading or moving are asked again until ``timeout_s``, then raise
    :class:`KafkaUnavailableError`. ``clock`` measures that time (the machine's by default).
    """
    clock = SystemClock() if clock is None else clock
    pending = dict(offsets)
    answers: dict[Partition, PartitionError | None] = {}
    deadline = clock.monotonic() + timeout_s
    while pending:
        remaining = max(1.0, deadline - clock.monotonic())
        retry: dict[Partition, int] = {}
        last: KafkaError | None = None
        for tp, error in _alter_once(admin, group, pending, remaining, metadata or {}).items():
            if error is not None and error.code() in _COORDINATOR_NOT_READY:
                retry[tp] = pending[tp]
                last = error
            else:
                answers[tp] = None if error is None else PartitionError(error.name(), error.str())
        if retry and last is not None and clock.monotonic() >= deadline:
            raise KafkaUnavailableError(
                f"committing offsets of group '{group}': {last.str()} (for {timeout_s:.0f}s)"
            )
        if retry:
            clock.sleep(retry_backoff_s)
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
    what = f"committing offsets of group '{group}'"
    with translated(what):
        futures = admin.alter_consumer_group_offsets([request], request_timeout=timeout_s)
    future = next(iter(futures.values()))
    try:
        answer = future.result(timeout=timeout_s + 5)
    except KafkaException as err:
        error = kafka_error(err)
        if error is not None and error.code() in _COORDINATOR_NOT_READY:
            return dict.fromkeys(offsets, error)
        raise to_drsvc(err, what) from err
    except TimeoutError as err:
        raise KafkaUnavailableError(f"{what}: no answer within {timeout_s:.0f}s") from err
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
    which: Literal["earliest", "latest"] | int,
    timeout_s: float = 10.0,
    *,
    cluster: str | None = None,
) -> dict[Partition, int]:
    """ListOffsets of those of ``partitions`` that exist (partitions of missing topics, and
    those deleted since they were listed, are left out): the log start (``earliest``), the last
    stable offset (``latest``: what a ``read_committed`` consumer reaches), or, for a timestamp
    in milliseconds, the first offset at or after it (-1 where no record is that new).

    The one place drsvc asks a cluster for log offsets through the Admin API. Every other
    answer is mapped by :mod:`drsvc.kafka.errors`, naming the partition and ``cluster``.
    """
    if not partitions:
        return {}
    if which == "earliest":
        spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        label = "earliest offset"
    elif which == "latest":
        spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        label = "latest offset"
    else:
        spec = OffsetSpec.for_timestamp(which)
        label = f"offset at {which} ms"
    with translated("listing offsets", cluster):
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
        except (KafkaException, TimeoutError) as err:
            error = kafka_error(err)
            if error is not None and error.code() in errors.GONE:
                continue
            raise to_drsvc(err, f"{label} of {tp[0]}-{tp[1]}", cluster) from err
        found[tp] = info.offset
    return found


#: The group's coordinator is moving or loading: an offset fetch is worth asking again
#: (:data:`drsvc.kafka.errors.COORDINATOR_MOVING`, named here too for this module's callers).
COORDINATOR_MOVING = errors.COORDINATOR_MOVING


def group_offsets_settings(group: str) -> dict[str, Any]:
    """The settings (an overlay for :meth:`drsvc.kafka.clients.KafkaClients.consumer`) of a
    consumer of ``group`` that never joins it (no subscribe, no commit), to read the group's
    committed offsets. Not the Admin API: librdkafka's ListConsumerGroupOffsets crashes the
    process when the coordinator answers NOT_COORDINATOR (librdkafka issue 5040, still in 2.16).
    """
    return {"group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False}


def group_offsets_consumer(client_config: Mapping[str, str], group: str) -> Consumer:
    """A consumer as :func:`group_offsets_settings` says, for callers that hold a cluster's
    resolved settings rather than a client factory."""
    return Consumer(
        {
            **client_config,
            **group_offsets_settings(group),
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
    *,
    clock: Clock | None = None,
) -> list[TopicPartition]:
    """``consumer.committed(partitions)``, asked again while the answer is one of ``retry_on``
    (the group's coordinator moving or loading) for up to ``timeout_s``. Any other error, and the
    last one once the time is up, is raised as the KafkaException it came as (a caller outside
    the port maps it with :func:`drsvc.kafka.errors.translated`). ``clock`` measures the time
    (the machine's by default)."""
    clock = SystemClock() if clock is None else clock
    deadline = clock.monotonic() + timeout_s
    while True:
        try:
            answer: list[TopicPartition] = consumer.committed(partitions, timeout=timeout_s)
            return answer
        except KafkaException as err:
            if err.args[0].code() not in retry_on or clock.monotonic() > deadline:
                raise
            clock.sleep(pause_s)


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
    try:
        return group_offsets(consumer, group, partitions, timeout_s)
    finally:
        consumer.close()


def group_offsets(
    consumer: Consumer,
    group: str,
    partitions: Collection[Partition],
    timeout_s: float = 30.0,
    *,
    cluster: str | None = None,
    clock: Clock | None = None,
) -> dict[Partition, GroupOffset]:
    """``group``'s committed offsets, with their metadata, of those of ``partitions`` that have
    one, asked through ``consumer``, a consumer of ``group`` built with
    :func:`group_offsets_settings` (the caller owns it). A coordinator moving or a cluster not
    answering is asked again for up to ``timeout_s`` (on ``clock``); errors are mapped by
    :mod:`drsvc.kafka.errors`, naming ``cluster``."""
    if not partitions:
        return {}
    wanted = [TopicPartition(topic, partition) for topic, partition in sorted(set(partitions))]
    with translated(f"committed offsets of group '{group}'", cluster):
        answer = ask_committed(
            consumer, wanted, timeout_s, retry_on=_COORDINATOR_NOT_READY, clock=clock
        )
    return {
        (tp.topic, tp.partition): GroupOffset(tp.offset, tp.metadata or "")
        for tp in answer
        if tp.error is None and tp.offset >= 0
    }
