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
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from drsvc.adapters.kafka_admin import admin_client, describe_topics
from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.translation.sync_reader import QUIET, SyncTopicRead, read_sync_topic
from failover.offset_syncs import TopicPartition

_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)
_UNAVAILABLE = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, *_COORDINATOR_MOVING)


@dataclass(frozen=True)
class CommittedOffset:
    """A group's committed offset of one partition and, when the client sent it, its epoch."""

    offset: int
    leader_epoch: int | None = None


class ClusterView(Protocol):
    """Read-only access to one cluster, as much as translation needs."""

    alias: str

    def committed_offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]:
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

    def committed_offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        # Asked through a consumer of the group (which never joins it: no subscribe, no commit)
        # for every partition of the cluster, not through the Admin API: librdkafka's
        # ListConsumerGroupOffsets crashes the process when the coordinator answers
        # NOT_COORDINATOR (librdkafka issue 5040, still in 2.16), which happens while a group's
        # coordinator moves or loads. The consumer path reports it as an error, asked again here.
        consumer = Consumer(
            {
                **self._client,
                "group.id": group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "socket.connection.setup.timeout.ms": 3000,
                **QUIET,
            }
        )
        what = f"committed offsets of group '{group}'"
        deadline = time.monotonic() + self._timeout_s
        try:
            metadata = consumer.list_topics(timeout=self._timeout_s)
            partitions = [
                KafkaPartition(name, p)
                for name, topic in sorted(metadata.topics.items())
                if not name.startswith("__")  # Kafka's own topics
                for p in sorted(topic.partitions)
            ]
            answer: list[KafkaPartition] = []
            while partitions:
                try:
                    answer = consumer.committed(partitions, timeout=self._timeout_s)
                    break
                except KafkaException as err:
                    # The group's coordinator is moving or loading: ask again, for a while.
                    if err.args[0].code() not in _COORDINATOR_MOVING:
                        raise
                    if time.monotonic() > deadline:
                        raise self._unavailable(what, err) from err
                    time.sleep(0.2)
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
