"""What ``drsvc status`` reads from one cluster, behind one small protocol.

:class:`ClusterReader` is the whole of status's I/O: topics and their partition counts, a group's
committed offsets (with their metadata), log start and end offsets, and who in a consumer group is
assigned which partitions. :class:`KafkaClusterReader` reads them from a real cluster, with Kafka
errors mapped to drsvc errors that name the cluster (:mod:`drsvc.kafka.errors`); unit tests use a
fake.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from drsvc.kafka.admin import (
    ask_committed,
    consumer_group_members,
    group_offsets_settings,
    list_offsets,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import translated
from drsvc.kafka.types import AdminClient
from drsvc.kafka.types import TopicPartition as KafkaPartition
from failover.offset_syncs import TopicPartition


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
    """:class:`ClusterReader` over a real cluster; every error names the cluster and is mapped
    by :mod:`drsvc.kafka.errors`. Its clients come from ``clients`` (built from
    ``client_config`` when None): the cluster's one admin client, built here, and a consumer
    per read of committed offsets."""

    def __init__(
        self,
        alias: str,
        client_config: Mapping[str, str],
        timeout_s: float,
        *,
        clients: KafkaClients | None = None,
    ) -> None:
        self.alias = alias
        self._timeout_s = timeout_s
        self._clients = (
            clients if clients is not None else KafkaClients.for_configs({alias: client_config})
        )
        # Built now: settings the client refuses are reported before anything is read.
        self._admin: AdminClient = self._clients.admin(alias)

    def partition_counts(self) -> dict[str, int]:
        with translated("listing topics", self.alias):
            metadata = self._admin.list_topics(timeout=self._timeout_s)
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
        consumer = self._clients.consumer(self.alias, group_offsets_settings(group))
        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            with translated(f"committed offsets of group '{group}'", self.alias):
                answer = ask_committed(consumer, wanted, self._timeout_s, clock=self._clients.clock)
        finally:
            consumer.close()
        return {
            TopicPartition(tp.topic, tp.partition): Commit(tp.offset, tp.metadata or None)
            for tp in answer
            if tp.error is None and tp.offset >= 0
        }

    def log_starts(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        found = self._list_offsets(partitions, "earliest")
        return {tp: offset for tp, offset in found.items() if offset >= 0}

    def log_ends(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        found = self._list_offsets(partitions, "latest")
        return {tp: offset for tp, offset in found.items() if offset >= 0}

    def offsets_at(
        self, partitions: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        found = self._list_offsets(partitions, timestamp_ms)
        return {tp: offset if offset >= 0 else None for tp, offset in found.items()}

    def group_members(self, group: str) -> list[GroupMember]:
        members = consumer_group_members(self._admin, group, self._timeout_s, cluster=self.alias)
        return [_member(member) for member in members]

    # -- helpers ------------------------------------------------------------------------------

    def _list_offsets(
        self,
        partitions: Collection[TopicPartition],
        which: Literal["earliest", "latest"] | int,
    ) -> dict[TopicPartition, int]:
        found = list_offsets(
            self._admin,
            [(tp.topic, tp.partition) for tp in partitions],
            which,
            self._timeout_s,
            cluster=self.alias,
        )
        return {TopicPartition(topic, p): offset for (topic, p), offset in found.items()}


def _member(member: Any) -> GroupMember:
    assignment = member.assignment
    partitions = assignment.topic_partitions if assignment is not None else []
    return GroupMember(
        member_id=member.member_id,
        client_id=member.client_id,
        host=member.host,
        partitions=frozenset(TopicPartition(tp.topic, tp.partition) for tp in partitions),
    )
