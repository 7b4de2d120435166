"""Copy progress of one source partition, against a simulated replication worker.

The simulated worker reads a source log with gaps (positions a ``read_committed`` consumer never
returns) in order, hands every record it reads to its producer, gets delivery reports back in the
same order (delivered at increasing target offsets, or failed), seals the open run at its consumer
position at random moments, writes the syncs of finished runs and has them acknowledged later
in write order (in lossy scenarios some writes are reported lost, which holds progress back as
the worker does), and rewinds to the offset :meth:`PartitionProgress.rewind` returns once a
failure has settled, copying those records again (the target log only grows). Leader epochs
change at random.

The properties are checked against what the simulation really did: which copies were delivered
and when, which positions held records, which epoch every record was read under.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.copy_progress import FinishedRun, PartitionProgress, standalone_syncs
from failover.offset_syncs import MAX_GAP, OffsetSync, Segment, TopicPartition

TP = TopicPartition("orders", 2)
SOURCE_ID = b"S" * 16
TARGET_ID = b"T" * 16


def make_progress(start: int = 0) -> PartitionProgress:
    return PartitionProgress(TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, start=start)


def sync(begin: int, end: int, *segments: tuple[int, int, int], epoch: int = -1) -> OffsetSync:
    return OffsetSync(
        TP.topic,
        TP.partition,
        SOURCE_ID,
        TARGET_ID,
        epoch,
        begin,
        end,
        tuple(Segment(*segment) for segment in segments),
    )


def all_syncs(finished: Sequence[FinishedRun]) -> list[OffsetSync]:
    return [s for run in finished for s in run.syncs]


def all_copies(finished: Sequence[FinishedRun]) -> list[tuple[int, int]]:
    return [copy for s in all_syncs(finished) for copy in s.copies()]


# -- the simulated worker -----------------------------------------------------------------------


@dataclass(frozen=True)
class Copy:
    source: int
    target: int
    epoch: int  # the leader epoch the record was read under
    step: int  # the action during which its delivery report arrived


@dataclass(frozen=True)
class Emitted:
    sync: OffsetSync
    orphan: bool  # emitted at a rewind for copies delivered past the rewind position


@dataclass
class Ticket:
    """The syncs of one finished run, written to the target; ``state`` is what came back."""

    run: FinishedRun
    state: str = "written"  # then "acked" or "lost"


@dataclass(frozen=True)
class StepState:
    accepting: bool
    ready_to_rewind: bool
    failed: int | None  # the smallest offset the model knows failed since the last rewind
    in_flight: int
    commit: int


@dataclass
class Trace:
    start: int
    holds: list[bool]
    copies: list[Copy] = field(default_factory=list)
    emitted: list[Emitted] = field(default_factory=list)
    rewinds: list[tuple[int, int]] = field(default_factory=list)  # (returned, expected)
    states: list[StepState] = field(default_factory=list)
    position: int = 0
    log: list[str] = field(default_factory=list)  # every call the worker made, in order
    mapped: dict[int, int] = field(default_factory=dict)  # source -> action whose ack mapped it
    delivered_during_loss: set[tuple[int, int]] = field(default_factory=set)

    def __repr__(self) -> str:
        log = "; ".join(self.log)
        source = "".join("r" if h else "." for h in self.holds)
        return f"Trace(start={self.start}, source={source!r} (r: a record), calls: {log})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # hypothesis prints failing examples this way

    def holds_record(self, offset: int) -> bool:
        index = offset - self.start
        return 0 <= index < len(self.holds) and self.holds[index]


class SimulatedWorker:
    """Drives one :class:`PartitionProgress` the way the replication worker does.

    Sync writes are acknowledged in write order. A write reported lost calls :meth:`syncs_lost`
    and stays unacknowledged, so progress never moves past it (the worker releases it only after
    rebuilding the lost mapping from the target, which is not simulated here).
    """

    def __init__(self, start: int, holds: list[bool], epoch: int, target: int) -> None:
        self.progress = make_progress(start)
        self.trace = Trace(start, holds, position=start)
        self.end = start + len(holds)
        self.epoch = epoch
        self.next_target = target
        self.in_flight: deque[tuple[int, int]] = deque()
        self.failed: int | None = None
        self.tickets: deque[Ticket] = deque()
        self.loss_waits = False  # a lost sync write waits for the rewind
        self.step = 0

    # -- worker actions

    def read(self, records: int, trailing_gaps: int) -> None:
        """Consume up to ``records`` records and produce them; the position may run past gaps."""
        if self.failed is not None:
            return  # the worker copies nothing of a failed partition until it rewinds
        trace = self.trace
        for _ in range(records):
            while trace.position < self.end and not trace.holds_record(trace.position):
                trace.position += 1
            if trace.position == self.end:
                return
            self.progress.produced(trace.position, self.epoch)
            trace.log.append(f"produced({trace.position}, {self.epoch})")
            self.in_flight.append((trace.position, self.epoch))
            trace.position += 1
        while (
            trailing_gaps and trace.position < self.end and not trace.holds_record(trace.position)
        ):
            trace.position += 1
            trailing_gaps -= 1

    def report(self, ok: bool, target_gap: int) -> None:
        """The oldest delivery report arrives."""
        if not self.in_flight:
            return
        source, epoch = self.in_flight.popleft()
        if ok:
            target = self.next_target + target_gap
            self.next_target = target + 1
            self.progress.delivered(source, target)
            self.trace.log.append(f"delivered({source}, {target})")
            self.trace.copies.append(Copy(source, target, epoch, self.step))
            if self.loss_waits:
                self.trace.delivered_during_loss.add((source, target))
        else:
            self.progress.failed(source, "Local: Message timed out")
            self.trace.log.append(f"failed({source})")
            self.failed = source if self.failed is None else min(self.failed, source)

    def seal(self) -> None:
        if self.failed is None:  # the worker seals only partitions that accept records
            self.progress.seal(self.trace.position)
            self.trace.log.append(f"seal({self.trace.position})")

    def new_epoch(self) -> None:
        self.epoch = max(self.epoch, -1) + 1

    def take(self, rewound_to: int | None = None) -> None:
        for run in self.progress.take_finished():
            self.trace.log.append(f"take_finished() -> run ending at {run.end}")
            self.tickets.append(Ticket(run))
            for s in run.syncs:
                orphan = rewound_to is not None and s.source_begin > rewound_to
                self.trace.emitted.append(Emitted(s, orphan))

    def sync_report(self, lost: bool) -> None:
        """The oldest sync write without a report is acknowledged or reported lost."""
        ticket = next((t for t in self.tickets if t.state == "written"), None)
        if ticket is None:
            return
        if lost:
            ticket.state = "lost"
            self.progress.syncs_lost("offset sync not written: Broker: Not enough replicas")
            self.trace.log.append(f"syncs_lost() for the run ending at {ticket.run.end}")
            commit = self.progress.commit_position
            self.failed = commit if self.failed is None else min(self.failed, commit)
            self.loss_waits = True
            return
        ticket.state = "acked"
        while self.tickets and self.tickets[0].state == "acked":
            run = self.tickets.popleft().run
            self.progress.persisted(run.end)
            self.trace.log.append(f"persisted({run.end})")
            for s in run.syncs:
                for source, _ in s.copies():
                    self.trace.mapped.setdefault(source, self.step)

    def rewind(self) -> None:
        if not self.progress.ready_to_rewind:
            return
        expected = self.failed
        assert expected is not None
        position = self.progress.rewind()
        self.trace.log.append(f"rewind() -> {position}")
        self.trace.rewinds.append((position, expected))
        self.trace.position = position
        self.failed = None
        self.loss_waits = False
        self.take(rewound_to=position)

    def record_state(self) -> None:
        """After every action: ``trace.states[i]`` is the state after action ``i``."""
        p = self.progress
        self.trace.states.append(
            StepState(
                p.accepting, p.ready_to_rewind, self.failed, len(self.in_flight), p.commit_position
            )
        )
        self.step += 1

    def finish(self) -> Trace:
        """Let everything settle: deliver what is in flight, rewind, seal, write and ack."""
        while self.in_flight:
            self.report(True, 0)
            self.record_state()
        self.rewind()
        self.seal()
        self.take()
        while any(t.state == "written" for t in self.tickets):
            self.sync_report(lost=False)
        self.record_state()
        return self.trace


# Weighted by repetition: mostly reading and delivery reports, with the rest in between. One
# integer per action (kind, then two small parameters) keeps generation and shrinking cheap.
KINDS = ["read"] * 3 + ["report"] * 4 + ["seal"] * 2 + ["take", "ack", "rewind", "epoch"]
actions = st.integers(0, len(KINDS) * 8 * 3 - 1)


@st.composite
def scenarios(draw: st.DrawFn, lossy: bool | None = False) -> Trace:
    """A simulated worker's history; when ``lossy`` (drawn when None), half the sync writes are
    reported lost."""
    if lossy is None:
        lossy = draw(st.booleans())
    holds = draw(st.lists(st.sampled_from([True, True, False]), min_size=4, max_size=40))
    start = draw(st.integers(0, 10_000))
    epoch = draw(st.sampled_from([0, 7, -1]))
    worker = SimulatedWorker(start, holds, epoch, draw(st.integers(0, 1_000_000)))
    for action in draw(st.lists(actions, min_size=30, max_size=100)):
        kind = KINDS[action % len(KINDS)]
        a, b = divmod(action // len(KINDS), 3)  # a in 0-7, b in 0-2
        if kind == "read":
            worker.read(1 + a % 4, b)  # 1-4 records, then up to 2 trailing gap positions
        elif kind == "report":
            worker.report(a % 5 != 0, b)  # one report in four fails; 0-2 target offsets between
        elif kind == "seal":
            worker.seal()
        elif kind == "take":
            worker.take()
        elif kind == "ack":
            worker.sync_report(lost=lossy and a % 2 == 0)
        elif kind == "rewind":
            worker.rewind()
        else:
            worker.new_epoch()
        worker.record_state()
    return worker.finish()


SIMULATION = settings(max_examples=200, deadline=None)


# -- properties ---------------------------------------------------------------------------------
#
# Each holds with and without lost sync writes (``scenarios(lossy=None)``) unless a loss breaks
# it by design: a lost write stops progress where it is, and the re-copy starts behind the runs
# already written.


@SIMULATION
@given(scenarios())
def test_every_delivered_copy_is_in_exactly_one_sync(trace: Trace) -> None:
    delivered = Counter((c.source, c.target) for c in trace.copies)
    described = Counter(copy for e in trace.emitted for copy in e.sync.copies())
    assert described == delivered
    assert all(n == 1 for n in described.values())


@settings(max_examples=500, deadline=None)
@given(scenarios(lossy=True))
def test_with_lost_syncs_copies_delivered_while_the_loss_waits_are_kept(trace: Trace) -> None:
    # syncs_lost(): "Copies delivered from now on are kept as runs of their own".
    described = Counter(copy for e in trace.emitted for copy in e.sync.copies())
    assert all(n == 1 for n in described.values())
    missing = sorted(trace.delivered_during_loss - set(described))
    assert not missing, f"copies {missing} delivered after a loss are in no sync"


def assert_commit_passes_only(trace: Trace, done: dict[int, int], what: str) -> None:
    """The commit position never decreases, and every record below it is in ``done`` (source
    offset -> the action after which it was done) by then."""
    previous = trace.start
    for step, state in enumerate(trace.states):
        assert state.commit >= previous, f"commit position went back after action {step}"
        previous = state.commit
        missing = [
            offset
            for offset in range(trace.start, state.commit)
            if trace.holds_record(offset) and done.get(offset, step + 1) > step
        ]
        assert not missing, f"after action {step}, commit {state.commit} passes {what} {missing}"


@SIMULATION
@given(scenarios(lossy=None))
def test_commit_position_never_decreases_and_never_skips_a_record(trace: Trace) -> None:
    first_delivery: dict[int, int] = {}
    for copy in trace.copies:
        first_delivery.setdefault(copy.source, copy.step)
    assert_commit_passes_only(trace, first_delivery, "undelivered records")


@SIMULATION
@given(scenarios(lossy=None))
def test_commit_position_never_passes_a_record_whose_mapping_is_not_acked(trace: Trace) -> None:
    assert_commit_passes_only(trace, trace.mapped, "records without an acknowledged sync")


@SIMULATION
@given(scenarios())
def test_everything_read_is_committed_once_it_settles(trace: Trace) -> None:
    assert trace.states[-1].in_flight == 0
    assert trace.states[-1].commit == trace.position


@SIMULATION
@given(scenarios(lossy=None))
def test_no_sync_describes_a_record_as_nothing(trace: Trace) -> None:
    for e in trace.emitted:
        covered = {source for source, _ in e.sync.copies()}
        claimed_empty = [
            offset
            for offset in range(e.sync.source_begin, e.sync.source_end)
            if offset not in covered and trace.holds_record(offset)
        ]
        assert not claimed_empty, f"{e.sync} describes records {claimed_empty} as nothing"


@SIMULATION
@given(scenarios(lossy=None))
def test_failure_stops_copying_until_rewind_to_the_first_failed_offset(trace: Trace) -> None:
    # The model's failure position is the smallest failed offset, or the commit position when a
    # sync write was lost before it.
    for state in trace.states:
        assert state.accepting is (state.failed is None)
        assert state.ready_to_rewind is (state.failed is not None and state.in_flight == 0)
    for returned, expected in trace.rewinds:
        assert returned == expected


@SIMULATION
@given(scenarios())
def test_runs_are_contiguous_from_the_start_across_rewinds(trace: Trace) -> None:
    # Each pass continues the chain exactly where the rewind sends it; copies delivered past a
    # failure are the only syncs outside it.
    chain = [e.sync for e in trace.emitted if not e.orphan]
    end = trace.start
    for s in chain:
        assert s.source_begin == end, f"{s} does not begin where the previous run ended ({end})"
        end = s.source_end
    assert end == trace.position


@SIMULATION
@given(scenarios(lossy=None))
def test_every_sync_names_the_one_leader_epoch_its_copies_were_read_under(trace: Trace) -> None:
    # The offset-sync contract: all records of a sync were read under one leader epoch, and a
    # new sync starts when the epoch changes -- for the copies kept at a rewind as well.
    epoch_of = {(c.source, c.target): c.epoch for c in trace.copies}
    for e in trace.emitted:
        epochs = {epoch_of[copy] for copy in e.sync.copies()}
        assert epochs <= {e.sync.leader_epoch}, f"{e.sync} holds copies read under {epochs}"


# -- edge cases ---------------------------------------------------------------------------------


def test_a_run_finishes_when_sealed_and_delivered_and_commits_only_once_persisted() -> None:
    p = make_progress(start=100)
    for offset in (100, 101, 103):
        p.produced(offset, 4)
    p.delivered(100, 7)
    p.delivered(101, 8)
    p.seal(105)
    assert p.take_finished() == []  # 103 is still in flight
    p.delivered(103, 10)
    [run] = p.take_finished()
    assert run == FinishedRun((sync(100, 105, (100, 7, 2), (103, 10, 1), epoch=4),), 105)
    assert p.take_finished() == []
    assert p.commit_position == 100
    p.persisted(105)
    assert p.commit_position == 105


def test_an_open_run_never_finishes_before_it_is_sealed() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    assert p.take_finished() == []
    assert p.in_flight == 0


def test_seal_without_records_but_an_advance_gives_an_empty_run() -> None:
    # The consumer ran over a trailing transaction marker: the sync says "nothing up to 3".
    p = make_progress(start=2)
    p.seal(2)
    assert p.take_finished() == []
    p.seal(3)
    [run] = p.take_finished()
    assert run == FinishedRun((sync(2, 3),), 3)
    assert run.syncs[0].record_count == 0
    p.persisted(run.end)
    assert p.commit_position == 3


def test_seal_at_the_current_position_again_adds_nothing() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 50)
    p.seal(1)
    p.seal(1)
    assert [run.end for run in p.take_finished()] == [1]


def test_commit_position_never_goes_back() -> None:
    p = make_progress(start=10)
    p.persisted(20)
    p.persisted(15)
    assert p.commit_position == 20


def test_a_leader_epoch_change_splits_the_run_at_the_first_record_of_the_new_epoch() -> None:
    p = make_progress()
    p.produced(0, 3)
    p.produced(1, 3)
    p.produced(4, 5)  # 2 and 3 were gaps, read under epoch 3
    for source, target in ((0, 10), (1, 11), (4, 12)):
        p.delivered(source, target)
    p.seal(6)
    assert p.take_finished() == [
        FinishedRun((sync(0, 4, (0, 10, 2), epoch=3),), 4),
        FinishedRun((sync(4, 6, (4, 12, 1), epoch=5),), 6),
    ]


def test_copies_kept_at_a_rewind_keep_the_leader_epoch_they_were_read_under() -> None:
    p = make_progress()
    p.produced(0, 3)
    p.produced(1, 3)
    p.produced(2, 4)
    p.produced(3, 4)
    p.failed(0, "timeout")
    p.delivered(1, 10)
    p.delivered(2, 11)
    p.delivered(3, 12)
    assert p.rewind() == 0
    assert all_syncs(p.take_finished()) == [
        sync(1, 2, (1, 10, 1), epoch=3),
        sync(2, 4, (2, 11, 2), epoch=4),
    ]


def test_failure_in_the_middle_keeps_later_copies_as_syncs_split_at_source_jumps() -> None:
    # Source: records at 10, 11, 12, 14, 15, 17 (13 and 16 hold nothing to copy).
    p = make_progress(start=10)
    for offset in (10, 11, 12, 14, 15, 17):
        p.produced(offset, 2)
    p.seal(18)
    p.delivered(10, 100)
    p.delivered(11, 101)
    p.failed(12, "Broker: Message size too large")
    assert not p.accepting
    p.delivered(14, 102)
    p.delivered(15, 103)
    assert not p.ready_to_rewind
    p.delivered(17, 104)
    assert p.ready_to_rewind
    assert p.failure == "Broker: Message size too large"

    assert p.rewind() == 12
    assert p.accepting
    assert p.failure is None
    finished = p.take_finished()
    assert sorted(all_copies(finished)) == [(10, 100), (11, 101), (14, 102), (15, 103), (17, 104)]
    syncs = sorted(all_syncs(finished), key=lambda s: s.source_begin)
    assert [(s.source_begin, s.source_end) for s in syncs] == [(10, 12), (14, 16), (17, 18)]
    assert syncs[0] == sync(10, 12, (10, 100, 2), epoch=2)
    # Nothing below the failed record is held back; nothing from it on is committed.
    for run in finished:
        p.persisted(run.end)
    assert p.commit_position == 12


def test_orphan_copies_with_a_failed_record_between_them_are_not_joined() -> None:
    p = make_progress()
    for offset in range(5):
        p.produced(offset)
    p.delivered(0, 0)
    p.failed(1, "timeout")
    p.delivered(2, 1)
    p.failed(3, "timeout")  # a later failure: the rewind still goes to the first one
    p.delivered(4, 2)
    assert p.rewind() == 1
    syncs = all_syncs(p.take_finished())
    assert sorted((s.source_begin, s.source_end, s.record_count) for s in syncs) == [
        (0, 1, 1),
        (2, 3, 1),
        (4, 5, 1),
    ]


def test_a_failure_at_the_start_of_a_run_leaves_earlier_runs_as_they_were() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    p.seal(2)
    first = p.take_finished()
    p.produced(2)
    p.failed(2, "timeout")
    assert p.rewind() == 2
    assert first == [FinishedRun((sync(0, 2, (0, 0, 1)),), 2)]
    assert all_copies(p.take_finished()) == []


def test_seal_is_ignored_while_a_failure_waits_for_its_rewind() -> None:
    p = make_progress()
    for offset in range(3):
        p.produced(offset)
    p.delivered(0, 7)
    p.failed(1, "timeout")
    p.seal(5)  # 2 is still in flight
    p.delivered(2, 8)
    p.seal(6)  # nothing in flight: a sealed run would finish now and claim 1 holds nothing
    assert p.take_finished() == []
    assert p.rewind() == 1
    # The copy of 2 is kept for itself; the sealed-over positions 3 to 5 are not claimed.
    assert sorted(all_syncs(p.take_finished()), key=lambda s: s.source_begin) == [
        sync(0, 1, (0, 7, 1)),
        sync(2, 3, (2, 8, 1)),
    ]


def test_after_a_rewind_the_next_pass_starts_a_fresh_run_there() -> None:
    p = make_progress()
    p.produced(0, 1)
    p.failed(0, "timeout")
    assert p.rewind() == 0
    p.produced(0, 2)
    p.delivered(0, 5)
    p.seal(1)
    assert p.take_finished() == [FinishedRun((sync(0, 1, (0, 5, 1), epoch=2),), 1)]


def test_rewind_needs_a_failure_and_nothing_in_flight() -> None:
    p = make_progress()
    with pytest.raises(ValueError, match="failure"):
        p.rewind()
    p.produced(0)
    p.produced(1)
    p.failed(0, "timeout")
    assert not p.ready_to_rewind
    with pytest.raises(ValueError, match="in flight"):
        p.rewind()


@pytest.mark.parametrize("report", ["delivered", "failed"])
def test_a_report_without_a_record_in_flight_is_refused(report: str) -> None:
    p = make_progress(start=4)
    with pytest.raises(ValueError, match=r"orders-2@4 without a record in flight"):
        if report == "delivered":
            p.delivered(4, 0)
        else:
            p.failed(4, "timeout")


def test_a_report_for_more_records_than_were_produced_is_refused() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    with pytest.raises(ValueError, match="without a record in flight"):
        p.delivered(1, 1)


def test_syncs_lost_rewinds_to_the_commit_position() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    p.seal(1)
    [first] = p.take_finished()
    p.persisted(first.end)
    p.produced(1)
    p.delivered(1, 1)
    p.seal(2)
    p.take_finished()  # written, then reported lost
    p.produced(2)
    p.syncs_lost("offset sync not written: Broker: Not enough replicas")
    assert not p.accepting
    assert not p.ready_to_rewind
    assert p.failure == "offset sync not written: Broker: Not enough replicas"
    p.delivered(2, 2)  # delivered after the loss: kept as a run of its own
    assert p.rewind() == 1
    assert all_syncs(p.take_finished()) == [sync(2, 3, (2, 2, 1))]


def test_syncs_lost_after_a_record_failure_rewinds_to_the_older_position() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    p.seal(1)
    p.take_finished()  # lost below
    p.produced(1)
    p.failed(1, "timeout")
    p.syncs_lost("offset sync not written")
    assert p.failure == "offset sync not written"
    assert p.rewind() == 0


def test_syncs_lost_behind_a_failed_record_keeps_the_failed_position() -> None:
    p = make_progress()
    p.produced(0)
    p.delivered(0, 0)
    p.seal(1)
    [run] = p.take_finished()
    p.persisted(run.end)
    p.produced(1)
    p.produced(2)
    p.delivered(1, 1)
    p.failed(2, "timeout")
    p.syncs_lost("offset sync not written")  # commit position 1 is below the failure at 2
    assert p.rewind() == 1


def test_syncs_lost_keeps_copies_delivered_before_the_loss_in_an_open_run() -> None:
    # Run [0, 1) is finished and its sync written; record 1 is delivered into the open run;
    # then the target reports the sync of [0, 1) lost. rewind() "finishes what was delivered":
    # 1 -> 101 is on the target, so some sync must still map it, as the copies delivered after
    # a failure or after the loss are.
    p = make_progress()
    p.produced(0)
    p.delivered(0, 100)
    p.seal(1)
    p.take_finished()
    p.produced(1)
    p.delivered(1, 101)
    p.syncs_lost("offset sync not written")
    assert p.rewind() == 0
    assert (1, 101) in all_copies(p.take_finished())


def test_syncs_lost_keeps_a_copy_of_the_rewind_position_delivered_after_the_loss() -> None:
    # A failure at 1 with 2 delivered after it; the re-copy starts at 1 and the syncs of the
    # run before it land, so the commit position is 1. Then the write of the syncs of the kept
    # copy of 2 is reported lost, and only after that is the new copy of 1 delivered:
    # "copies delivered from now on are kept as runs of their own".
    p = make_progress()
    for offset in range(3):
        p.produced(offset)
    p.delivered(0, 0)
    p.failed(1, "Broker: Message size too large")
    p.delivered(2, 1)
    assert p.rewind() == 1
    before, kept = p.take_finished()
    assert kept.syncs == (sync(2, 3, (2, 1, 1)),)
    p.persisted(before.end)
    assert p.commit_position == 1
    p.produced(1)
    p.syncs_lost("offset sync not written")  # the syncs of ``kept``
    p.delivered(1, 2)
    assert p.rewind() == 1
    assert (1, 2) in all_copies(p.take_finished())


def test_next_offset_follows_the_records_handed_to_the_producer_and_the_rewind() -> None:
    p = make_progress(start=40)
    assert p.next_offset == 40
    p.produced(40)
    p.produced(43)
    assert p.next_offset == 44
    p.delivered(40, 0)
    p.failed(43, "timeout")
    p.seal(50)  # ignored: the partition waits for its rewind
    assert p.next_offset == 44
    assert p.rewind() == 43
    assert p.next_offset == 43


# -- syncs for copies outside the run bookkeeping -----------------------------------------------


@st.composite
def copies_in_target_order(draw: st.DrawFn) -> list[tuple[int, int]]:
    """What a scan of the target finds: copies in target order; sources repeat and go back
    (re-copies), targets jump over other data, sometimes further than one sync can say."""
    sources = draw(st.lists(st.integers(0, 30), max_size=40))
    steps = st.one_of(st.integers(1, 3), st.integers(MAX_GAP - 1, MAX_GAP + 2))
    target = draw(st.integers(0, 1_000))
    copies = []
    for source in sources:
        copies.append((source, target))
        target += draw(steps)
    return copies


@settings(max_examples=200, deadline=None)
@given(copies_in_target_order())
def test_standalone_syncs_map_exactly_the_copies_and_claim_nothing_else(
    copies: list[tuple[int, int]],
) -> None:
    syncs = standalone_syncs(TP, SOURCE_ID, TARGET_ID, copies)
    assert Counter(copy for s in syncs for copy in s.copies()) == Counter(copies)
    for s in syncs:
        assert s.tp == TP
        assert (s.source_topic_id, s.target_topic_id) == (SOURCE_ID, TARGET_ID)
        assert s.segments
        covered = [source for source, _ in s.copies()]
        assert covered == list(range(s.source_begin, s.source_end)), f"{s} claims a position"


def test_standalone_syncs_split_at_source_jumps_and_re_copies() -> None:
    copies = [(5, 100), (6, 101), (8, 102), (5, 103), (6, 105)]
    assert standalone_syncs(TP, SOURCE_ID, TARGET_ID, copies) == (
        sync(5, 7, (5, 100, 2)),
        sync(8, 9, (8, 102, 1)),
        sync(5, 7, (5, 103, 1), (6, 105, 1)),
    )
    assert standalone_syncs(TP, SOURCE_ID, TARGET_ID, []) == ()


def test_standalone_syncs_name_the_leader_epoch_they_are_given() -> None:
    syncs = standalone_syncs(TP, SOURCE_ID, TARGET_ID, [(3, 9), (7, 10)], leader_epoch=12)
    assert syncs == (sync(3, 4, (3, 9, 1), epoch=12), sync(7, 8, (7, 10, 1), epoch=12))
