"""What offset translation reads from a cluster, behind one small protocol.

:class:`ClusterView` is the whole of translation's I/O: a group's committed offsets, topic ids, end
offsets and a flow's offset syncs. :class:`KafkaClusterView` reads them from a real cluster (topic
ids and end offsets through the Admin API, committed offsets and syncs through consumers that never
join a group); unit tests give the service a fake instead.

End offsets are *last stable offsets*: what a ``read_committed`` consumer can reach (records of
open transactions do not count yet), the same view the replicator copies with.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.admin import (
    COORDINATOR_MOVING,
    admin_client,
    ask_committed,
    describe_topics,
    group_offsets_consumer,
)
from drsvc.runtime.translation.sync_reader import QUIET, SyncTopicRead, read_sync_topic
from failover.offset_syncs import TopicPartition

_UNAVAILABLE = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, *COORDINATOR_MOVING)


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
        """The offset syncs in ``sync_topic`` on this cluster for source ``topics``."""
        ...


class KafkaClusterView:
    """:class:`ClusterView` over a real cluster; Kafka errors become drsvc errors here."""

    def __init__(self, alias: str, client_config: Mapping[str, str], timeout_s: float = 30.0):
        self.alias = alias
        self._client = dict(client_config)
        self._timeout_s = timeout_s
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self._client["bootstrap.servers"], {**self._client, **QUIET})
        return self._admin

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        # Every partition of the cluster, through a consumer of the group that never joins it
        # (see group_offsets_consumer); a coordinator moving or loading is asked again.
        consumer = group_offsets_consumer(self._client, group)
        what = f"committed offsets of group '{group}'"
        try:
            metadata = consumer.list_topics(timeout=self._timeout_s)
            partitions = [
                KafkaPartition(name, p)
                for name, topic in sorted(metadata.topics.items())
                if not name.startswith("__")  # Kafka's own topics
                for p in sorted(topic.partitions)
            ]
            answer = ask_committed(consumer, partitions, self._timeout_s) if partitions else []
        except KafkaException as err:
            error: KafkaError = err.args[0]
            if error.retriable() or error.code() in _UNAVAILABLE:
                raise self._unavailable(what, err) from err
            raise ConfigError(f"cluster '{self.alias}': {what}: {error.str()}") from err
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
        try:
            found = describe_topics(self.admin, sorted(set(topics)), self._timeout_s)
        except KafkaUnavailableError as err:
            raise KafkaUnavailableError(f"cluster '{self.alias}': {err}") from err
        return {name: info.topic_id for name, info in found.items()}

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {KafkaPartition(tp.topic, tp.partition): latest for tp in partitions}
        futures = self.admin.list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=self._timeout_s,
        )
        ends: dict[TopicPartition, int] = {}
        for kafka_tp, future in futures.items():
            tp = TopicPartition(kafka_tp.topic, kafka_tp.partition)
            try:
                info = future.result(timeout=self._timeout_s)
            except KafkaException as err:
                if err.args[0].code() in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    KafkaError._UNKNOWN_PARTITION,
                    KafkaError._UNKNOWN_TOPIC,
                ):
                    continue
                raise self._unavailable(f"end offset of {tp.topic}-{tp.partition}", err) from err
            except concurrent.futures.TimeoutError as err:
                raise self._timed_out(f"end offset of {tp.topic}-{tp.partition}") from err
            ends[tp] = info.offset
        return ends

    def read_syncs(self, sync_topic: str, topics: Collection[str]) -> SyncTopicRead:
        return read_sync_topic(
            self._client,
            sync_topic,
            cluster=self.alias,
            topics=topics,
            timeout_s=max(self._timeout_s, 60.0),
        )

    # -- errors -------------------------------------------------------------------------------

    def _unavailable(self, what: str, err: KafkaException) -> KafkaUnavailableError:
        return KafkaUnavailableError(f"cluster '{self.alias}': {what}: {err.args[0].str()}")

    def _timed_out(self, what: str) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"cluster '{self.alias}': {what}: no answer within {self._timeout_s:.0f}s"
        )
