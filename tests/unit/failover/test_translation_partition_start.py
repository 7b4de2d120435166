"""Translation at the start of a copied partition, both ways (issue 32, item 13).

A group reset to earliest stands at offset 0. Failing it over and straight back must land it at
0 again, exactly: downstream, 0 maps to the first copy; upstream, a consumer at offset 0 of the
copy has read nothing of it, so it continues at the source's start. A position above 0 at or
before the first copy the index holds stays unknown: copies whose syncs the index lacks may lie
below it, and the consumer may have read them.

The histories are made by a simulated worker that copies a source log with gaps (compacted or
aborted records, markers) into a target log with gaps of its own, restarts from older positions
(at-least-once re-copies) and emits its syncs through :class:`SyncBuilder`, as the replicator does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from failover.offset_index import OffsetIndex
from failover.offset_syncs import OffsetSync, SyncBuilder, TopicPartition
from failover.translation import Reason, Translation

TP = TopicPartition("orders", 0)
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16
EXACT_AT_START = Translation(0, Reason.EXACT)


@dataclass
class Copied:
    """What the worker did: every copy ``(source, target)`` in target order, and the syncs."""

    readable: list[bool]
    copies: list[tuple[int, int]] = field(default_factory=list)
    syncs: list[OffsetSync] = field(default_factory=list)

    def index(self) -> OffsetIndex:
        index = OffsetIndex()
        for sync in self.syncs:
            index.apply(sync)
        return index

    def read_on_target_from(self, target: int) -> list[int]:
        """Source offsets of the copies a consumer starting at ``target`` reads, in order."""
        return [s for s, t in self.copies if t >= target]

    def records_from(self, source: int) -> list[int]:
        """Source records a consumer starting at ``source`` reads, in order."""
        return [s for s in range(source, len(self.readable)) if self.readable[s]]


batches = st.lists(
    st.tuples(
        st.integers(1, 6),  # records to read
        st.sampled_from([0, 0, 1, 2]),  # target gap after the batch (a commit marker, an abort)
        st.one_of(st.none(), st.integers(0, 1000)),  # then maybe a restart to an older position
    ),
    min_size=1,
    max_size=12,
)
source_logs = st.lists(st.sampled_from([True, True, True, False]), min_size=1, max_size=60).map(
    lambda log: [True, *log]  # the first record is readable: a group at 0 has something to read
)


def copy_from_the_start(
    readable: list[bool], steps: list[tuple[int, int, int | None]], lead_in: int = 0
) -> Copied:
    """A worker that copies ``readable`` from source offset 0. ``lead_in`` target offsets come
    before the first copy the syncs describe (an aborted first transaction; copies whose sync
    was lost are added by the caller)."""
    copied = Copied(readable)
    position, target = 0, lead_in
    for wanted, gap_after, restart in steps:
        builder = SyncBuilder(
            TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, source_begin=position
        )
        read = [s for s in range(position, len(readable)) if readable[s]][:wanted]
        end = read[-1] + 1 if read else position
        for source in read:
            builder.add(source, target)
            copied.copies.append((source, target))
            target += 1
        target += gap_after
        copied.syncs += builder.build(end)
        position = end if restart is None else restart % (end + 1)
    return copied


MODEL_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@MODEL_SETTINGS
@given(source_logs, batches)
def test_a_group_at_the_start_fails_over_and_back_exactly(
    readable: list[bool], steps: list[tuple[int, int, int | None]]
) -> None:
    copied = copy_from_the_start(readable, steps)
    index = copied.index()

    over = index.translate_downstream(TP, 0)
    assert over == EXACT_AT_START
    # The consumer on the target skips nothing that was copied (re-copies come twice: that is
    # at-least-once replication, not the translation).
    assert set(copied.read_on_target_from(over.offset)) == {s for s, _ in copied.copies}

    back = index.translate_upstream(TP, over.offset)
    assert back == EXACT_AT_START
    assert copied.records_from(back.offset) == copied.records_from(0)


@MODEL_SETTINGS
@given(source_logs, batches)
def test_a_group_at_the_start_of_the_copy_fails_back_and_over_again_exactly(
    readable: list[bool], steps: list[tuple[int, int, int | None]]
) -> None:
    copied = copy_from_the_start(readable, steps)
    index = copied.index()
    back = index.translate_upstream(TP, 0)
    assert back == EXACT_AT_START
    assert index.translate_downstream(TP, back.offset) == EXACT_AT_START


@MODEL_SETTINGS
@given(source_logs, batches, st.integers(1, 5))
def test_the_first_copy_above_offset_0_is_not_guessed_upstream(
    readable: list[bool], steps: list[tuple[int, int, int | None]], lead_in: int
) -> None:
    """Offsets before the first indexed copy may hold copies whose syncs the index lacks. Here
    they do: the worker copied the first ``lead_in`` records, lost that sync and copied them
    again. Downstream, 0 still maps exactly (to the re-copy); upstream, a consumer there read
    the lost copies, so the source's start would re-read them: the answer stays unknown, and
    no wait for replication changes that."""
    copied = copy_from_the_start(readable, steps, lead_in)
    lost = copied.records_from(0)[:lead_in]  # copied to target 0.., then markers up to lead_in
    copied.copies[:0] = [(s, t) for t, s in enumerate(lost)]
    # The syncs re-copy them (a copy whose sync is lost and never re-copied is invisible to
    # any translation: that is the at-least-once worker's rebuild, not this test's subject).
    assume(max(lost) < max(sync.source_end for sync in copied.syncs))
    index = copied.index()

    over = index.translate_downstream(TP, 0)
    assert over == Translation(lead_in, Reason.EXACT)
    assert set(copied.read_on_target_from(over.offset)) == {s for s, _ in copied.copies}

    back = index.translate_upstream(TP, over.offset)
    assert back == Translation(None, Reason.BEFORE_SYNCS)
    assert not back.reason.waits_can_fix
    # Why: a consumer that stood there on the target had read the copies of ``lost``, and the
    # source's start would give it those records again.
    read_before = [s for s, t in copied.copies if t < over.offset]
    assert read_before == lost
    assert copied.records_from(0)[: len(lost)] == lost

    # Offset 0 of the copy is still the start, whatever came before the first indexed copy.
    assert index.translate_upstream(TP, 0) == EXACT_AT_START


def test_failback_from_the_start_of_a_copy_that_a_trimmed_index_still_knows() -> None:
    """Trimming forgets the syncs of old copies, which a consumer at offset 0 has not read."""
    copied = copy_from_the_start([True] * 30, [(10, 1, None), (10, 1, None), (10, 0, None)])
    index = copied.index()
    assert index.trim_before(TP, 20) > 0
    assert index.translate_downstream(TP, 0).reason is Reason.BEFORE_SYNCS
    assert index.translate_upstream(TP, 0) == EXACT_AT_START
    assert index.translate_upstream(TP, 5).reason is Reason.BEFORE_SYNCS
