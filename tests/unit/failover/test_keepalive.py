"""Keepalive syncs against the real offset index: a duplicate while older syncs are retained, the
start of history (translating the caught-up position exactly) once retention deleted them."""

from __future__ import annotations

import pytest

from failover.keepalive import (
    KeepalivePolicy,
    LastCopy,
    PartitionSyncState,
    keepalive_due,
    keepalive_sync,
    last_copy_of,
)
from failover.offset_index import OffsetIndex
from failover.offset_syncs import (
    OffsetSync,
    Segment,
    SyncBuilder,
    TopicPartition,
    decode_sync,
    encode_sync,
)
from failover.translation import Reason, Translation

TP = TopicPartition("orders", 3)
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16
DAY_MS = 24 * 3600 * 1000


def history() -> list[OffsetSync]:
    """Two exactly-once transactions' syncs: source 100-104 copied to 500-504, a commit marker
    at 505, aborted source records 105-107 and a marker at 108, source 109-110 copied to
    506-507, then a run that only moved past a trailing marker (111 -> 112)."""
    first = SyncBuilder(TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID,
                        source_begin=100, leader_epoch=4)  # fmt: skip
    first.add_all((100 + i, 500 + i) for i in range(5))
    second = SyncBuilder(TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID,
                         source_begin=105, leader_epoch=4)  # fmt: skip
    second.add_all([(109, 506), (110, 507)])
    idle = SyncBuilder(TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID,
                       source_begin=111, leader_epoch=4)  # fmt: skip
    return [*first.build(105), *second.build(111), *idle.build(112)]


def state(synced_at_ms: int | None = 0, read_up_to: int = 112) -> PartitionSyncState:
    return PartitionSyncState(
        tp=TP,
        source_topic_id=SOURCE_ID,
        target_topic_id=TARGET_ID,
        last_copy=last_copy_of(history(), None),
        read_up_to=read_up_to,
        copy_synced_at_ms=synced_at_ms,
    )


def index_of(syncs: list[OffsetSync]) -> OffsetIndex:
    index = OffsetIndex()
    for sync in syncs:
        index.apply(sync)
    return index


def downstream(index: OffsetIndex, offset: int) -> Translation:
    return index.translate_downstream(
        TP, offset, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, leader_epoch=4
    )


def test_the_last_copy_is_the_newest_segment_end() -> None:
    assert last_copy_of(history(), None) == LastCopy(110, 507, 4)
    # A run that copied nothing keeps the copy known before it.
    assert last_copy_of(history()[-1:], LastCopy(1, 2, 3)) == LastCopy(1, 2, 3)
    assert last_copy_of([], None) is None


def test_the_keepalive_is_the_run_from_the_last_copy_to_the_read_position() -> None:
    sync = keepalive_sync(state())
    assert (sync.source_begin, sync.source_end) == (110, 112)
    assert sync.segments == (Segment(110, 507, 1),)
    assert sync.leader_epoch == 4
    assert (sync.source_topic_id, sync.target_topic_id) == (SOURCE_ID, TARGET_ID)
    # It travels like any sync.
    assert decode_sync(*encode_sync(sync)) == sync


def test_with_the_full_history_the_keepalive_is_a_duplicate_and_changes_nothing() -> None:
    full = index_of(history())
    before = [downstream(full, c) for c in range(95, 115)]
    upstream_before = [full.translate_upstream(TP, t) for t in range(498, 510)]
    assert full.apply(keepalive_sync(state())) is False
    assert full.apply(keepalive_sync(state())) is False  # and so is the next one
    assert [downstream(full, c) for c in range(95, 115)] == before
    assert [full.translate_upstream(TP, t) for t in range(498, 510)] == upstream_before


def test_after_retention_the_keepalive_alone_translates_the_caught_up_position_exactly() -> None:
    full = index_of(history())
    alone = index_of([keepalive_sync(state())])
    caught_up = downstream(alone, 112)
    assert caught_up == Translation(508, Reason.EXACT)
    assert caught_up == downstream(full, 112)
    # Every position from the last copy to the read position answers as the full history does.
    for c in range(110, 113):
        assert downstream(alone, c) == downstream(full, c), c
    # Upstream too, from right after the last copy.
    assert alone.translate_upstream(TP, 508) == full.translate_upstream(TP, 508)
    # Older positions were only in the deleted syncs: unknown, never guessed.
    assert downstream(alone, 105).offset is None
    # Beyond the read position nothing is claimed.
    assert downstream(alone, 113).reason is Reason.AHEAD_OF_SYNCS


def test_new_copies_after_a_lone_keepalive_continue_its_history() -> None:
    alone = index_of([keepalive_sync(state())])
    more = SyncBuilder(TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID,
                       source_begin=112, leader_epoch=4)  # fmt: skip
    more.add_all([(112, 509), (113, 510)])
    for sync in more.build(114):
        assert alone.apply(sync)
    assert downstream(alone, 113) == Translation(510, Reason.EXACT)
    assert downstream(alone, 114) == Translation(511, Reason.EXACT)
    assert downstream(alone, 111) == Translation(508, Reason.EXACT)


def test_a_keepalive_is_due_once_the_interval_has_passed_since_the_last_copy_was_written() -> None:
    policy = KeepalivePolicy.for_retention(7 * DAY_MS)
    assert policy.interval_ms == 7 * DAY_MS // 4
    assert not keepalive_due(state(synced_at_ms=0), policy, policy.interval_ms - 1)
    assert keepalive_due(state(synced_at_ms=0), policy, policy.interval_ms)
    # Unknown (after a restart): due at once.
    assert keepalive_due(state(synced_at_ms=None), policy, 0)


def test_no_keepalive_without_a_copy_or_before_reading_past_it() -> None:
    policy = KeepalivePolicy(1000)
    empty = PartitionSyncState(TP, SOURCE_ID, TARGET_ID, None, 50, None)
    assert not keepalive_due(empty, policy, 10**9)
    with pytest.raises(ValueError, match="no copy"):
        keepalive_sync(empty)
    # The position right after the last copy is the least a worker has read.
    assert keepalive_due(state(synced_at_ms=None, read_up_to=111), policy, 0)
    stale = state(synced_at_ms=None, read_up_to=110)
    assert not keepalive_due(stale, policy, 0)
    with pytest.raises(ValueError, match="not past its last copy"):
        keepalive_sync(stale)


@pytest.mark.parametrize(("retention", "interval"), [(1000, 1000), (1000, 0), (1000, 5000)])
def test_the_interval_must_be_shorter_than_the_retention(retention: int, interval: int) -> None:
    with pytest.raises(ValueError, match="shorter than the sync topic's retention"):
        KeepalivePolicy.for_retention(retention, interval)


def test_an_explicit_interval_is_kept() -> None:
    assert KeepalivePolicy.for_retention(60_000, 20_000) == KeepalivePolicy(20_000)
