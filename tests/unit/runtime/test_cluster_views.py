"""The translation view, the checkpoint stream's group reader and the group-offset syncer's
target on the in-memory Kafka: committed offsets read by consumers that never join their group,
end offsets through the cluster's one admin client, shared by whoever shares the factory, and
errors that name the cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from fake_kafka import FakeClock, FakeCluster
from stalling_kafka import StallingKafkaClients

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import GroupOffset
from drsvc.runtime.checkpoints.group_reader import GroupCommit, KafkaGroupReader
from drsvc.runtime.checkpoints.group_sync import KafkaTargetGroups
from drsvc.runtime.translation.cluster_view import CommittedOffset, KafkaClusterView
from failover.offset_syncs import TopicPartition

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def east() -> tuple[FakeCluster, StallingKafkaClients]:
    cluster = FakeCluster("east", FakeClock())
    cluster.create_topic("orders", 2)
    for n in range(10):
        cluster.append("orders", 0, f"r{n}")
    cluster.set_committed("g", "orders", 0, 7, metadata="m", leader_epoch=4)
    cluster.set_committed("g", "orders", 1, 0)
    return cluster, StallingKafkaClients(cluster)


def test_the_view_reads_a_group_s_commits_without_joining_it() -> None:
    cluster, clients = east()
    view = KafkaClusterView("east", {}, clients=clients)

    assert view.committed("g") == {ORDERS_0: CommittedOffset(7, 4), ORDERS_1: CommittedOffset(0)}
    assert view.committed("nobody") == {}
    assert all(c.closed and c.memberid() is None for c in clients.consumers)
    assert cluster.group_members("g") == []


def test_a_cluster_that_does_not_answer_is_named() -> None:
    cluster, clients = east()
    cluster.down = True
    view = KafkaClusterView("east", {}, 5.0, clients=clients)
    with pytest.raises(KafkaUnavailableError, match=r"^cluster 'east': committed offsets of group"):
        view.committed("g")


def test_the_group_reader_keeps_a_consumer_per_group_and_shares_its_view_s_admin() -> None:
    _cluster, clients = east()
    reader = KafkaGroupReader("east", {}, clients=clients)

    for _ in range(2):
        assert reader.committed("g", [ORDERS_0, ORDERS_1]) == {
            ORDERS_0: GroupCommit(7, 4, "m"),
            ORDERS_1: GroupCommit(0),
        }
    assert reader.end_offsets([ORDERS_0]) == {ORDERS_0: 10}
    assert len(clients.consumers) == 1 and not clients.consumers[0].closed
    assert reader.admin is clients.admins["east"] and list(clients.admins) == ["east"]
    reader.close()
    assert clients.consumers[0].closed


def test_the_target_groups_read_commits_with_metadata_and_log_starts() -> None:
    cluster, clients = east()
    cluster.delete_records("orders", 0, before=2)
    target = KafkaTargetGroups({}, alias="east", clients=clients)

    assert target.committed("g", [("orders", 0), ("orders", 1)]) == {
        ("orders", 0): GroupOffset(7, "m"),
        ("orders", 1): GroupOffset(0, ""),
    }
    assert target.earliest([("orders", 0), ("gone", 0)]) == {("orders", 0): 2}
    assert all(c.closed for c in clients.consumers)


def test_commits_asked_of_a_cluster_that_does_not_answer_are_given_up_on_the_port_s_clock() -> None:
    cluster, clients = east()
    cluster.down = True
    target = KafkaTargetGroups({}, 5.0, alias="east", clients=clients)
    started = clients.fake_clock.monotonic()

    with pytest.raises(KafkaUnavailableError, match=r"^cluster 'east': committed offsets of group"):
        target.committed("g", [("orders", 0)])

    # Asked again while the time lasted, on the fake clock: no real time passed.
    assert clients.fake_clock.monotonic() - started >= 5.0
    assert all(c.closed for c in clients.consumers)


def test_a_group_the_reader_may_not_read_fails_that_group_only() -> None:
    _cluster, clients = east()
    reader = KafkaGroupReader("east", {}, clients=clients)
    assert reader.committed("g", [ORDERS_0])
    (consumer,) = clients.consumers

    def refused(*_args: object, **_kwargs: object) -> None:
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    consumer.committed = refused  # type: ignore[method-assign]
    with pytest.raises(KafkaUnavailableError, match=r"GROUP_AUTHORIZATION_FAILED.*needs an ACL"):
        reader.committed("g", [ORDERS_0])
    assert consumer.closed  # a fresh consumer next time
    assert reader.committed("g", [ORDERS_0]) == {ORDERS_0: GroupCommit(7, 4, "m")}
