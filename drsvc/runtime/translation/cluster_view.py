"""What offset translation reads from a cluster, behind one small protocol.

:class:`ClusterView` is the whole of translation's I/O: a group's committed offsets, topic ids, end
offsets and a flow's offset syncs. :class:`KafkaClusterView` reads them from a real cluster (topic
ids and end offsets through the Admin API, committed offsets and syncs through consumers that never
join a group); unit tests give the service a fake instead.

End offsets are *last stable offsets*: what a ``read_committed`` consumer can reach (records of
open transactions do not count yet), the same view the replicator copies with.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from drsvc.kafka.admin import (
    ask_committed,
    describe_topics,
    group_offsets_settings,
    list_offsets,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import translated
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.types import AdminClient
from drsvc.kafka.types import TopicPartition as KafkaPartition
from drsvc.runtime.translation.kept_syncs import KeptSyncs
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from failover import naming
from failover.offset_syncs import TopicPartition


@dataclass(frozen=True)
class CommittedOffset:
    """A group's committed offset of one partition and, when the client sent it, its epoch."""

    offset: int
    leader_epoch: int | None = None


class ClusterView(Protocol):
    """Read-only access to one cluster, as much as translation needs."""

    alias: str

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        """Every partition ``group`` has committed a (non-negative) offset for."""
        ...

    def topic_ids(self, topics: Collection[str]) -> dict[str, bytes]:
        """Ids of those of ``topics`` that exist."""
        ...

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Last stable offsets of those of ``partitions`` that exist."""
        ...

    def read_syncs(self, sync_topic: str, topics: Collection[str]) -> SyncTopicRead:
        """The offset syncs in ``sync_topic`` on this cluster for source ``topics``, up to the
        topic's end now."""
        ...


class KafkaClusterView:
    """:class:`ClusterView` over a real cluster; Kafka errors become drsvc errors naming the
    cluster (:mod:`drsvc.kafka.errors`).

    Its clients come from ``clients`` (built from ``client_config`` when None): one admin client
    for the cluster, shared with whoever shares the factory, and a consumer per read.

    Sync topics are read into the indexes of ``kept`` (its own when None): in full the first
    time, then only the syncs written since (:mod:`~drsvc.runtime.translation.kept_syncs`).
    Views that share one :class:`KeptSyncs` share the indexes; it may be shared between threads.
    """

    def __init__(
        self,
        alias: str,
        client_config: Mapping[str, str],
        timeout_s: float = 30.0,
        *,
        clients: KafkaClients | None = None,
        kept: KeptSyncs | None = None,
    ):
        self.alias = alias
        self._timeout_s = timeout_s
        self._clients = (
            clients if clients is not None else KafkaClients.for_configs({alias: client_config})
        )
        self._kept = kept if kept is not None else KeptSyncs()

    @property
    def clients(self) -> KafkaClients:
        """The factory this view's clients come from."""
        return self._clients

    @property
    def admin(self) -> AdminClient:
        """The cluster's admin client (built on first use, then kept)."""
        return self._clients.admin(self.alias)

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        # Every partition of the cluster, through a consumer of the group that never joins it
        # (see group_offsets_settings); a coordinator moving or loading is asked again.
        consumer = self._clients.consumer(self.alias, group_offsets_settings(group))
        try:
            with translated(f"committed offsets of group '{group}'", self.alias):
                metadata = consumer.list_topics(timeout=self._timeout_s)
                partitions = [
                    KafkaPartition(name, p)
                    for name, topic in sorted(metadata.topics.items())
                    if not name.startswith("__")  # Kafka's own topics
                    for p in sorted(topic.partitions)
                ]
                answer = (
                    ask_committed(consumer, partitions, self._timeout_s, clock=self._clients.clock)
                    if partitions
                    else []
                )
        finally:
            consumer.close()
        committed: dict[TopicPartition, CommittedOffset] = {}
        for tp in answer:
            if tp.error is not None or tp.offset < 0:
                continue
            epoch = tp.leader_epoch
            committed[TopicPartition(tp.topic, tp.partition)] = CommittedOffset(
                tp.offset, epoch if epoch is not None and epoch >= 0 else None
            )
        return committed

    def topic_ids(self, topics: Collection[str]) -> dict[str, bytes]:
        found = describe_topics(
            self.admin, sorted(set(topics)), self._timeout_s, cluster=self.alias
        )
        return {name: info.topic_id for name, info in found.items()}

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        found = list_offsets(
            self.admin,
            [(tp.topic, tp.partition) for tp in partitions],
            "latest",
            self._timeout_s,
            cluster=self.alias,
        )
        return {TopicPartition(topic, p): offset for (topic, p), offset in found.items()}

    def read_syncs(self, sync_topic: str, topics: Collection[str]) -> SyncTopicRead:
        # The id tells a recreated topic from one that only grew, even when the new one has
        # already passed the offsets read of the old (the kept index is then rebuilt).
        topic_id = self.topic_ids([sync_topic]).get(sync_topic)
        with self._clients.reader(
            self.alias,
            sync_topic,
            what="offset-sync topic",
            # Named so operators see who reads; never joined nor committed to.
            group=naming.TRANSLATE_READER_GROUP,
            committed=True,
            # A long first read keeps going while it moves (see sync_reader).
            limits=ReadLimits(stall_s=max(self._timeout_s, 60.0)),
        ) as reader:
            return self._kept.topic(self.alias, sync_topic).extend(reader, topic_id, topics)
