"""Which translation reasons waiting for replication can fix, and which it never can.

A planned failover deactivates the application, then waits for replication to make its groups'
translations exact. A reason that waiting cannot fix must be found before deactivating.
"""

from __future__ import annotations

import pytest

from failover.offset_index import OffsetIndex
from failover.offset_syncs import OffsetSync, Segment, TopicPartition
from failover.translation import PERMANENT_REASONS, Reason

TP = TopicPartition("orders", 0)
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16


def test_the_reasons_waiting_cannot_fix() -> None:
    assert {
        Reason.BEFORE_SYNCS,
        Reason.LOG_TRUNCATED,
        Reason.REPLICATION_GAP,
    } == PERMANENT_REASONS


@pytest.mark.parametrize(
    ("reason", "fixable"),
    [
        (Reason.EXACT, True),
        (Reason.AHEAD_OF_SYNCS, True),
        (Reason.RECOPY_BEHIND, True),
        (Reason.UNKNOWN_PARTITION, True),
        (Reason.TOPIC_MISMATCH, True),
        (Reason.BEFORE_SYNCS, False),
        (Reason.LOG_TRUNCATED, False),
        (Reason.REPLICATION_GAP, False),
    ],
)
def test_each_reason_says_whether_waiting_can_fix_it(reason: Reason, fixable: bool) -> None:
    assert reason.waits_can_fix is fixable


def sync(begin: int, end: int, *segments: Segment) -> OffsetSync:
    return OffsetSync(TP.topic, TP.partition, SOURCE_ID, TARGET_ID, -1, begin, end, segments)


def test_more_syncs_turn_a_fixable_reason_exact_and_leave_a_permanent_one() -> None:
    """The classification, shown on an index: replication catching up fixes ahead-of-syncs but
    not a position before the first retained sync, nor a range the worker jumped over."""
    index = OffsetIndex()
    index.apply(sync(100, 110, Segment(100, 0, 10)))
    index.apply(sync(115, 120, Segment(115, 10, 5)))  # 110..114 jumped over
    ahead = index.translate_downstream(TP, 125)
    before = index.translate_downstream(TP, 50)
    gap = index.translate_downstream(TP, 105)
    assert (ahead.reason, before.reason, gap.reason) == (
        Reason.AHEAD_OF_SYNCS,
        Reason.BEFORE_SYNCS,
        Reason.REPLICATION_GAP,
    )
    assert ahead.reason.waits_can_fix
    assert not before.reason.waits_can_fix
    assert not gap.reason.waits_can_fix

    index.apply(sync(120, 140, Segment(120, 15, 20)))  # replication catches up
    assert index.translate_downstream(TP, 125).exact
    assert index.translate_downstream(TP, 50).reason is Reason.BEFORE_SYNCS
    assert index.translate_downstream(TP, 105).reason is Reason.REPLICATION_GAP
