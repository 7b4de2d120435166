"""The offset index against a brute-force model of the logs it describes.

A simulated worker reads a source log with gaps (compaction, transaction markers, aborted records),
copies batches to a target log with gaps of its own (markers, aborted transactions), restarts from
older positions (at-least-once re-copies), sometimes jumps forward (records lost before they were
copied), and emits syncs exactly as the replicator does. The model answers every query by brute
force from the list of copies and runs; the index must give the same answers, and every answer it
calls exact must really neither re-read nor skip a record of the simulated source log.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from failover.copy_progress import standalone_syncs
from failover.offset_index import (
    IndexSnapshotError,
    OffsetIndex,
    SyncConflictError,
    SyncPosition,
)
from failover.offset_syncs import OffsetSync, Segment, SyncBuilder, TopicPartition
from failover.translation import Reason, Translation

TP = TopicPartition("orders", 0)
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16

BEFORE = Translation(None, Reason.BEFORE_SYNCS)


# -- the simulated replication ------------------------------------------------------------------


@dataclass
class Run:
    begin: int
    end: int
    copies: list[tuple[int, int]]


@dataclass
class History:
    """What a worker did: the source log, its runs, every copy in target order, the syncs."""

    readable: list[bool]
    runs: list[Run] = field(default_factory=list)
    copies: list[tuple[int, int, int]] = field(default_factory=list)  # (source, target, run)
    syncs: list[tuple[OffsetSync, bool]] = field(default_factory=list)  # (sync, changes index)
    target_end: int = 0


batch = st.tuples(
    st.just("batch"),
    st.integers(0, 6),  # records to read
    st.integers(0, 3),  # how far the consumer position runs over trailing non-records
    st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=6, max_size=6),  # target gaps in a batch
    st.sampled_from([0, 1, 1, 2]),  # target gap after the batch (a commit marker, an abort)
)
event = st.one_of(
    st.tuples(st.just("restart"), st.integers(0, 1000)),  # back to an older position
    st.tuples(st.just("jump"), st.integers(1, 8)),  # forward, over records never copied
    st.tuples(st.just("duplicate"), st.integers(0, 1000)),  # a sync delivered twice
)
# Each step is a batch, then maybe an event: every history copies something.
operations = st.lists(st.tuples(batch, st.lists(event, max_size=2)), min_size=1, max_size=16).map(
    lambda steps: [op for first, events in steps for op in (first, *events)]
)
source_logs = st.lists(st.sampled_from([True, True, True, False]), min_size=1, max_size=80)


def simulate(
    readable: list[bool], start: int, ops: list[tuple[object, ...]], epoch: int = -1
) -> History:
    history = History(readable)
    size = len(readable)
    position = min(start, size)
    target = 0
    for op in ops:
        kind = op[0]
        if kind == "batch":
            _, wanted, overrun, gaps, gap_after = op
            assert isinstance(wanted, int) and isinstance(overrun, int)
            assert isinstance(gaps, list) and isinstance(gap_after, int)
            read: list[int] = []
            cursor = position
            while len(read) < wanted and cursor < size:
                if readable[cursor]:
                    read.append(cursor)
                cursor += 1
            end = read[-1] + 1 if read else position
            while overrun and end < size and not readable[end]:
                end += 1
                overrun -= 1
            builder = SyncBuilder(
                TP,
                source_topic_id=SOURCE_ID,
                target_topic_id=TARGET_ID,
                source_begin=position,
                leader_epoch=epoch,
            )
            run = Run(position, end, [])
            for i, source in enumerate(read):
                builder.add(source, target)
                run.copies.append((source, target))
                history.copies.append((source, target, len(history.runs)))
                target += 1 + gaps[i]
            target += gap_after
            history.runs.append(run)
            history.syncs += [(sync, True) for sync in builder.build(end)]
            position = end
        elif kind == "restart":
            assert isinstance(op[1], int)
            position = op[1] % (position + 1)
        elif kind == "jump":
            assert isinstance(op[1], int)
            position = min(size, position + op[1])
        else:
            assert isinstance(op[1], int)
            done = [sync for sync, changes in history.syncs if changes and sync.segments]
            if done:
                history.syncs.append((done[op[1] % len(done)], False))
    history.target_end = target
    return history


def build(history: History) -> OffsetIndex:
    index = OffsetIndex()
    for position, (sync, changes) in enumerate(history.syncs):
        assert index.apply(sync, SyncPosition(0, position)) is changes
    return index


# -- the brute-force model ----------------------------------------------------------------------


def covered(runs: list[Run]) -> set[int]:
    return {x for run in runs for x in range(run.begin, run.end)}


def model_downstream(h: History, c: int, floor: int) -> Translation:
    """``p = 1 + max t over copies of s < c``; exact if the runs from that copy on cover [c, F)."""
    if not h.runs or c < floor:
        return BEFORE
    lower = [(t, run) for s, t, run in h.copies if s < c]
    if lower:
        t, first_run = max(lower)
        p = t + 1
    elif h.copies:
        p, first_run = h.copies[0][1], 0
    else:
        return BEFORE
    newest: dict[int, int] = {}  # record -> target offset of its newest copy
    for s, t, _ in h.copies:
        newest[s] = max(t, newest.get(s, t))
    unread_on_target = [t for s, t in newest.items() if s >= c]
    if unread_on_target and min(unread_on_target) < p:
        # A re-copy pass is behind an earlier one: start where nothing on the target is skipped.
        u = min(unread_on_target)
        return Translation(
            u, Reason.RECOPY_BEHIND, sum(1 for s, t, _ in h.copies if t >= u > -1 and s < c)
        )
    frontier = h.runs[-1].end
    if c > frontier:
        return Translation(p, Reason.AHEAD_OF_SYNCS, c - frontier)
    seen = covered(h.runs[first_run:])
    missing = sum(1 for x in range(c, frontier) if x not in seen)
    if missing:
        return Translation(p, Reason.REPLICATION_GAP, missing)
    return Translation(p, Reason.EXACT)


def model_upstream(h: History, t: int, floor: int, target_end: int | None = None) -> Translation:
    """``u = 1 + max s over copies at t' < t`` (running maximum over every pass); at ``t == 0``
    the consumer has read nothing, and the maximum over no copies is the source's start."""
    if t == 0:
        return Translation(0, Reason.EXACT)
    if not h.copies or t <= h.copies[0][1]:
        return BEFORE
    consumed = [(tt, s, run) for s, tt, run in h.copies if tt < t]
    _, last_source, last_run = max(consumed)
    u = 1 + max(s for _, s, _ in consumed)
    known_end = h.copies[-1][1] + 1
    if t > known_end and (target_end is None or t > target_end):
        return Translation(u, Reason.AHEAD_OF_SYNCS, t - known_end)
    seen = covered(h.runs[:last_run]) | set(range(h.runs[last_run].begin, last_source + 1))
    missing = sum(1 for x in range(floor, u) if x not in seen)
    if missing:
        return Translation(u, Reason.REPLICATION_GAP, missing)
    return Translation(u, Reason.EXACT)


def assert_downstream_semantics(h: History, c: int, result: Translation) -> None:
    """What a consumer starting at the translated offset would really read."""
    if result.offset is None:
        return
    after = [s for s, t, _ in h.copies if t >= result.offset]
    on_target = {s for s, _, _ in h.copies if s >= c}
    assert on_target <= set(after), f"skips records {sorted(on_target - set(after))} on the target"
    if result.reason is Reason.RECOPY_BEHIND:
        assert sum(1 for s in after if s < c) == result.pending
        return
    assert all(s >= c for s in after), f"re-reads a record below {c}"
    if result.exact:
        frontier = h.runs[-1].end
        wanted = {r for r in range(c, frontier) if r < len(h.readable) and h.readable[r]}
        assert wanted <= set(after), f"skips records {sorted(wanted - set(after))}"


def assert_upstream_semantics(h: History, t: int, floor: int, result: Translation) -> None:
    if result.offset is None:
        return
    consumed = {s for s, tt, _ in h.copies if tt < t}
    reread = {s for s in consumed if s >= result.offset}
    assert not reread, f"re-reads records {sorted(reread)} the target consumer already read"
    if result.exact:
        wanted = {r for r in range(floor, result.offset) if h.readable[r]}
        assert wanted <= consumed, f"skips records {sorted(wanted - consumed)}"


# -- the properties -----------------------------------------------------------------------------

MODEL_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@MODEL_SETTINGS
@given(source_logs, st.integers(0, 5), operations)
def test_downstream_matches_the_brute_force_model(
    readable: list[bool], start: int, ops: list[tuple[object, ...]]
) -> None:
    h = simulate(readable, start, ops)
    index = build(h)
    if not h.runs:
        assert index.translate_downstream(TP, 0).reason is Reason.UNKNOWN_PARTITION
        return
    floor = h.runs[0].begin
    offsets = list(range(-1, len(readable) + 3))
    for c in offsets:
        result = index.translate_downstream(TP, c)
        assert result == model_downstream(h, c, floor), f"committed {c}"
        assert_downstream_semantics(h, c, result)
    many = offsets * 3  # long enough for the vectorised path, in no particular order
    assert index.translate_downstream_batch(TP, many[::-1]) == [
        index.translate_downstream(TP, c) for c in many[::-1]
    ]


@MODEL_SETTINGS
@given(source_logs, st.integers(0, 5), operations)
def test_upstream_matches_the_brute_force_model(
    readable: list[bool], start: int, ops: list[tuple[object, ...]]
) -> None:
    h = simulate(readable, start, ops)
    index = build(h)
    if not h.runs:
        return
    floor = h.runs[0].begin
    for t in range(-1, h.target_end + 3):
        result = index.translate_upstream(TP, t)
        assert result == model_upstream(h, t, floor), f"committed target {t}"
        assert_upstream_semantics(h, t, floor, result)
        told = index.translate_upstream(TP, t, target_end=h.target_end)
        assert told == model_upstream(h, t, floor, h.target_end)


@MODEL_SETTINGS
@given(source_logs, st.integers(0, 5), operations, st.integers(0, 85))
def test_trimming_only_forgets_what_is_below_the_trim_point(
    readable: list[bool], start: int, ops: list[tuple[object, ...]], trim: int
) -> None:
    h = simulate(readable, start, ops)
    if not h.runs:
        return
    index = build(h)
    untrimmed = OffsetIndex.from_snapshot(index.snapshot())
    index.trim_before(TP, trim)
    floor = max(h.runs[0].begin, trim)
    offsets = list(range(-1, len(readable) + 3))
    for c in offsets:
        assert index.translate_downstream(TP, c) == model_downstream(h, c, floor)
    assert index.translate_downstream_batch(TP, offsets * 3) == [
        model_downstream(h, c, floor) for c in offsets * 3
    ]
    if not h.copies:
        return
    needed = untrimmed.translate_downstream(TP, trim).offset  # just after the last copy below trim
    for t in range(-1, h.target_end + 3):
        result = index.translate_upstream(TP, t)
        expected = model_upstream(h, t, floor)
        if needed is not None and t >= needed:
            assert result == expected, f"committed target {t}"
        else:
            assert result in (BEFORE, expected), f"committed target {t}"
        if t == 0:
            assert result == Translation(0, Reason.EXACT)  # read nothing: needs no sync
        elif t <= h.copies[0][1]:
            assert result == BEFORE


@MODEL_SETTINGS
@given(source_logs, st.integers(0, 5), operations, operations)
def test_a_snapshot_behaves_like_the_index_it_was_taken_from(
    readable: list[bool], start: int, ops: list[tuple[object, ...]], more: list[tuple[object, ...]]
) -> None:
    h = simulate(readable, start, ops + more)
    split = len(simulate(readable, start, ops).syncs)
    original = OffsetIndex()
    for position, (sync, _) in enumerate(h.syncs[:split]):
        original.apply(sync, SyncPosition(0, position))
    data = original.snapshot()
    restored = OffsetIndex.from_snapshot(data)
    assert restored.snapshot() == data
    assert restored.resume_offsets == original.resume_offsets == ({0: split} if split else {})
    for position, (sync, _) in enumerate(h.syncs[split:], start=split):
        assert original.apply(sync, SyncPosition(0, position)) == restored.apply(
            sync, SyncPosition(0, position)
        )
    assert restored.snapshot() == original.snapshot()
    for c in range(-1, len(readable) + 3):
        assert restored.translate_downstream(TP, c) == original.translate_downstream(TP, c)
    for t in range(-1, h.target_end + 3):
        assert restored.translate_upstream(TP, t) == original.translate_upstream(TP, t)


# -- worked cases -------------------------------------------------------------------------------


def run_sync(
    begin: int,
    end: int,
    *segments: tuple[int, int, int],
    epoch: int = -1,
    ids: tuple[bytes, bytes] = (SOURCE_ID, TARGET_ID),
) -> OffsetSync:
    return OffsetSync(
        TP.topic, TP.partition, *ids, epoch, begin, end, tuple(Segment(*s) for s in segments)
    )


def index_of(*syncs: OffsetSync) -> OffsetIndex:
    index = OffsetIndex()
    for sync in syncs:
        index.apply(sync)
    return index


def test_a_re_copied_range_translates_to_its_newest_copy() -> None:
    # copies 0-9 at 0-9, then the worker restarted at 3 and copied 3-9 again at 11-17
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(3, 10, (3, 11, 7)))

    assert index.translate_downstream(TP, 2) == Translation(2, Reason.EXACT)
    assert index.translate_downstream(TP, 3) == Translation(3, Reason.EXACT)
    assert index.translate_downstream(TP, 4) == Translation(12, Reason.EXACT)
    assert index.translate_downstream(TP, 10) == Translation(18, Reason.EXACT)
    # a target consumer that read copy 1 of 0-9 and copy 2 of 3-4 has read everything below 10
    assert index.translate_upstream(TP, 13) == Translation(10, Reason.EXACT)


def test_a_committed_offset_in_a_source_gap_maps_after_the_previous_copy() -> None:
    # source 5-7 were compacted away; target 3 is a transaction marker
    index = index_of(run_sync(0, 10, (0, 0, 3), (3, 4, 2), (8, 6, 2)))

    assert [index.translate_downstream(TP, c).offset for c in range(11)] == [
        0,
        1,
        2,
        3,
        5,
        6,
        6,
        6,
        6,
        7,
        8,
    ]
    assert index.translate_downstream(TP, 11) == Translation(8, Reason.AHEAD_OF_SYNCS, 1)


def test_caught_up_past_a_trailing_transaction_marker_is_exact() -> None:
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(10, 11))  # offset 10: a marker

    assert index.translate_downstream(TP, 11) == Translation(10, Reason.EXACT)
    assert index.translate_downstream(TP, 12) == Translation(10, Reason.AHEAD_OF_SYNCS, 1)


def test_a_lagging_consumer_translates_exactly() -> None:
    # the case where sparse syncs re-read most: 1,600 records behind the head, syncs every 100
    index = index_of(*(run_sync(b, b + 100, (b, 2 * b, 100)) for b in range(0, 10_000, 100)))

    for committed in (8_400, 8_401, 8_499, 10_000):
        expected = 2 * (committed - 1 - (committed - 1) % 100) + (committed - 1) % 100 + 1
        assert index.translate_downstream(TP, committed) == Translation(expected, Reason.EXACT)

    batch = index.translate_downstream_batch(TP, range(-5, 10_005))
    assert batch == [index.translate_downstream(TP, c) for c in range(-5, 10_005)]
    assert batch.exact_count == 10_001
    index.apply(run_sync(10_000, 10_100, (10_000, 20_000, 100)))  # the columns can still grow


def test_records_lost_before_they_were_copied_are_reported_not_skipped_silently() -> None:
    # the worker fell behind retention: it copied 0-9, then restarted at the log start, 20
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(20, 30, (20, 10, 10)))

    assert index.translate_downstream(TP, 5) == Translation(5, Reason.REPLICATION_GAP, 10)
    assert index.translate_downstream(TP, 12) == Translation(10, Reason.REPLICATION_GAP, 8)
    assert index.translate_downstream(TP, 20) == Translation(10, Reason.EXACT)
    assert index.translate_upstream(TP, 12) == Translation(22, Reason.REPLICATION_GAP, 10)


def test_a_gap_filled_by_a_later_pass_counts_only_as_far_as_the_consumer_read() -> None:
    # copied 0-9, jumped to 20 and copied 20-39, then restarted at 10 and copied 10-29 again
    index = index_of(
        run_sync(0, 10, (0, 0, 10)), run_sync(20, 40, (20, 10, 20)), run_sync(10, 30, (10, 30, 20))
    )

    # a target consumer that read up to the copy of 15 never saw 16-19
    assert index.translate_upstream(TP, 36) == Translation(40, Reason.REPLICATION_GAP, 4)
    assert index.translate_upstream(TP, 40) == Translation(40, Reason.EXACT)
    # the re-copy has not reached 30-39 yet: those are on the target only in the earlier pass, so
    # a source consumer at 16 starts there and reads the re-copies of 10-15 again
    assert index.translate_downstream(TP, 16) == Translation(20, Reason.RECOPY_BEHIND, 6)
    caught_up = index_of(
        run_sync(0, 10, (0, 0, 10)), run_sync(20, 40, (20, 10, 20)), run_sync(10, 40, (10, 30, 30))
    )
    assert caught_up.translate_downstream(TP, 16) == Translation(36, Reason.EXACT)


def test_trimming_keeps_older_passes_that_still_cover_retained_positions() -> None:
    index = index_of(
        run_sync(0, 100, (0, 0, 100)),
        run_sync(5, 10, (5, 100, 5)),  # a restart at 5
        run_sync(200, 210, (200, 105, 10)),  # a jump: 100-199 were never copied
        run_sync(20, 25, (20, 115, 5)),  # a restart at 20
    )
    # the restart at 20 is behind the first pass: 25-99 are on the target only there
    assert index.trim_before(TP, 22) == 0
    assert index.translate_downstream(TP, 22) == Translation(25, Reason.RECOPY_BEHIND, 7)
    assert index.translate_downstream(TP, 21) == BEFORE

    # the restart catches up with every earlier pass
    index.apply(run_sync(25, 210, (25, 120, 75), (200, 195, 10)))
    assert index.trim_before(TP, 23) == 3
    # read: 0-99, 5-9, 200-209, 20-23; the first pass still vouches for 24-99, nothing for 100-199
    assert index.translate_upstream(TP, 119) == Translation(210, Reason.REPLICATION_GAP, 100)
    assert index.translate_downstream(TP, 23) == Translation(118, Reason.EXACT)
    assert index.translate_downstream(TP, 22) == BEFORE


def test_syncs_of_another_topic_incarnation_are_never_used() -> None:
    old, new = (b"a" * 16, TARGET_ID), (b"b" * 16, TARGET_ID)
    index = index_of(run_sync(0, 10, (0, 0, 10), ids=old), run_sync(0, 5, (0, 20, 5), ids=new))

    assert index.translate_downstream(TP, 3) == Translation(23, Reason.EXACT)
    assert index.translate_downstream(TP, 3, source_topic_id=b"a" * 16).offset == 3
    assert index.translate_downstream(TP, 3, source_topic_id=b"b" * 16).offset == 23
    mismatch = Translation(None, Reason.TOPIC_MISMATCH)
    assert index.translate_downstream(TP, 3, source_topic_id=b"c" * 16) == mismatch
    assert index.translate_downstream(TP, 3, target_topic_id=b"x" * 16) == mismatch
    assert index.translate_upstream(TP, 3, target_topic_id=b"x" * 16) == mismatch
    assert index.translate_downstream_batch(TP, [3, 4], source_topic_id=b"a" * 16) == [
        Translation(3, Reason.EXACT),
        Translation(4, Reason.EXACT),
    ]
    assert index.translate_downstream(TopicPartition("orders", 1), 3).reason is (
        Reason.UNKNOWN_PARTITION
    )


def test_trimming_and_forgetting_work_per_generation() -> None:
    old, new = (b"a" * 16, TARGET_ID), (b"b" * 16, TARGET_ID)
    index = index_of(run_sync(0, 10, (0, 0, 10), ids=old), run_sync(0, 5, (0, 20, 5), ids=new))

    index.trim_before(TP, 3)
    assert index.translate_downstream(TP, 2) == BEFORE
    assert index.translate_downstream(TP, 2, source_topic_id=b"a" * 16).offset == 2
    index.trim_before(TP, 4, source_topic_id=b"a" * 16)
    assert index.translate_downstream(TP, 3, source_topic_id=b"a" * 16) == BEFORE

    index.forget(TP, keep_current=True)
    assert index.translate_downstream(TP, 4) == Translation(24, Reason.EXACT)
    assert index.translate_downstream(TP, 4, source_topic_id=b"a" * 16).reason is (
        Reason.TOPIC_MISMATCH
    )
    index.forget(TP)
    assert index.partitions() == []


def test_a_truncated_source_log_is_detected_by_leader_epoch() -> None:
    index = index_of(
        run_sync(0, 10, (0, 0, 10), epoch=1),
        run_sync(10, 20, (10, 10, 10), epoch=2),
        # unclean election: the new leader's log diverges at 15, the worker re-reads from there
        run_sync(15, 25, (15, 20, 10), epoch=3),
    )
    truncated = Translation(None, Reason.LOG_TRUNCATED)

    assert index.translate_downstream(TP, 18, leader_epoch=2) == truncated
    assert index.translate_downstream(TP, 12, leader_epoch=1) == truncated
    assert index.translate_downstream(TP, 15, leader_epoch=2) == Translation(15, Reason.EXACT)
    assert index.translate_downstream(TP, 18, leader_epoch=3) == Translation(23, Reason.EXACT)
    assert index.translate_downstream(TP, 18, leader_epoch=9) == Translation(23, Reason.EXACT)

    # a truncation that removes a whole epoch forgets it
    index.apply(run_sync(8, 30, (8, 40, 22), epoch=4))
    assert index.translate_downstream(TP, 9, leader_epoch=3) == truncated
    assert index.translate_downstream(TP, 9, leader_epoch=1) == truncated  # 8-9 were replaced
    assert index.translate_downstream(TP, 8, leader_epoch=1) == Translation(8, Reason.EXACT)
    assert index.translate_downstream(TP, 9, leader_epoch=4) == Translation(41, Reason.EXACT)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 12)), min_size=1, max_size=12),
)
def test_an_untruncated_log_is_never_reported_truncated(
    epoch_lengths: list[int], passes: list[tuple[int, int]]
) -> None:
    """Re-copies of older epochs, in any order, never make a valid committed offset look bad."""
    epoch_of = [epoch for epoch, length in enumerate(epoch_lengths) for _ in range(length)]
    size = len(epoch_of)
    index = OffsetIndex()
    target = 0
    for start, length in passes:
        begin = start % size
        for source in range(begin, min(size, begin + length)):
            index.apply(run_sync(source, source + 1, (source, target, 1), epoch=epoch_of[source]))
            target += 1
    for c in range(1, size + 1):
        assert index.translate_downstream(TP, c, leader_epoch=epoch_of[c - 1]).reason is not (
            Reason.LOG_TRUNCATED
        )


def test_contiguous_runs_share_one_segment_and_markers_cost_one_each() -> None:
    plain = index_of(*(run_sync(b, b + 100, (b, b, 100)) for b in range(0, 100_000, 100)))
    transactional = index_of(
        *(run_sync(b, b + 100, (b, b + b // 100, 100)) for b in range(0, 10_000, 100))
    )

    assert plain.segment_count() == 1
    assert transactional.segment_count() == 100
    assert plain.translate_downstream(TP, 54_321) == Translation(54_321, Reason.EXACT)
    assert transactional.translate_downstream(TP, 5_432) == Translation(5_432 + 54, Reason.EXACT)


# -- duplicates, conflicts, positions -----------------------------------------------------------


def test_a_duplicate_sync_is_ignored() -> None:
    first, second = run_sync(0, 10, (0, 0, 10)), run_sync(10, 20, (10, 11, 10))
    index = index_of(first, second)
    before = index.snapshot()

    assert index.apply(first) is False
    assert index.apply(run_sync(2, 15, (2, 2, 8), (10, 11, 5))) is False  # spans merged copies
    assert index.snapshot() == before


@pytest.mark.parametrize(
    ("sync", "message"),
    [
        (run_sync(5, 10, (5, 6, 4)), "maps source 5 to target 6, but the index holds source 6"),
        (run_sync(10, 11, (10, 10, 1)), "holds no copy there"),
        (run_sync(15, 25, (15, 17, 10)), "maps source 15 to target 17"),
    ],
)
def test_a_contradicting_sync_is_refused_and_changes_nothing(
    sync: OffsetSync, message: str
) -> None:
    index = index_of(run_sync(5, 10, (5, 5, 5)), run_sync(10, 20, (10, 11, 10)))
    before = index.snapshot()

    with pytest.raises(SyncConflictError, match=message):
        index.apply(sync, SyncPosition(0, 99))
    assert index.snapshot() == before


def test_a_sync_older_than_everything_indexed_is_out_of_order() -> None:
    index = index_of(run_sync(5, 10, (5, 5, 5)))
    with pytest.raises(SyncConflictError, match="out of order"):
        index.apply(run_sync(0, 5, (0, 0, 5)))


def test_after_trimming_a_replayed_old_sync_is_ignored() -> None:
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(10, 20, (10, 11, 10)))
    assert index.trim_before(TP, 15) == 1

    assert index.apply(run_sync(0, 10, (0, 0, 10))) is False
    assert index.translate_downstream(TP, 14) == BEFORE
    assert index.translate_downstream(TP, 15) == Translation(16, Reason.EXACT)


def test_positions_say_where_to_resume_reading_the_sync_topic() -> None:
    index = OffsetIndex()
    index.apply(run_sync(0, 10, (0, 0, 10)), SyncPosition(2, 41))
    index.apply(run_sync(10, 20, (10, 10, 10)), SyncPosition(0, 7))
    index.apply(run_sync(10, 20, (10, 10, 10)), SyncPosition(0, 8))  # a duplicate still counts
    index.note_position(SyncPosition(2, 30))  # never moves back

    assert index.resume_offsets == {0: 9, 2: 42}


# -- snapshot format errors ---------------------------------------------------------------------


def snapshot_bytes() -> bytes:
    return index_of(run_sync(0, 10, (0, 0, 10)), run_sync(3, 10, (3, 11, 7))).snapshot()


def test_a_damaged_snapshot_is_refused() -> None:
    data = bytearray(snapshot_bytes())
    data[40] ^= 0x01
    with pytest.raises(IndexSnapshotError, match="checksum"):
        OffsetIndex.from_snapshot(bytes(data))


def test_a_newer_snapshot_version_is_refused_with_a_clear_message() -> None:
    data = bytearray(snapshot_bytes())
    data[4] = 2
    with pytest.raises(IndexSnapshotError, match="unsupported offset-index snapshot version 2"):
        OffsetIndex.from_snapshot(bytes(data))


@pytest.mark.parametrize("data", [b"", b"DSXI", b"PK\x03\x04" + bytes(40)])
def test_foreign_bytes_are_not_a_snapshot(data: bytes) -> None:
    with pytest.raises(IndexSnapshotError, match="not an offset-index snapshot"):
        OffsetIndex.from_snapshot(data)


def test_a_truncated_snapshot_is_refused() -> None:
    data = snapshot_bytes()
    body = data[:-4][:-8]
    with pytest.raises(IndexSnapshotError, match="truncated"):
        OffsetIndex.from_snapshot(body + zlib.crc32(body).to_bytes(4, "little"))


def test_the_documented_worked_example() -> None:
    index = index_of(run_sync(1000, 1009, (1000, 5000, 3), (1005, 5003, 2), (1007, 5006, 1)))

    downstream = {c: index.translate_downstream(TP, c) for c in (1000, 1003, 1004, 1005, 1008)}
    assert downstream == {
        1000: Translation(5000, Reason.EXACT),
        1003: Translation(5003, Reason.EXACT),
        1004: Translation(5003, Reason.EXACT),
        1005: Translation(5003, Reason.EXACT),
        1008: Translation(5007, Reason.EXACT),
    }
    assert index.translate_downstream(TP, 1009) == Translation(5007, Reason.EXACT)
    assert index.translate_downstream(TP, 1010) == Translation(5007, Reason.AHEAD_OF_SYNCS, 1)
    upstream = [index.translate_upstream(TP, t).offset for t in (5003, 5006, 5007)]
    assert upstream == [1003, 1007, 1008]


# -- crashes: syncs rebuilt from the target -----------------------------------------------------


def simulate_crashes(readable: list[bool], steps: list[tuple[int, int, int, int]]) -> History:
    """A worker that copies batches and is killed now and then, as the replicator is.

    Each step copies ``batches`` batches of up to ``size`` records, then the worker dies: the syncs
    of its last ``unsynced`` runs were never written, and the source progress it had committed is
    the start of its run ``committed_back`` runs from the end. The next worker rebuilds syncs for
    every copy on the target of a source offset at or after that position, in target order (the
    repair scan), then copies again from there.
    """
    history = History(readable)
    size = len(readable)
    position = target = 0
    sync_runs: list[int] = []  # the run each sync of history.syncs describes (-1: rebuilt)
    for batches, batch_size, unsynced, committed_back in steps:
        first_run = len(history.runs)
        for _ in range(batches):
            read = [x for x in range(position, size) if readable[x]][:batch_size]
            end = read[-1] + 1 if read else position
            builder = SyncBuilder(
                TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, source_begin=position
            )
            run = Run(position, end, [])
            for source in read:
                builder.add(source, target)
                run.copies.append((source, target))
                history.copies.append((source, target, len(history.runs)))
                target += 1
            target += 1  # a gap on the target between batches
            for sync in builder.build(end):
                history.syncs.append((sync, True))
                sync_runs.append(len(history.runs))
            history.runs.append(run)
            position = end
        runs_now = len(history.runs) - first_run
        if not runs_now:
            continue
        lost_from = len(history.runs) - min(unsynced, runs_now)
        kept = [i for i, run in enumerate(sync_runs) if run < lost_from]
        history.syncs = [history.syncs[i] for i in kept]
        sync_runs = [sync_runs[i] for i in kept]
        # progress is committed only at the end of runs whose syncs were written
        back = max(first_run, len(history.runs) - 1 - committed_back)
        committed = (
            history.runs[min(back, lost_from)].begin
            if lost_from < len(history.runs)
            else (history.runs[back].begin)
        )
        known_end = max(
            (s.segments[-1].target_end for s, _ in history.syncs if s.segments), default=0
        )
        rebuilt = [(s, t) for s, t, _ in history.copies if s >= committed]
        for sync in standalone_syncs(TP, SOURCE_ID, TARGET_ID, rebuilt):
            adds = sync.segments[-1].target_end > known_end
            known_end = max(known_end, sync.segments[-1].target_end)
            history.syncs.append((sync, adds))
            sync_runs.append(-1)
        position = committed
    history.target_end = target
    return history


crash_steps = st.lists(
    st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 3), st.integers(0, 3)),
    min_size=1,
    max_size=6,
)


@MODEL_SETTINGS
@given(st.lists(st.sampled_from([True, True, True, False]), min_size=1, max_size=60), crash_steps)
def test_syncs_rebuilt_after_crashes_never_conflict_and_answers_never_skip(
    readable: list[bool], steps: list[tuple[int, int, int, int]]
) -> None:
    h = simulate_crashes(readable, steps)
    index = build(h)  # no SyncConflictError: a rebuilt sync may repeat written ones
    if not h.copies:
        return
    for c in range(0, len(readable) + 2):
        assert_downstream_semantics(h, c, index.translate_downstream(TP, c))


def test_a_sync_rebuilt_after_a_crash_repeats_written_copies_and_extends_them() -> None:
    # syncs written for copies 0-9; the worker died after copying 10-14 (no sync) with source
    # progress committed at 5; the next one rebuilt syncs for 5-14 from the target
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(5, 15, (5, 5, 10)))
    assert index.replicated_end(TP) == 15
    assert index.translate_downstream(TP, 15) == Translation(15, Reason.EXACT)
    # it copies again from 5: until that pass reaches 15, 10-14 are only in the first pass
    index.apply(run_sync(5, 8, (5, 16, 3)))
    assert index.translate_downstream(TP, 8) == Translation(8, Reason.RECOPY_BEHIND, 3)
    assert index.translate_downstream(TP, 12) == Translation(12, Reason.RECOPY_BEHIND, 3)
    assert index.translate_downstream(TP, 15) == Translation(19, Reason.AHEAD_OF_SYNCS, 7)
    index.apply(run_sync(8, 15, (8, 19, 7)))
    assert index.translate_downstream(TP, 12) == Translation(23, Reason.EXACT)
    assert index.translate_downstream(TP, 15) == Translation(26, Reason.EXACT)


def test_a_rebuilt_sync_over_a_lost_one_is_still_a_conflict() -> None:
    # the sync of 10-19 was lost, that of 20-29 written; a rebuild cannot slot copies in between
    index = index_of(run_sync(0, 10, (0, 0, 10)), run_sync(20, 30, (20, 20, 10)))
    with pytest.raises(SyncConflictError, match="holds no copy there"):
        index.apply(run_sync(10, 30, (10, 10, 20)))


def test_failback_without_the_earlier_pass_in_the_index_may_reread_but_never_skips() -> None:
    # Pass 1 copied 0-29 to 0-29, the worker restarted at 5 and copied 5-19 again to 100-114.
    # Retention deleted pass 1's syncs and kept the re-copy's: the index never saw pass 1.
    index = index_of(run_sync(5, 20, (5, 100, 15)))
    # A consumer of the copies that read up to 104 has read pass 1 whole (0-29) and 5-9 again:
    # the true answer is 30. The index can only know 10. It errs towards reading again, never
    # towards skipping; the note in docs/offset-syncs.md says when this can happen.
    answer = index.translate_upstream(TP, 105)
    assert answer.offset is not None and answer.offset <= 30
    assert answer == Translation(10, Reason.EXACT)
    # With pass 1's syncs kept, the same question is answered exactly.
    full = index_of(run_sync(0, 30, (0, 0, 30)), run_sync(5, 20, (5, 100, 15)))
    assert full.translate_upstream(TP, 105) == Translation(30, Reason.EXACT)
