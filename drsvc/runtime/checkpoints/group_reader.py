"""What a checkpoint stream reads from a cluster: groups, committed offsets, topics, end offsets.

Committed offsets are read through one idle consumer per group (``group.id`` set, never subscribed,
never committing), kept between cycles, rather than through the Admin API: librdkafka's
``ListConsumerGroupOffsets`` crashes the process when a coordinator answers ``NOT_COORDINATOR``
(librdkafka issue 5040), which happens whenever a group's coordinator moves. One request per group
per cycle asks for every partition of the topics the stream can translate, so a poll is a batch.

Every call blocks; the stream runs them in a worker thread. Kafka errors become drsvc errors
naming the cluster (:mod:`drsvc.kafka.errors`). The cluster's one admin client comes from the
reader's client factory, which its translation view shares.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from drsvc.errors import DrsvcError, KafkaUnavailableError
from drsvc.kafka.admin import (
    TopicInfo,
    ask_committed,
    describe_topics,
    group_offsets_settings,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import translated
from drsvc.kafka.types import AdminClient, Consumer
from drsvc.kafka.types import TopicPartition as KafkaPartition
from drsvc.runtime.translation.cluster_view import KafkaClusterView
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
    """Groups, committed offsets, topics and end offsets of one real cluster. Its clients come
    from ``clients`` (built from ``client_config`` when None)."""

    def __init__(
        self,
        alias: str,
        client_config: Mapping[str, str],
        timeout_s: float = 30.0,
        max_consumers: int = 256,
        *,
        clients: KafkaClients | None = None,
    ) -> None:
        self.alias = alias
        self._timeout_s = timeout_s
        self._max_consumers = max_consumers
        self._consumers: OrderedDict[str, Consumer] = OrderedDict()
        self._clients = (
            clients if clients is not None else KafkaClients.for_configs({alias: client_config})
        )
        # The same factory: one admin client for the cluster, not one each.
        self._view = KafkaClusterView(alias, client_config, timeout_s, clients=self._clients)

    @property
    def admin(self) -> AdminClient:
        """The cluster's admin client (built on first use, then kept)."""
        return self._clients.admin(self.alias)

    def group_names(self) -> list[str]:
        """Every consumer group the cluster lists (any state, any protocol)."""
        with translated("listing consumer groups", self.alias):
            answer = self.admin.list_consumer_groups(request_timeout=self._timeout_s).result(
                timeout=self._timeout_s
            )
        for error in answer.errors or ():
            log.warning("cluster '%s': listing consumer groups: %s", self.alias, error)
        return sorted({listing.group_id for listing in answer.valid or ()})

    def topic_names(self) -> list[str]:
        """Names of every topic (Kafka's own ``__`` topics left out)."""
        with translated("listing topics", self.alias):
            metadata = self.admin.list_topics(timeout=self._timeout_s)
        return sorted(name for name in metadata.topics if not name.startswith("__"))

    def describe(self, names: Collection[str]) -> dict[str, TopicInfo]:
        """Ids and partition counts of those of ``names`` that exist."""
        return describe_topics(self.admin, sorted(set(names)), self._timeout_s, cluster=self.alias)

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, GroupCommit]:
        """The offsets ``group`` has committed for any of ``partitions`` (one request). Any
        failure to read them is a :class:`~drsvc.errors.KafkaUnavailableError` carrying the
        mapped error's message: it concerns this group only."""
        if not partitions:
            return {}
        consumer = self._consumer(group)
        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in sorted(partitions)]
        try:
            with translated(f"committed offsets of group '{group}'", self.alias):
                answer = ask_committed(
                    consumer, wanted, self._timeout_s, pause_s=0.1, clock=self._clients.clock
                )
        except DrsvcError as err:
            self._drop(group)  # a fresh consumer next time
            if isinstance(err, KafkaUnavailableError):
                raise
            # One group's problem (an ACL that lets drsvc read every group but this one, a
            # client that broke) is that group's: the stream skips a group it cannot read this
            # cycle (it catches KafkaUnavailableError) and goes on with the others.
            raise KafkaUnavailableError(str(err)) from err
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
        consumer = self._clients.consumer(self.alias, group_offsets_settings(group))
        self._consumers[group] = consumer
        while len(self._consumers) > self._max_consumers:
            oldest, _ = next(iter(self._consumers.items()))
            self._drop(oldest)
        return consumer

    def _drop(self, group: str) -> None:
        consumer = self._consumers.pop(group, None)
        if consumer is not None:
            consumer.close()
