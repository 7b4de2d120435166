"""Lag before a planned failover, and the recovery point after an unplanned one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from failover.recovery_point import (
    GroupPosition,
    Lag,
    PartitionReplication,
    UnreplicatedRange,
    cutoffs,
    lagging,
    rpo_records,
    unreplicated,
)


def test_nothing_lags_when_everything_is_replicated_and_checkpointed() -> None:
    partitions = [
        PartitionReplication("orders", 0, 100, 100),
        PartitionReplication("orders", 1, 7, 7),
    ]
    groups = [GroupPosition("billing", "orders", 0, 90, 90)]
    assert lagging(partitions, groups) == []


def test_lag_names_the_partition_and_the_group() -> None:
    lags = lagging(
        [PartitionReplication("orders", 1, 90, 100), PartitionReplication("orders", 0, 5, None)],
        [
            GroupPosition("billing", "orders", 0, 50, 40),
            GroupPosition("audit", "orders", 1, 30, None),
            GroupPosition("late", "orders", 1, 30, 35),
        ],
    )
    assert lags == [
        Lag("orders", 0, -1),
        Lag("orders", 1, 10),
        Lag("orders", 1, 30, "audit"),
        Lag("orders", 0, 10, "billing"),
        Lag("orders", 1, 5, "late"),
    ]
    assert lags[1].describe() == "orders-1: 10 record(s) not replicated yet"
    assert lags[3].describe() == "group billing on orders-0: its checkpoint is 10 behind"


def test_the_recovery_point_lists_what_did_not_cross() -> None:
    ranges = unreplicated(
        [
            PartitionReplication("orders", 0, 100, 100),
            PartitionReplication("orders", 1, 90, 100),
            PartitionReplication("orders", 2, 40, None),
        ]
    )
    assert ranges == [
        UnreplicatedRange("orders", 1, 90, 99),
        UnreplicatedRange("orders", 2, 40, None),
    ]
    assert ranges[0].records == 10 and ranges[0].exact
    assert ranges[1].records == 0 and not ranges[1].exact
    assert rpo_records(ranges) == (10, False)
    assert rpo_records(ranges[:1]) == (10, True)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=20))
def test_the_rpo_counts_exactly_the_records_between_replicated_and_end(
    pairs: list[tuple[int, int]],
) -> None:
    partitions = [
        PartitionReplication("t", i, min(a, b), max(a, b)) for i, (a, b) in enumerate(pairs)
    ]
    total, exact = rpo_records(unreplicated(partitions))
    assert exact
    assert total == sum(abs(a - b) for a, b in pairs)


def test_cutoffs_keep_known_ends() -> None:
    assert cutoffs({("east.orders", 1): 10, ("east.orders", 0): 5, ("east.x", 0): -1}) == {
        ("east.orders", 0): 5,
        ("east.orders", 1): 10,
    }
