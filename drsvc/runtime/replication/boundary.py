"""Everything the replication engine needs from the outside world, behind one object.

The engine and its two delivery modes never construct a Kafka client, read the wall clock or
start a thread themselves: they ask a :class:`KafkaBoundary` for clients (by cluster alias, with
their own settings only), the flow's topic catalog (discovery, internal topics, slot ownership),
the sync log (what the target already holds) and the heartbeat copier, and a
:class:`drsvc.kafka.clock.Clock` for the time. :class:`ConfluentKafka` is the real boundary: its
clients come from the port's factory (:class:`drsvc.kafka.clients.KafkaClients`), which merges
the clusters' bootstrap and security settings. Tests pass fakes, so the whole loop of both modes
runs in a unit test without a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import create_topic, describe_topics
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock, SystemClock
from drsvc.kafka.errors import translated
from drsvc.kafka.types import Consumer, ConsumerGroupState, Producer
from drsvc.runtime.replication import repair
from drsvc.runtime.replication.heartbeat_copier import HeartbeatCopier
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.topics import (
    MirroredTopic,
    TopicMirror,
    ensure_sync_topic,
    flow_clients,
    mirror_for,
)
from failover import offset_syncs
from failover.keepalive import LastCopy

#: how long a topic created a moment ago may take to show in the target's metadata
CREATED_TOPIC_WAIT_S = 30.0


class TopicCatalog(Protocol):
    """The flow's topics on both clusters: discovery and the internal topics."""

    def refresh(self) -> dict[str, MirroredTopic]:
        """Discover source topics, create or grow remote topics; what is mirrored now. Raises
        :class:`drsvc.errors.KafkaUnavailableError` when a cluster cannot be asked."""
        ...

    def ensure_sync_topic(self) -> None: ...

    def ensure_topic(self, name: str, partitions: int) -> int:
        """Create an internal topic on the target if it is missing; its partition count."""
        ...

    def slot_assigned(self, group: str, member_id: str, topic: str, slot: int) -> bool | None:
        """Does ``group``'s coordinator assign ``topic``'s partition ``slot`` to ``member_id``?
        None when it cannot say (unreachable, or a rebalance in progress)."""
        ...


class SyncLog(Protocol):
    """What the target already holds of a flow: copies by their provenance headers, and the
    written offset syncs (see :mod:`.repair`)."""

    def unsynced_copies(
        self,
        remote_topic: str,
        partition: int,
        source_topic: str,
        start: int,
        timeout_s: float,
        after: int | None = None,
    ) -> list[tuple[int, int]]: ...

    def written_sync_end(
        self, tp: offset_syncs.TopicPartition, topic_ids: tuple[bytes, bytes], timeout_s: float
    ) -> int: ...

    def written_last_copy(
        self,
        tp: offset_syncs.TopicPartition,
        topic_ids: tuple[bytes, bytes],
        max_scan: int,
        timeout_s: float,
    ) -> LastCopy | None: ...


class BackgroundCopier(Protocol):
    def start(self) -> None: ...

    def stop(self, timeout_s: float = 10.0) -> None: ...


class KafkaBoundary(Protocol):
    #: discovery runs on a thread of its own (real clusters), or in the loop (fakes, where
    #: nothing runs on a thread); see :mod:`.discovery`
    @property
    def background_discovery(self) -> bool: ...

    def consumer(self, alias: str, overlay: Mapping[str, Any]) -> Consumer:
        """A new consumer of cluster ``alias`` (the flow's source or target) with the role's
        own settings ``overlay``; called at start and on rare events, never per record."""
        ...

    def producer(self, alias: str, overlay: Mapping[str, Any]) -> Producer:
        """A new producer for cluster ``alias``, as :meth:`consumer`."""
        ...

    def topics(self) -> TopicCatalog: ...

    def sync_log(self) -> SyncLog: ...

    def heartbeat_copier(self) -> BackgroundCopier: ...


@dataclass
class _MirrorCatalog:
    settings: WorkerSettings
    mirror: TopicMirror
    clock: Clock

    def refresh(self) -> dict[str, MirroredTopic]:
        return self.mirror.refresh()

    def ensure_sync_topic(self) -> None:
        ensure_sync_topic(self.mirror, self.settings)

    def ensure_topic(self, name: str, partitions: int) -> int:
        admin = self.mirror.target_admin
        create_topic(admin, name, partitions=partitions, config={})
        # A topic created a moment ago may not be in every broker's metadata yet.
        clock = self.clock
        deadline = clock.monotonic() + CREATED_TOPIC_WAIT_S
        while True:
            found = describe_topics(admin, [name]).get(name)
            if found is not None:
                return found.partitions
            if clock.monotonic() >= deadline:
                raise KafkaUnavailableError(f"topic {name} was created but cannot be described")
            clock.sleep(0.2)

    def slot_assigned(self, group: str, member_id: str, topic: str, slot: int) -> bool | None:
        with translated(f"describing consumer group '{group}'", self.settings.target_alias):
            future = self.mirror.target_admin.describe_consumer_groups([group], request_timeout=5.0)
            description = future[group].result(timeout=10.0)
        if not member_id or description.state != ConsumerGroupState.STABLE:
            return None
        for member in description.members:
            if member.member_id == member_id:
                assignment = member.assignment.topic_partitions if member.assignment else []
                return any(tp.topic == topic and tp.partition == slot for tp in assignment)
        return False


@dataclass(frozen=True)
class _TargetSyncLog:
    settings: WorkerSettings

    def unsynced_copies(
        self,
        remote_topic: str,
        partition: int,
        source_topic: str,
        start: int,
        timeout_s: float,
        after: int | None = None,
    ) -> list[tuple[int, int]]:
        s = self.settings
        return repair.unsynced_copies(
            s.target_client,
            remote_topic,
            partition,
            s.source_alias,
            source_topic,
            start,
            timeout_s=timeout_s,
            after=after,
        )

    def written_sync_end(
        self, tp: offset_syncs.TopicPartition, topic_ids: tuple[bytes, bytes], timeout_s: float
    ) -> int:
        s = self.settings
        return repair.written_sync_end(
            s.target_client, s.sync_topic, tp, topic_ids, timeout_s=timeout_s
        )

    def written_last_copy(
        self,
        tp: offset_syncs.TopicPartition,
        topic_ids: tuple[bytes, bytes],
        max_scan: int,
        timeout_s: float,
    ) -> LastCopy | None:
        s = self.settings
        return repair.written_last_copy(
            s.target_client, s.sync_topic, tp, topic_ids, max_scan=max_scan, timeout_s=timeout_s
        )


@dataclass
class ConfluentKafka:
    """The real boundary: confluent-kafka clients on the flow's clusters. One factory of the
    flow (:func:`~drsvc.runtime.replication.topics.flow_clients`, from the settings' resolved
    source and target settings) builds the engine's clients, the topic mirror's and the
    heartbeat copier's, so each cluster has one admin client in the worker."""

    settings: WorkerSettings
    clock: Clock = field(default_factory=SystemClock)
    _clients: KafkaClients | None = field(default=None, init=False)
    _catalog: _MirrorCatalog | None = field(default=None, init=False)

    @property
    def background_discovery(self) -> bool:
        return True

    @property
    def clients(self) -> KafkaClients:
        """The flow's client factory (built on first use)."""
        if self._clients is None:
            self._clients = flow_clients(self.settings, self.clock)
        return self._clients

    def consumer(self, alias: str, overlay: Mapping[str, Any]) -> Consumer:
        return self.clients.consumer(alias, overlay)

    def producer(self, alias: str, overlay: Mapping[str, Any]) -> Producer:
        return self.clients.producer(alias, overlay)

    def topics(self) -> TopicCatalog:
        if self._catalog is None:
            mirror = mirror_for(self.settings, clients=self.clients)
            self._catalog = _MirrorCatalog(self.settings, mirror, self.clock)
        return self._catalog

    def sync_log(self) -> SyncLog:
        return _TargetSyncLog(self.settings)

    def heartbeat_copier(self) -> BackgroundCopier:
        return HeartbeatCopier(self.settings, clients=self.clients)
