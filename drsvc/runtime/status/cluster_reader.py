"""What ``drsvc status`` reads from one cluster, behind one small protocol.

:class:`ClusterReader` is the whole of status's I/O: topics and their partition counts, a group's
committed offsets (with their metadata), log start and end offsets, and who in a consumer group is
assigned which partitions. :class:`KafkaClusterReader` reads them from a real cluster, with Kafka
errors mapped to drsvc errors that name the cluster; unit tests use a fake.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.admin import (
    COORDINATOR_MOVING,
    admin_client,
    ask_committed,
    group_offsets_consumer,
)
from drsvc.runtime.translation.sync_reader import QUIET
from failover.offset_syncs import TopicPartition

_UNAVAILABLE = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, *COORDINATOR_MOVING)
_PARTITION_GONE = (
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
)


@dataclass(frozen=True)
class Commit:
    """A committed offset of a group and the metadata string committed with it."""

    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group and the partitions it is assigned."""

    member_id: str
    client_id: str
    host: str
    partitions: frozenset[TopicPartition]


class ClusterReader(Protocol):
    """Read-only access to one cluster, as much as status needs."""

    alias: str

    def partition_counts(self) -> dict[str, int]:
        """Every topic of the cluster and its number of partitions."""
        ...

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, Commit]:
        """Those of ``partitions`` that ``group`` has committed a (non-negative) offset for."""
        ...

    def log_starts(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """First offsets still in the log, of those of ``partitions`` that exist."""
        ...

    def log_ends(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Last stable offsets (what read_committed reaches), of those that exist."""
        ...

    def offsets_at(
        self, partitions: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The first offset at or after ``timestamp_ms``; None where no record is that new."""
        ...

    def group_members(self, group: str) -> list[GroupMember]:
        """The members of ``group`` and their assignments (none when the group is unknown)."""
        ...


class KafkaClusterReader:
    """:class:`ClusterReader` over a real cluster; every error names the cluster."""

    def __init__(self, alias: str, client_config: Mapping[str, str], timeout_s: float) -> None:
        self.alias = alias
        self._client = dict(client_config)
        self._timeout_s = timeout_s
        try:
            self._admin: AdminClient = admin_client(
                self._client["bootstrap.servers"], {**self._client, **QUIET}
            )
        except KafkaException as err:
            raise self._error("creating an admin client", err) from err

    def partition_counts(self) -> dict[str, int]:
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as err:
            raise self._error("listing topics", err) from err
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, Commit]:
        if not partitions:
            return {}
        what = f"committed offsets of group '{group}'"
        try:
            consumer = group_offsets_consumer(self._client, group)
        except KafkaException as err:
            raise self._error(what, err) from err
        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            answer = ask_committed(consumer, wanted, self._timeout_s)
        except KafkaException as err:
            raise self._error(what, err) from err
        finally:
            consumer.close()
        return {
            TopicPartition(tp.topic, tp.partition): Commit(tp.offset, tp.metadata or None)
            for tp in answer
            if tp.error is None and tp.offset >= 0
        }

    def log_starts(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        found = self._list_offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        return {tp: offset for tp, offset in found.items() if offset >= 0}

    def log_ends(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        found = self._list_offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        return {tp: offset for tp, offset in found.items() if offset >= 0}

    def offsets_at(
        self, partitions: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        spec = OffsetSpec.for_timestamp(timestamp_ms)
        found = self._list_offsets(partitions, spec)
        return {tp: offset if offset >= 0 else None for tp, offset in found.items()}

    def group_members(self, group: str) -> list[GroupMember]:
        what = f"members of group '{group}'"
        try:
            futures = self._admin.describe_consumer_groups([group], request_timeout=self._timeout_s)
            description = futures[group].result(timeout=self._timeout_s)
        except KafkaException as err:
            if err.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return []
            raise self._error(what, err) from err
        except concurrent.futures.TimeoutError as err:
            raise self._timed_out(what) from err
        return [_member(member) for member in description.members]

    # -- helpers ------------------------------------------------------------------------------

    def _list_offsets(
        self, partitions: Collection[TopicPartition], spec: Any
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        try:
            futures = self._admin.list_offsets(
                {KafkaPartition(tp.topic, tp.partition): spec for tp in partitions},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=self._timeout_s,
            )
        except KafkaException as err:
            raise self._error("listing offsets", err) from err
        offsets: dict[TopicPartition, int] = {}
        for kafka_tp, future in futures.items():
            tp = TopicPartition(kafka_tp.topic, kafka_tp.partition)
            what = f"offsets of {tp.topic}-{tp.partition}"
            try:
                offsets[tp] = future.result(timeout=self._timeout_s).offset
            except KafkaException as err:
                if err.args[0].code() in _PARTITION_GONE:
                    continue  # deleted since it was listed
                raise self._error(what, err) from err
            except concurrent.futures.TimeoutError as err:
                raise self._timed_out(what) from err
        return offsets

    def _error(self, what: str, err: KafkaException) -> KafkaUnavailableError | ConfigError:
        error: KafkaError = err.args[0]
        message = f"cluster '{self.alias}': {what}: {error.str()}"
        if error.retriable() or error.code() in _UNAVAILABLE:
            return KafkaUnavailableError(message)
        return ConfigError(message)

    def _timed_out(self, what: str) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"cluster '{self.alias}': {what}: no answer within {self._timeout_s:.0f}s"
        )


def _member(member: Any) -> GroupMember:
    assignment = member.assignment
    partitions = assignment.topic_partitions if assignment is not None else []
    return GroupMember(
        member_id=member.member_id,
        client_id=member.client_id,
        host=member.host,
        partitions=frozenset(TopicPartition(tp.topic, tp.partition) for tp in partitions),
    )
