"""The per-partition state machine: every transition of today's at-least-once lane on a fake
clock (table-driven), the start position decision, and properties over random event sequences."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.partition_state import (
    Action,
    CommittedProgress,
    DeliveryFailed,
    Event,
    FlowStart,
    Held,
    NothingInFlight,
    OperatorPause,
    OperatorPaused,
    OperatorResume,
    PartitionPolicy,
    PartitionState,
    PauseConsumer,
    PendingRestart,
    Phase,
    PositionSeen,
    ProgressPersisted,
    Reading,
    RebuildSyncs,
    RebuiltSyncsAcknowledged,
    RepairDone,
    RepairFailed,
    RepairStage,
    ReportLostRecords,
    ReportRecreatedTopic,
    ReportSkipped,
    ReportStall,
    RestartProgress,
    RestartSeekDone,
    Resumed,
    RetentionOvertook,
    Rewind,
    SeekAndResume,
    SkipRequested,
    StallWatch,
    StartPosition,
    SyncRepair,
    SyncsLost,
    TimerFired,
    TopicRecreated,
    copies,
    keepalive_allowed,
    phase,
    seals,
    start_position,
    step,
    timestamp_to_look_up,
)
from failover.partition_state import Failure as F

POLICY = PartitionPolicy(first_backoff_s=0.5, max_backoff_s=30.0, repair_retry_s=5.0)
IDS = (b"new-source", b"new-remote")

COPYING = PartitionState()
FAILED = PartitionState(failure=F(10, "timed out"))
BACKING_OFF = PartitionState(hold=Held(100.5), resume_from=10, failures_in_a_row=1)
PAUSED = PartitionState(hold=OperatorPaused(), resume_from=42)
LOST = PartitionState(failure=F(5, "sync lost"), repair=SyncRepair(5, RepairStage.NEEDED))
REPAIRING = PartitionState(failure=F(5, "sync lost"), repair=SyncRepair(5, RepairStage.RUNNING))
RETRY_WAIT = PartitionState(
    failure=F(5, "sync lost"), repair=SyncRepair(5, RepairStage.RETRY_WAIT, retry_at=105.0)
)
AWAITING = PartitionState(repair=SyncRepair(5, RepairStage.AWAITING_ACKS))
RESTARTING = PartitionState(restart=PendingRestart(100))
WATCHED = PartitionState(stall=StallWatch(position=7, since=10.0))


def rewound(
    at: int, until: float, failures: int, repair: SyncRepair | None = None
) -> PartitionState:
    return PartitionState(
        hold=Held(until), resume_from=at, failures_in_a_row=failures, repair=repair
    )


def rewind(at: int, backoff: float, failures: int, reason: str) -> tuple[Action, ...]:
    return (Rewind(at, backoff, failures, reason), PauseConsumer())


# (name, state, event, now, expected state, expected actions)
TRANSITIONS: list[tuple[str, PartitionState, Event, float, PartitionState, tuple[Action, ...]]] = [
    # a delivery failed: stop copying at the lowest failed offset, do not pause the consumer
    ("delivery failed", COPYING, DeliveryFailed(10, "timed out"), 100.0, FAILED, ()),
    ("a later failure keeps the first", FAILED, DeliveryFailed(12, "x"), 100.0, FAILED, ()),
    (
        "an earlier failure moves the rewind point",
        FAILED,
        DeliveryFailed(7, "refused"),
        100.0,
        PartitionState(failure=F(7, "refused")),
        (),
    ),
    ("records in flight: nothing to do", COPYING, NothingInFlight(), 100.0, COPYING, ()),
    # settled: rewind and back off, doubling per failure in a row up to the maximum
    (
        "rewind after settling",
        FAILED,
        NothingInFlight(),
        100.0,
        rewound(10, 100.5, 1),
        rewind(10, 0.5, 1, "timed out"),
    ),
    (
        "the fourth failure in a row waits 4 s",
        PartitionState(failure=F(10, "x"), failures_in_a_row=3),
        NothingInFlight(),
        100.0,
        rewound(10, 104.0, 4),
        rewind(10, 4.0, 4, "x"),
    ),
    (
        "the backoff stops at its maximum",
        PartitionState(failure=F(10, "x"), failures_in_a_row=100),
        NothingInFlight(),
        100.0,
        rewound(10, 130.0, 101),
        rewind(10, 30.0, 101, "x"),
    ),
    # backing off: resume when due, by seeking the rewind point; the seek is retried until it works
    ("backoff not over", BACKING_OFF, TimerFired(), 100.4, BACKING_OFF, ()),
    ("backoff over: seek", BACKING_OFF, TimerFired(), 100.5, BACKING_OFF, (SeekAndResume(10),)),
    (
        "seek worked",
        BACKING_OFF,
        Resumed(),
        100.5,
        PartitionState(resume_from=10, failures_in_a_row=1),
        (),
    ),
    ("a stale resume report changes nothing", BACKING_OFF, Resumed(), 100.0, BACKING_OFF, ()),
    ("no timer while reading", COPYING, TimerFired(), 100.0, COPYING, ()),
    # success past the rewind point resets the backoff; at the rewind point it does not
    (
        "success past the rewind point",
        PartitionState(resume_from=10, failures_in_a_row=3),
        ProgressPersisted(11),
        100.0,
        PartitionState(resume_from=10),
        (),
    ),
    (
        "success up to the rewind point",
        PartitionState(resume_from=10, failures_in_a_row=3),
        ProgressPersisted(10),
        100.0,
        PartitionState(resume_from=10, failures_in_a_row=3),
        (),
    ),
    # a lost sync: stop at the commit position, repair before rewinding, retry a failed repair
    ("syncs lost", COPYING, SyncsLost(5, "sync lost"), 100.0, LOST, ()),
    (
        "syncs lost behind an earlier failure",
        PartitionState(failure=F(3, "x")),
        SyncsLost(5, "sync lost"),
        100.0,
        PartitionState(failure=F(3, "x"), repair=SyncRepair(5, RepairStage.NEEDED)),
        (),
    ),
    ("repair once settled", LOST, NothingInFlight(), 100.0, REPAIRING, (RebuildSyncs(5),)),
    ("a running repair waits", REPAIRING, NothingInFlight(), 100.0, REPAIRING, ()),
    ("repair failed", REPAIRING, RepairFailed("down"), 100.0, RETRY_WAIT, ()),
    ("retry not due", RETRY_WAIT, NothingInFlight(), 104.9, RETRY_WAIT, ()),
    (
        "retry due",
        RETRY_WAIT,
        NothingInFlight(),
        105.0,
        PartitionState(
            failure=F(5, "sync lost"),
            repair=SyncRepair(5, RepairStage.RUNNING, retry_at=105.0),
        ),
        (RebuildSyncs(5),),
    ),
    (
        "repaired with nothing to rebuild: rewind",
        REPAIRING,
        RepairDone(rebuilt_pending=False),
        100.0,
        rewound(5, 100.5, 1),
        rewind(5, 0.5, 1, "sync lost"),
    ),
    (
        "repaired, rebuilt syncs unacknowledged: rewind",
        REPAIRING,
        RepairDone(rebuilt_pending=True),
        100.0,
        rewound(5, 100.5, 1, repair=SyncRepair(5, RepairStage.AWAITING_ACKS)),
        rewind(5, 0.5, 1, "sync lost"),
    ),
    ("a repair result nobody asked for", LOST, RepairDone(False), 100.0, LOST, ()),
    ("a repair failure nobody asked for", LOST, RepairFailed("x"), 100.0, LOST, ()),
    ("rebuilt syncs acknowledged", AWAITING, RebuiltSyncsAcknowledged(), 100.0, COPYING, ()),
    (
        "lost again before the rebuilt ones are acknowledged",
        AWAITING,
        SyncsLost(9, "again"),
        100.0,
        PartitionState(failure=F(9, "again"), repair=SyncRepair(5, RepairStage.NEEDED)),
        (),
    ),
    (
        "rebuilt acknowledgements replace a newer loss too (today's behaviour)",
        LOST,
        RebuiltSyncsAcknowledged(),
        100.0,
        PartitionState(
            failure=F(5, "sync lost"), repair=SyncRepair(5, RepairStage.NEEDED, lost_pending=False)
        ),
        (),
    ),
    (
        "after that, the next loss sets the repair point",
        PartitionState(repair=SyncRepair(5, RepairStage.NEEDED, lost_pending=False)),
        SyncsLost(9, "again"),
        100.0,
        PartitionState(failure=F(9, "again"), repair=SyncRepair(9, RepairStage.NEEDED)),
        (),
    ),
    (
        "a loss during a running repair leaves the repair running",
        REPAIRING,
        SyncsLost(3, "again"),
        100.0,
        PartitionState(failure=F(3, "again"), repair=SyncRepair(5, RepairStage.RUNNING)),
        (),
    ),
    # operator pause and resume
    ("pause while reading", COPYING, OperatorPause(42), 100.0, PAUSED, (PauseConsumer(),)),
    (
        "pause during a backoff keeps the rewind point",
        BACKING_OFF,
        OperatorPause(42),
        100.0,
        PartitionState(hold=OperatorPaused(), resume_from=10, failures_in_a_row=1),
        (PauseConsumer(),),
    ),
    ("pause again", PAUSED, OperatorPause(50), 100.0, PAUSED, ()),
    ("no timer lifts a pause", PAUSED, TimerFired(), 1e9, PAUSED, ()),
    ("no resume report lifts a pause", PAUSED, Resumed(), 1e9, PAUSED, ()),
    (
        "resume: seek at the next cycle",
        PAUSED,
        OperatorResume(),
        200.0,
        PartitionState(hold=Held(200.0), resume_from=42),
        (),
    ),
    ("resume while reading", COPYING, OperatorResume(), 200.0, COPYING, ()),
    (
        "a failure settles and rewinds under a pause without lifting it",
        PartitionState(hold=OperatorPaused(), resume_from=42, failure=F(30, "x")),
        NothingInFlight(),
        100.0,
        PartitionState(hold=OperatorPaused(), resume_from=30, failures_in_a_row=1),
        rewind(30, 0.5, 1, "x"),
    ),
    # retention overtook the copy; a recreated topic
    (
        "retention overtook the copy",
        COPYING,
        RetentionOvertook(log_start=100, next_offset=40),
        100.0,
        RESTARTING,
        (ReportLostRecords(60, 100),),
    ),
    (
        "retention overtook nothing unread",
        COPYING,
        RetentionOvertook(log_start=100, next_offset=120),
        100.0,
        RESTARTING,
        (ReportLostRecords(0, 100),),
    ),
    ("a restart already waits", RESTARTING, RetentionOvertook(200, 40), 100.0, RESTARTING, ()),
    (
        "topic recreated",
        COPYING,
        TopicRecreated(*IDS, log_start=0),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (ReportRecreatedTopic(0),),
    ),
    (
        "recreated wins over retention",
        RESTARTING,
        TopicRecreated(*IDS, log_start=0),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (ReportRecreatedTopic(0),),
    ),
    (
        "recreated again while a restart for new ids waits",
        PartitionState(restart=PendingRestart(0, IDS)),
        TopicRecreated(b"a", b"b", log_start=3),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (),
    ),
    (
        "retention while a restart for new ids waits",
        PartitionState(restart=PendingRestart(0, IDS)),
        RetentionOvertook(7, 0),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (),
    ),
    (
        "restart once settled",
        RESTARTING,
        NothingInFlight(),
        100.0,
        replace(RESTARTING, resume_from=100),
        (RestartProgress(100, None),),
    ),
    (
        "a restart drops a waiting failure",
        PartitionState(restart=PendingRestart(0, IDS), failure=F(3, "x")),
        NothingInFlight(),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (RestartProgress(0, IDS),),
    ),
    (
        "a restart leaves a needed repair (today's behaviour) and resumes at the new start",
        PartitionState(
            hold=Held(150.0), resume_from=900, restart=PendingRestart(0, IDS), repair=LOST.repair
        ),
        NothingInFlight(),
        100.0,
        PartitionState(
            hold=Held(150.0), resume_from=0, restart=PendingRestart(0, IDS), repair=LOST.repair
        ),
        (RestartProgress(0, IDS),),
    ),
    ("restart seek worked", RESTARTING, RestartSeekDone(), 100.0, COPYING, ()),
    # stall watching
    (
        "a new position restarts the watch",
        WATCHED,
        PositionSeen(8, 20),
        100.0,
        PartitionState(stall=StallWatch(8, 100.0)),
        (),
    ),
    ("not stalled long enough", WATCHED, PositionSeen(7, 20), 69.9, WATCHED, ()),
    (
        "stalled",
        WATCHED,
        PositionSeen(7, 20),
        70.0,
        PartitionState(stall=StallWatch(7, 10.0, reported=True)),
        (ReportStall(7, 20, 60.0),),
    ),
    (
        "reported once",
        PartitionState(stall=StallWatch(7, 10.0, reported=True)),
        PositionSeen(7, 20),
        500.0,
        PartitionState(stall=StallWatch(7, 10.0, reported=True)),
        (),
    ),
    ("caught up is no stall", WATCHED, PositionSeen(7, 7), 500.0, WATCHED, ()),
    (
        "an unknown position is no stall",
        PartitionState(stall=StallWatch(-1001, 0.0)),
        PositionSeen(-1001, 20),
        500.0,
        PartitionState(stall=StallWatch(-1001, 0.0)),
        (),
    ),
    (
        "a held partition is not watched",
        PartitionState(hold=OperatorPaused(), stall=StallWatch(7, 10.0)),
        PositionSeen(7, 20),
        500.0,
        PartitionState(hold=OperatorPaused(), stall=StallWatch(7, 10.0)),
        (),
    ),
    (
        "a floor above a paused partition restarts it there, still paused",
        PAUSED,
        SkipRequested(60, 42),
        100.0,
        replace(PAUSED, restart=PendingRestart(60)),
        (ReportSkipped(18, 60),),
    ),
    (
        "a floor above a reading partition restarts it there",
        COPYING,
        SkipRequested(60, 50),
        100.0,
        replace(COPYING, restart=PendingRestart(60)),
        (ReportSkipped(10, 60),),
    ),
    (
        "a floor at or below the position changes nothing",
        COPYING,
        SkipRequested(50, 50),
        100.0,
        COPYING,
        (),
    ),
    (
        "a floor above a backoff's resume point restarts at the floor",
        BACKING_OFF,
        SkipRequested(12, 30),
        100.0,
        replace(BACKING_OFF, restart=PendingRestart(12)),
        (ReportSkipped(2, 12),),
    ),
    (
        "a floor above a pending retention restart raises it",
        RESTARTING,
        SkipRequested(120, 90),
        100.0,
        PartitionState(restart=PendingRestart(120)),
        (ReportSkipped(20, 120),),
    ),
    (
        "a floor says nothing of a recreated topic",
        PartitionState(restart=PendingRestart(0, IDS)),
        SkipRequested(120, 90),
        100.0,
        PartitionState(restart=PendingRestart(0, IDS)),
        (),
    ),
]


@pytest.mark.parametrize(
    ("state", "event", "now", "expected", "actions"),
    [case[1:] for case in TRANSITIONS],
    ids=[case[0] for case in TRANSITIONS],
)
def test_transition(
    state: PartitionState,
    event: Event,
    now: float,
    expected: PartitionState,
    actions: tuple[Action, ...],
) -> None:
    assert step(state, event, now, POLICY) == (expected, actions)


def test_the_backoff_doubles_like_today_and_never_overflows() -> None:
    # Today: min(max_retry_backoff_s, 0.5 * 2 ** (n - 1)), which raises at n = 1025.
    for n in range(1, 1025):
        assert POLICY.backoff_s(n) == min(30.0, 0.5 * 2 ** (n - 1))
    unbounded = PartitionPolicy(max_backoff_s=float("inf"))
    assert unbounded.backoff_s(10_000) == unbounded.backoff_s(1001) > 0


# ------------------------------------------------------------------------ predicates


@pytest.mark.parametrize(
    ("state", "copying", "sealing", "keepalive", "expected_phase"),
    [
        (COPYING, True, True, True, Phase.COPYING),
        (FAILED, False, False, False, Phase.SETTLING),
        (BACKING_OFF, False, False, False, Phase.BACKING_OFF),
        (PAUSED, False, False, True, Phase.OPERATOR_PAUSED),  # an idle pause keeps its syncs
        (LOST, False, False, False, Phase.REPAIRING),
        (REPAIRING, False, False, False, Phase.REPAIRING),
        (RETRY_WAIT, False, False, False, Phase.REPAIR_RETRY_WAIT),
        (AWAITING, True, True, False, Phase.COPYING),
        # nothing is copied (under the old topic ids) nor sealed while a restart waits
        (RESTARTING, False, False, False, Phase.RESTARTING),
        (
            PartitionState(hold=OperatorPaused(), failure=F(1, "x")),
            False,
            False,
            False,
            Phase.OPERATOR_PAUSED,
        ),
    ],
)
def test_predicates(
    state: PartitionState, copying: bool, sealing: bool, keepalive: bool, expected_phase: Phase
) -> None:
    assert copies(state) is copying
    assert seals(state) is sealing
    assert keepalive_allowed(state, syncs_unacknowledged=False) is keepalive
    assert keepalive_allowed(state, syncs_unacknowledged=True) is False
    assert phase(state) is expected_phase


# ------------------------------------------------------------------------ start position


@pytest.mark.parametrize(
    ("committed", "flow_start", "found", "expected"),
    [
        (CommittedProgress(50, 3), FlowStart(), None, StartPosition(50, 3, True, 0)),
        (CommittedProgress(50, None), FlowStart(), None, StartPosition(50, -1, True, 0)),
        (CommittedProgress(50, -1), FlowStart("latest"), None, StartPosition(50, -1, True, 0)),
        (CommittedProgress(10, 2), FlowStart(), None, StartPosition(10, 2, True, 0)),
        # below the log start: the records between were lost, and the epoch means nothing
        (CommittedProgress(4, 2), FlowStart(), None, StartPosition(10, -1, False, 6)),
        # no progress (OFFSET_INVALID is negative): the flow's start decides
        (None, FlowStart("earliest"), None, StartPosition(10, -1, False, 0)),
        (None, FlowStart("latest"), None, StartPosition(100, -1, False, 0)),
        (CommittedProgress(-1001), FlowStart("latest"), None, StartPosition(100, -1, False, 0)),
        (None, FlowStart("timestamp", 1_700_000), 40, StartPosition(40, -1, False, 0)),
        (None, FlowStart("timestamp", 1_700_000), -1, StartPosition(100, -1, False, 0)),
        (None, FlowStart("timestamp", 1_700_000), None, StartPosition(100, -1, False, 0)),
        (None, FlowStart("timestamp", None), None, StartPosition(10, -1, False, 0)),
    ],
)
def test_start_position(
    committed: CommittedProgress | None,
    flow_start: FlowStart,
    found: int | None,
    expected: StartPosition,
) -> None:
    assert start_position(committed, 10, 100, flow_start, found) == expected


@pytest.mark.parametrize(
    ("committed", "floor", "expected"),
    [
        (CommittedProgress(50, 3), 70, StartPosition(70, -1, False, 0)),
        (CommittedProgress(50, 3), 50, StartPosition(50, 3, True, 0)),
        (CommittedProgress(5, 3), 70, StartPosition(70, -1, False, 5)),
        (None, 70, StartPosition(70, -1, False, 0)),
        (None, None, StartPosition(10, -1, False, 0)),
    ],
)
def test_a_start_position_never_lies_below_the_floor(
    committed: CommittedProgress | None, floor: int | None, expected: StartPosition
) -> None:
    assert start_position(committed, 10, 100, FlowStart(), floor=floor) == expected


def test_a_floor_over_a_pause_seeks_the_floor_on_resume() -> None:
    state, actions = step(PAUSED, SkipRequested(60, 42), 100.0, POLICY)
    state, actions = step(state, NothingInFlight(), 100.1, POLICY)
    assert actions == (RestartProgress(60, None),) and isinstance(state.hold, OperatorPaused)
    state, _ = step(state, RestartSeekDone(), 100.2, POLICY)
    state, _ = step(state, OperatorResume(), 100.3, POLICY)
    state, actions = step(state, TimerFired(), 100.4, POLICY)
    assert actions == (SeekAndResume(60),)


@pytest.mark.parametrize(
    ("committed", "flow_start", "expected"),
    [
        (None, FlowStart("timestamp", 5), 5),
        (CommittedProgress(-1001), FlowStart("timestamp", 5), 5),
        (CommittedProgress(0), FlowStart("timestamp", 5), None),
        (None, FlowStart("timestamp", None), None),
        (None, FlowStart("latest"), None),
    ],
)
def test_timestamp_to_look_up(
    committed: CommittedProgress | None, flow_start: FlowStart, expected: int | None
) -> None:
    assert timestamp_to_look_up(committed, flow_start) == expected


# ------------------------------------------------------------------------ reachability


REACH: dict[Phase, list[Event]] = {
    Phase.COPYING: [],
    Phase.SETTLING: [DeliveryFailed(3, "x")],
    Phase.BACKING_OFF: [DeliveryFailed(3, "x"), NothingInFlight()],
    Phase.OPERATOR_PAUSED: [OperatorPause(0)],
    Phase.REPAIRING: [SyncsLost(0, "x"), NothingInFlight()],
    Phase.REPAIR_RETRY_WAIT: [SyncsLost(0, "x"), NothingInFlight(), RepairFailed("x")],
    Phase.RESTARTING: [RetentionOvertook(5, 0)],
}


def run(events: list[Event], start: float = 0.0) -> PartitionState:
    state = PartitionState()
    for event in events:
        state, _ = step(state, event, start, POLICY)
    return state


def test_every_phase_is_reachable_from_a_fresh_partition() -> None:
    assert set(REACH) == set(Phase)
    for expected, events in REACH.items():
        assert phase(run(events)) is expected


# ------------------------------------------------------------------------ properties

# few offsets, so that failures, rewind points and persisted ends often coincide
offsets = st.integers(min_value=-1, max_value=8)
events: st.SearchStrategy[Event] = st.one_of(
    st.builds(DeliveryFailed, offsets, st.sampled_from(["a", "b"])),
    st.builds(SyncsLost, offsets, st.just("lost")),
    st.builds(ProgressPersisted, offsets),
    st.just(NothingInFlight()),
    st.just(TimerFired()),
    st.just(Resumed()),
    st.builds(RepairDone, st.booleans()),
    st.builds(RepairFailed, st.just("down")),
    st.just(RebuiltSyncsAcknowledged()),
    st.builds(OperatorPause, offsets),
    st.just(OperatorResume()),
    st.builds(RetentionOvertook, offsets, offsets),
    st.builds(SkipRequested, offsets, offsets),
    st.builds(TopicRecreated, st.sampled_from([b"s1", b"s2"]), st.just(b"t"), offsets),
    st.just(RestartSeekDone()),
    st.builds(PositionSeen, offsets, offsets),
)
histories = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=40.0, allow_nan=False), events), max_size=60
)


@dataclass
class Model:
    """What the properties expect, followed independently of the machine's own fields."""

    operator_paused: bool = False
    failure_waiting: bool = False
    rewinds_since_success: int = 0
    resume_from: int = 0


def replay(history: list[tuple[float, Event]]) -> None:
    """Step through ``history`` on a fake clock, checking the properties after every step."""
    state, model, now = PartitionState(), Model(), 0.0
    for dt, event in history:
        now += dt
        before = state
        state, actions = step(state, event, now, POLICY)
        kinds = [type(action) for action in actions]

        # An operator pause is lifted by an operator resume only, never by a timer.
        if isinstance(event, OperatorPause):
            model.operator_paused = True
        elif isinstance(event, OperatorResume):
            model.operator_paused = False
        if model.operator_paused:
            assert isinstance(state.hold, OperatorPaused)
            assert SeekAndResume not in kinds
        assert isinstance(state.hold, OperatorPaused) is model.operator_paused

        # Never copy while a failure waits for its rewind (or a restart replacing it).
        if isinstance(event, DeliveryFailed | SyncsLost):
            model.failure_waiting = True
        if Rewind in kinds or RestartProgress in kinds:
            model.failure_waiting = False
        assert (state.failure is not None) is model.failure_waiting
        if model.failure_waiting:
            assert not copies(state)
            assert not keepalive_allowed(state, syncs_unacknowledged=False)

        # A seek-and-resume only when a hold is over; a rewind only once nothing is in flight.
        if SeekAndResume in kinds:
            assert isinstance(state.hold, Held) and now >= state.hold.until
        if Rewind in kinds or RebuildSyncs in kinds or RestartProgress in kinds:
            assert isinstance(event, NothingInFlight | RepairDone)

        # The backoff grows per rewind in a row, never past its maximum, and starts over after
        # a success past the rewind point.
        if isinstance(event, ProgressPersisted) and event.end > model.resume_from:
            model.rewinds_since_success = 0
        for action in actions:
            if isinstance(action, RestartProgress):
                model.resume_from = action.at  # a pending resume seeks the new start
            if isinstance(action, Rewind):
                model.rewinds_since_success += 1
                model.resume_from = action.position
                assert action.failures_in_a_row == model.rewinds_since_success
                assert action.backoff_s <= POLICY.max_backoff_s
                expected = min(30.0, 0.5 * 2 ** (model.rewinds_since_success - 1))
                assert action.backoff_s == expected
                if isinstance(state.hold, Held):
                    assert state.hold.until == now + action.backoff_s
        if isinstance(event, OperatorPause) and isinstance(before.hold, Reading):
            model.resume_from = event.next_offset
        assert state.failures_in_a_row == model.rewinds_since_success
        assert state.resume_from == model.resume_from

        # A restart waits until it is done, whatever else happens.
        if before.restart is not None and not isinstance(event, RestartSeekDone):
            assert state.restart is not None
        phase(state)  # defined for every state


@settings(max_examples=400, deadline=None)
@given(histories)
def test_properties_hold_over_any_event_sequence(history: list[tuple[float, Event]]) -> None:
    replay(history)


# Failures in a row, with the odd success at or just past the rewind point: long backoffs.
failure_loops = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=40.0, allow_nan=False),
        st.sampled_from(
            [
                *[DeliveryFailed(3, "x"), NothingInFlight()] * 4,
                TimerFired(),
                Resumed(),
                ProgressPersisted(3),
                ProgressPersisted(4),
            ]
        ),
    ),
    min_size=20,
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(failure_loops)
def test_properties_hold_over_long_failure_loops(history: list[tuple[float, Event]]) -> None:
    replay(history)


@settings(max_examples=200, deadline=None)
@given(histories)
def test_stepping_is_pure(history: list[tuple[float, Event]]) -> None:
    """The same history gives the same states and actions (no hidden state, nothing mutated)."""
    state, now, trace = PartitionState(), 0.0, []
    for dt, event in history:
        now += dt
        result = step(state, event, now, POLICY)
        assert step(state, event, now, POLICY) == result
        state = result[0]
        trace.append(result)
    state, now = PartitionState(), 0.0
    for (dt, event), expected in zip(history, trace, strict=True):
        now += dt
        assert step(state, event, now, POLICY) == expected
        state = expected[0]
