"""Two small additions to the in-memory Kafka for the readers' tests: a cluster that stops
answering once its readers have handed out a number of records (a read that truly stops
moving, midway), and admin clients that create topics and list offsets on the fake clusters.

:class:`StallingKafkaClients` is :class:`fake_kafka.FakeKafkaClients` with both; nothing of
the fake itself changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from fake_kafka import FakeCluster, FakeConsumer, FakeKafkaClients

from drsvc.kafka.types import AdminClient, Consumer

__all__ = ["FakeAdmin", "StallingKafkaClients"]


def _done(result: Any = None, error: KafkaError | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(result)
    return future


class FakeAdmin:
    """An admin client of one fake cluster: topic creation and ListOffsets, as the readers'
    callers use them. ``failures`` answers a partition's ListOffsets with an error instead."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.failures: dict[tuple[str, int], KafkaError] = {}
        #: topics created through this client, with their partitions and configs
        self.created: list[tuple[str, int, dict[str, str]]] = []

    def create_topics(
        self, topics: Sequence[Any], operation_timeout: float = 0.0
    ) -> dict[str, Future[Any]]:
        answers: dict[str, Future[Any]] = {}
        for new in topics:
            if new.topic in self.cluster.topics:
                answers[new.topic] = _done(error=KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
                continue
            self.cluster.create_topic(new.topic, new.num_partitions)
            self.created.append((new.topic, new.num_partitions, dict(new.config)))
            answers[new.topic] = _done()
        return answers

    def list_offsets(
        self,
        request: Mapping[TopicPartition, Any],
        isolation_level: Any = None,
        request_timeout: float = 0.0,
    ) -> dict[TopicPartition, Future[Any]]:
        answers: dict[TopicPartition, Future[Any]] = {}
        for tp, spec in request.items():
            key = (tp.topic, tp.partition)
            failure = self.failures.get(key)
            if failure is not None:
                answers[tp] = _done(error=failure)
                continue
            topic = self.cluster.topics.get(tp.topic)
            if topic is None or tp.partition >= self.cluster.partition_count(tp.topic):
                answers[tp] = _done(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
                continue
            name = type(spec).__name__
            if "Earliest" in name:
                offset = self.cluster.log_start_offset(*key)
            elif "Latest" in name:
                offset = self.cluster.last_stable_offset(*key)
            else:  # a timestamp: the first record at or after it
                records = self.cluster.records(*key)
                at = [r.offset for r in records if r.timestamp >= spec.timestamp]
                offset = at[0] if at else -1
            answers[tp] = _done(SimpleNamespace(offset=offset))
        return answers


class StallingKafkaClients(FakeKafkaClients):
    """Fake clients whose cluster goes down once its consumers have handed out
    ``stall_after`` records in all (never when None), and whose admin clients are
    :class:`FakeAdmin` (one per cluster, as the real factory keeps them)."""

    def __init__(self, *clusters: FakeCluster, stall_after: int | None = None) -> None:
        super().__init__(*clusters)
        self.stall_after = stall_after
        self.delivered = 0
        self.admins: dict[str, FakeAdmin] = {}

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        consumer = cast(FakeConsumer, super().consumer(alias, overlay))
        consume = consumer.consume
        cluster = self.clusters[alias]

        def counting(num_messages: int = 1, timeout: float | None = -1) -> list[Any]:
            messages = consume(num_messages, timeout)
            self.delivered += sum(1 for m in messages if m.error() is None)
            if self.stall_after is not None and self.delivered >= self.stall_after:
                cluster.down = True
            return messages

        consumer.consume = counting  # type: ignore[method-assign]
        return cast(Consumer, consumer)

    def admin(self, alias: str) -> AdminClient:
        admin = self.admins.get(alias)
        if admin is None:
            admin = self.admins[alias] = FakeAdmin(self.clusters[alias])
        return cast(AdminClient, admin)
