"""What a checkpoint stream reads from a cluster: groups, committed offsets, topics, end offsets.

Committed offsets are read through one idle consumer per group (``group.id`` set, never subscribed,
never committing), kept between cycles, rather than through the Admin API: librdkafka's
``ListConsumerGroupOffsets`` crashes the process when a coordinator answers ``NOT_COORDINATOR``
(librdkafka issue 5040), which happens whenever a group's coordinator moves. One request per group
per cycle asks for every partition of the topics the stream can translate, so a poll is a batch.

Every call blocks; the stream runs them in a worker thread. Kafka errors become
:class:`~drsvc.errors.KafkaUnavailableError` naming the cluster.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import (
    TopicInfo,
    admin_client,
    ask_committed,
    describe_topics,
    group_offsets_consumer,
)
from drsvc.runtime.translation.cluster_view import KafkaClusterView
from drsvc.runtime.translation.sync_reader import QUIET
from failover.offset_syncs import TopicPartition

__all__ = ["GroupCommit", "KafkaGroupReader"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupCommit:
    """A group's committed position of one partition."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""


class KafkaGroupReader:
    """Groups, committed offsets, topics and end offsets of one real cluster."""

    def __init__(
        self,
        alias: str,
        client_config: Mapping[str, str],
        timeout_s: float = 30.0,
        max_consumers: int = 256,
    ) -> None:
        self.alias = alias
        self._client = dict(client_config)
        self._timeout_s = timeout_s
        self._max_consumers = max_consumers
        self._consumers: OrderedDict[str, Consumer] = OrderedDict()
        self._admin: AdminClient | None = None
        self._view = KafkaClusterView(alias, client_config, timeout_s)

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self._client["bootstrap.servers"], {**self._client, **QUIET})
        return self._admin

    def group_names(self) -> list[str]:
        """Every consumer group the cluster lists (any state, any protocol)."""
        try:
            answer = self.admin.list_consumer_groups(request_timeout=self._timeout_s).result(
                timeout=self._timeout_s
            )
        except KafkaException as err:
            raise self._unavailable("listing consumer groups", err) from err
        except TimeoutError as err:
            raise KafkaUnavailableError(
                f"cluster '{self.alias}': listing consumer groups: no answer within "
                f"{self._timeout_s:.0f}s"
            ) from err
        for error in answer.errors or ():
            log.warning("cluster '%s': listing consumer groups: %s", self.alias, error)
        return sorted({listing.group_id for listing in answer.valid or ()})

    def topic_names(self) -> list[str]:
        """Names of every topic (Kafka's own ``__`` topics left out)."""
        try:
            return sorted(
                name
                for name in self.admin.list_topics(timeout=self._timeout_s).topics
                if not name.startswith("__")
            )
        except KafkaException as err:
            raise self._unavailable("listing topics", err) from err

    def describe(self, names: Collection[str]) -> dict[str, TopicInfo]:
        """Ids and partition counts of those of ``names`` that exist."""
        try:
            return describe_topics(self.admin, sorted(set(names)), self._timeout_s)
        except KafkaUnavailableError as err:
            raise KafkaUnavailableError(f"cluster '{self.alias}': {err}") from err

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, GroupCommit]:
        """The offsets ``group`` has committed for any of ``partitions`` (one request)."""
        if not partitions:
            return {}
        consumer = self._consumer(group)
        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in sorted(partitions)]
        try:
            answer = ask_committed(consumer, wanted, self._timeout_s, pause_s=0.1)
        except KafkaException as err:
            self._drop(group)
            raise self._unavailable(f"committed offsets of group '{group}'", err) from err
        found: dict[TopicPartition, GroupCommit] = {}
        for tp in answer:
            if tp.error is not None or tp.offset < 0:
                continue
            epoch = tp.leader_epoch
            found[TopicPartition(tp.topic, tp.partition)] = GroupCommit(
                tp.offset,
                epoch if epoch is not None and epoch >= 0 else None,
                tp.metadata or "",
            )
        return found

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Last stable offsets of those of ``partitions`` that exist."""
        return self._view.end_offsets(partitions)

    def forget_groups_except(self, groups: Collection[str]) -> None:
        """Close the consumers of groups that are gone."""
        for group in [g for g in self._consumers if g not in groups]:
            self._drop(group)

    def close(self) -> None:
        for group in list(self._consumers):
            self._drop(group)

    def _consumer(self, group: str) -> Consumer:
        consumer = self._consumers.get(group)
        if consumer is not None:
            self._consumers.move_to_end(group)
            return consumer
        consumer = group_offsets_consumer(self._client, group)
        self._consumers[group] = consumer
        while len(self._consumers) > self._max_consumers:
            oldest, _ = next(iter(self._consumers.items()))
            self._drop(oldest)
        return consumer

    def _drop(self, group: str) -> None:
        consumer = self._consumers.pop(group, None)
        if consumer is not None:
            consumer.close()

    def _unavailable(self, what: str, err: KafkaException) -> KafkaUnavailableError:
        return KafkaUnavailableError(f"cluster '{self.alias}': {what}: {err.args[0].str()}")
