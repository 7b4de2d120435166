"""The migration planner: what is created on the target, what matches, what conflicts, and why."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from failover.migration_plan import (
    SourceTopic,
    TargetCluster,
    TargetTopic,
    plan_migration,
)
from failover.topic_rules import NameFilter

ORDERS = SourceTopic("orders", partitions=6, replication_factor=3)


def target(
    brokers: int = 3, *topics: TargetTopic, known: frozenset[str] | None = None
) -> TargetCluster:
    return TargetCluster(brokers=brokers, topics={t.name: t for t in topics}, known_configs=known)


def only(
    source: SourceTopic, cluster: TargetCluster, override: int | None = None
) -> tuple[str, str]:
    plan = plan_migration([source], cluster, replication_factor=override)
    assert len(plan.topics) == 1
    return plan.topics[0].action, plan.topics[0].reason


@pytest.mark.parametrize(
    ("source", "cluster", "action", "reason_part"),
    [
        (ORDERS, target(3), "create", "6 partitions, replication factor 3"),
        (ORDERS, target(1), "create", "only 1 brokers, 3 asked"),
        (ORDERS, target(3, TargetTopic("orders", 6)), "match", "6 partitions"),
        (ORDERS, target(3, TargetTopic("orders", 4)), "conflict", "with 4 partitions"),
        (
            SourceTopic("orders", 6, 3, {"cleanup.policy": "compact"}, compacted=True),
            target(3, TargetTopic("orders", 6)),
            "conflict",
            "not compacted, the source topic is compacted",
        ),
        (
            SourceTopic("mig.orders", 1, 1),
            target(3, TargetTopic("mig_orders", 1)),
            "conflict",
            "collides with the target's topic 'mig_orders'",
        ),
        (
            SourceTopic("__consumer.offsets", 1, 1),
            target(3),
            "skip",
            "internal topic",
        ),
        (SourceTopic("__consumer_offsets", 50, 3), target(3), "skip", "Kafka internal"),
        (SourceTopic("drsvc.offset-syncs.west", 1, 1), target(3), "skip", "internal"),
        (SourceTopic("heartbeats", 1, 1), target(3), "skip", "heartbeats"),
        (SourceTopic("west.heartbeats", 1, 1), target(3), "skip", "heartbeats"),
        (
            SourceTopic("orders", 1, 1, {"message.format.version": "2.8"}),
            target(3, known=frozenset({"cleanup.policy", "retention.ms"})),
            "conflict",
            "message.format.version=2.8: the target does not know it",
        ),
        (
            SourceTopic("orders", 1, 1, {"cleanup.policy": "compact,archive"}),
            target(3),
            "conflict",
            "accepts only compact, delete",
        ),
        (
            SourceTopic("orders", 1, 3, {"min.insync.replicas": "2"}),
            target(1),
            "conflict",
            "min.insync.replicas=2 is above the replication factor 1",
        ),
        (
            SourceTopic("orders", 1, 3, {"min.insync.replicas": "2"}),
            target(3),
            "create",
            "replication factor 3",
        ),
    ],
)
def test_each_topic_gets_a_decision_and_a_reason(
    source: SourceTopic, cluster: TargetCluster, action: str, reason_part: str
) -> None:
    got_action, reason = only(source, cluster)
    assert got_action == action
    assert reason_part in reason


@pytest.mark.parametrize(
    ("source_rf", "override", "brokers", "expected"),
    [(3, None, 3, 3), (3, None, 1, 1), (1, 3, 3, 3), (1, 3, 2, 2), (3, 1, 3, 1)],
)
def test_replication_factor_is_the_override_or_the_sources_capped_by_brokers(
    source_rf: int, override: int | None, brokers: int, expected: int
) -> None:
    plan = plan_migration(
        [SourceTopic("t", 2, source_rf)], target(brokers), replication_factor=override
    )
    assert plan.topics[0].action == "create"
    assert plan.topics[0].replication_factor == expected


def test_configs_are_copied_except_the_source_clusters_own() -> None:
    configs: Mapping[str, str] = {
        "cleanup.policy": "compact",
        "retention.ms": "86400000",
        "leader.replication.throttled.replicas": "0:1",
        "follower.replication.throttled.replicas": "0:2",
    }
    plan = plan_migration([SourceTopic("t", 1, 1, configs, compacted=True)], target(1))
    topic = plan.topics[0]
    assert topic.action == "create"
    assert dict(topic.configs) == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert set(topic.skipped_configs) == {
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }


def test_known_configs_accept_what_the_target_lists() -> None:
    source = SourceTopic("t", 1, 1, {"retention.ms": "1000"})
    assert only(source, target(1, known=frozenset({"retention.ms"})))[0] == "create"


def test_the_filter_selects_topics_and_the_plan_is_in_name_order() -> None:
    sources = [SourceTopic(n, 1, 1) for n in ("mig.b", "other", "mig.a", "mig.tmp")]
    plan = plan_migration(
        sources,
        target(1, TargetTopic("mig.b", 2)),
        topics=NameFilter(include=(r"mig\..*",), exclude=(r"mig\.tmp",)),
    )
    assert [(t.topic, t.action) for t in plan.topics] == [
        ("mig.a", "create"),
        ("mig.b", "conflict"),
    ]
    assert plan.has_conflicts
    assert [t.topic for t in plan.with_action("create")] == ["mig.a"]


def test_a_plan_without_conflicts_says_so() -> None:
    plan = plan_migration([ORDERS, SourceTopic("__consumer_offsets", 50, 3)], target(3))
    assert not plan.has_conflicts
    assert [t.action for t in plan.topics] == ["skip", "create"]


def test_as_dict_is_plain_data() -> None:
    topic = plan_migration([SourceTopic("t", 2, 1, {"retention.ms": "5"})], target(1)).topics[0]
    assert topic.as_dict() == {
        "topic": "t",
        "action": "create",
        "reason": "create with 2 partitions, replication factor 1",
        "partitions": 2,
        "replication_factor": 1,
        "compacted": False,
        "configs": {"retention.ms": "5"},
        "skipped_configs": {},
    }


@pytest.mark.parametrize(("brokers", "override"), [(0, None), (1, 0)])
def test_impossible_inputs_are_refused(brokers: int, override: int | None) -> None:
    with pytest.raises(ValueError):
        plan_migration([ORDERS], target(brokers), replication_factor=override)
