"""The one ListOffsets of the port (:func:`drsvc.kafka.admin.list_offsets`): log starts, last
stable offsets and offsets at a time, partitions that are gone left out, every other answer
mapped by :mod:`drsvc.kafka.errors` naming the partition and the cluster. Run on the in-memory
Kafka through a small admin client of it."""

from __future__ import annotations

from typing import cast

import pytest
from confluent_kafka import KafkaError
from fake_kafka import FakeClock, FakeCluster
from stalling_kafka import FakeAdmin, StallingKafkaClients

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.admin import list_offsets
from drsvc.kafka.types import AdminClient
from drsvc.runtime.status.cluster_reader import KafkaClusterReader
from drsvc.runtime.translation.cluster_view import KafkaClusterView
from failover.offset_syncs import TopicPartition


def east() -> tuple[FakeClock, FakeCluster]:
    clock = FakeClock()
    cluster = FakeCluster("east", clock)
    cluster.create_topic("orders", 2)
    for n in range(10):
        cluster.append("orders", 0, f"r{n}", timestamp=1_000 + n)
    cluster.delete_records("orders", 0, before=3)
    cluster.append("orders", 1, "open", transaction="tx")  # holds partition 1's stable end at 0
    return clock, cluster


def test_starts_stable_ends_and_offsets_at_a_time_of_the_partitions_that_exist() -> None:
    _clock, cluster = east()
    admin = cast(AdminClient, FakeAdmin(cluster))
    wanted = [("orders", 0), ("orders", 1), ("orders", 7), ("gone", 0)]

    assert list_offsets(admin, wanted, "earliest") == {("orders", 0): 3, ("orders", 1): 0}
    assert list_offsets(admin, wanted, "latest") == {("orders", 0): 10, ("orders", 1): 0}
    assert list_offsets(admin, wanted, 1_005) == {("orders", 0): 5, ("orders", 1): -1}
    assert list_offsets(admin, [], "latest") == {}


def test_other_answers_are_mapped_naming_the_partition_and_the_cluster() -> None:
    _clock, cluster = east()
    fake = FakeAdmin(cluster)
    admin = cast(AdminClient, fake)
    fake.failures[("orders", 1)] = KafkaError(KafkaError.REQUEST_TIMED_OUT)
    with pytest.raises(
        KafkaUnavailableError,
        match=r"^cluster 'east': latest offset of orders-1: REQUEST_TIMED_OUT",
    ):
        list_offsets(admin, [("orders", 1)], "latest", cluster="east")

    fake.failures[("orders", 1)] = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(ConfigError, match=r"earliest offset of orders-1.*needs an ACL"):
        list_offsets(admin, [("orders", 1)], "earliest", cluster="east")


def test_the_views_ask_the_one_admin_client_of_their_cluster() -> None:
    _clock, cluster = east()
    clients = StallingKafkaClients(cluster)
    view = KafkaClusterView("east", {}, clients=clients)
    reader = KafkaClusterReader("east", {}, 5.0, clients=clients)
    partitions = [TopicPartition("orders", 0), TopicPartition("orders", 1)]

    assert view.end_offsets(partitions) == {partitions[0]: 10, partitions[1]: 0}
    assert reader.log_starts(partitions) == {partitions[0]: 3, partitions[1]: 0}
    assert reader.log_ends(partitions) == {partitions[0]: 10, partitions[1]: 0}
    assert reader.offsets_at(partitions, 1_002) == {partitions[0]: 3, partitions[1]: None}
    assert list(clients.admins) == ["east"]  # one admin client, shared
