"""Per-partition replication state as a pure state machine: what a worker may do with one source
partition (copy it, hold it, rewind it, repair its syncs, restart it), decided without I/O.

The replication engine (``drsvc/runtime/replication/engine.py``) keeps one state per lane and
changes it only through :func:`step`; both delivery modes share it. It replaced the sentinels
the at-least-once worker used to keep in a mutable lane (``resume_at`` None, a time or infinity,
``reset_to``, ``new_topic_ids``, ``needs_repair``...), written from three modules.

How the engine uses it
======================

Keep one :class:`PartitionState` per source partition (``PartitionState()`` when the partition is
assigned, at the offset :func:`start_position` chose), feed every event through ``step(state, event,
now, policy)`` and execute the returned actions in order. ``now`` is the engine's monotonic clock in
seconds. Per loop cycle the engine sends :class:`NothingInFlight` (only when nothing of the
partition is in flight) and then :class:`TimerFired`. Results of actions with I/O come back as
events: :class:`Resumed` after a :class:`SeekAndResume` succeeded, :class:`RestartSeekDone` after
the seek of a :class:`RestartProgress` succeeded, :class:`RepairDone` / :class:`RepairFailed` after
a :class:`RebuildSyncs`. A failed seek reports nothing: the next cycle asks for it again. No event
ever raises; an event that means nothing in the current state changes nothing. The engine executes
:class:`PauseConsumer`, :class:`SeekAndResume` and :class:`ReportStall`; the at-least-once mode the
rest (rewind, sync repair, restart, the reports of lost records and recreated topics). The
exactly-once mode never sends failures here: a failure there fails the whole slot, which is dropped
and taken again from its committed progress.

Ticket bookkeeping of the sync writes (which write is acknowledged, in what order progress may
move) stays in the sync writer; it tells this machine only :class:`SyncsLost`,
:class:`ProgressPersisted` and :class:`RebuiltSyncsAcknowledged`, and whether syncs are still
unacknowledged (for :func:`keepalive_allowed`). The partition's offsets (``next_offset``, the
commit position, the log start) come in the events, read from ``PartitionProgress`` and the
consumer by the engine.

The transitions
===============

1. Start -> :func:`start_position`: committed progress at or past the log start resumes there
   with its leader epoch (and may learn its last copy); progress below the log start starts at
   the log start and reports the records lost; without progress the flow's start decides
   (``latest`` -> log end, ``timestamp`` -> the first offset at the timestamp, else the log end;
   anything else -> log start). Exactly once, progress of another topic id counts as none.
2. Assigned: a fresh state copies (:class:`Reading`, ``resume_from`` 0); the engine then follows
   flow control.
3. Copying: records are copied only while :func:`copies` (reading, no failure waiting, no
   restart waiting: nothing is copied under old topic ids); periodic sealing likewise
   (:func:`seals`).
4. A delivery failed, or the record was refused -> :class:`DeliveryFailed`: the lowest failed
   offset waits (phase ``SETTLING``); records read meanwhile are skipped.
5. Nothing in flight -> :class:`NothingInFlight`: a failure rewinds: failures in a row + 1,
   backoff ``min(max_backoff_s, 0.5 * 2 ** (n - 1))``, consumer paused, ``resume_from`` = the
   failed offset, :class:`Held` until the backoff ends (phase ``BACKING_OFF``).
6. Backoff over -> :class:`TimerFired`: seek ``resume_from`` and resume, asked again every cycle
   until the seek works -> :class:`Resumed`.
7. Syncs acknowledged in order moved progress past ``resume_from`` -> :class:`ProgressPersisted`:
   the failures in a row start over.
8. A sync write was lost -> :class:`SyncsLost`: a failure at the commit position, and a repair
   from there (unless lost syncs are already pending; phase ``REPAIRING``).
9. Nothing in flight with a repair needed: :class:`RebuildSyncs` before the rewind;
   :class:`RepairFailed` retries after ``repair_retry_s`` (phase ``REPAIR_RETRY_WAIT``),
   :class:`RepairDone` rewinds (5). Rebuilt syncs still unacknowledged keep the lost ones pending
   until :class:`RebuiltSyncsAcknowledged`.
10. Operator pause -> :class:`OperatorPause`: consumer paused, ``resume_from`` = the next offset
    if the partition was reading (a backoff keeps its own); a failure still settles, repairs and
    rewinds meanwhile, moving ``resume_from`` but never resuming (phase ``OPERATOR_PAUSED``).
11. Operator resume -> :class:`OperatorResume`: held until now, so the next cycle seeks
    ``resume_from`` (records fetched while paused were skipped, not copied).
12. Retention overtook the copy -> :class:`RetentionOvertook` (the engine looked at the topic
    first: a recreated topic wins): the records lost are reported, a restart at the log start
    waits (phase ``RESTARTING``); ignored while a restart waits.
13. Topic recreated with new ids -> :class:`TopicRecreated`: a restart at the log start with the
    new ids; ignored only while a restart for new ids waits.
14. Nothing in flight with a restart waiting: :class:`RestartProgress` (seal, write syncs, forget
    the last copy, new progress at the restart offset: the commit position kept past it for
    retention, forgotten for new ids; seek), asked again every cycle until the seek works ->
    :class:`RestartSeekDone`. A failure waiting in the old progress is dropped with it, and the
    resume point moves to the new start.
15. Skip requested -> :class:`SkipRequested` (a ``skip_below`` floor of the flow's control
    document above the position: a failover or a recovery keeps records out): the offsets
    skipped are reported and a restart at the floor waits, as after retention (14); a pending
    restart below the floor is raised to it; an operator pause holds on over it, so the resume
    seeks the floor. Start positions never lie below a floor either (:func:`start_position`).
16. Keepalive eligibility -> :func:`keepalive_allowed`: no unacknowledged, lost or rebuilt syncs,
    no repair, no restart, no failure, not backing off (an operator pause does not block it).
17. Stall watching -> :class:`PositionSeen`: only reading partitions; a moved position restarts
    the watch; one :class:`ReportStall` per stall, after ``stall_warning_s`` without movement
    while the log holds more.
18. Revoked, lost, shut down: the delivery mode settles and commits (unless lost) and drops the
    state. No transition here.

Behaviours kept that look questionable, for a later decision:

* An operator pause sets ``resume_from`` to the next offset, which is also the threshold that
  resets the backoff, and an operator resume ends a running backoff at once.
* A restart drops a failure waiting in the old progress; a pending sync repair stays pending
  with nothing to trigger it until the next failure.
* A sync lost while the previous repair's rebuilt syncs are unacknowledged counts as replaced
  once those are acknowledged: its write then moves progress again, possibly past copies no sync
  maps; the repair it needs still runs.

One deliberate difference from the worker this replaced: its backoff raised OverflowError at the
1025th failure in a row (``0.5 * 2 ** 1024``); here the doubling stops growing first, which gives
the same delays for every count below that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Literal, TypeAlias

__all__ = [
    "Action",
    "CommittedProgress",
    "DeliveryFailed",
    "Event",
    "FlowStart",
    "Held",
    "NothingInFlight",
    "OperatorPause",
    "OperatorPaused",
    "OperatorResume",
    "PartitionPolicy",
    "PartitionState",
    "PauseConsumer",
    "PendingRestart",
    "Phase",
    "PositionSeen",
    "ProgressPersisted",
    "Reading",
    "RebuildSyncs",
    "RebuiltSyncsAcknowledged",
    "RepairDone",
    "RepairFailed",
    "RepairStage",
    "ReportLostRecords",
    "ReportRecreatedTopic",
    "ReportSkipped",
    "ReportStall",
    "RestartProgress",
    "RestartSeekDone",
    "Resumed",
    "RetentionOvertook",
    "Rewind",
    "SeekAndResume",
    "SkipRequested",
    "StallWatch",
    "StartPosition",
    "SyncRepair",
    "SyncsLost",
    "TimerFired",
    "TopicRecreated",
    "copies",
    "keepalive_allowed",
    "phase",
    "seals",
    "start_position",
    "step",
    "timestamp_to_look_up",
]

#: the backoff stops doubling here (a float overflows at 1024 doublings)
_MAX_DOUBLINGS = 1000


@dataclass(frozen=True)
class PartitionPolicy:
    """The timings of a partition's state (from ``WorkerSettings``)."""

    #: the first backoff after a failure; it doubles with every failure in a row
    first_backoff_s: float = 0.5
    #: ``max_retry_backoff_s``
    max_backoff_s: float = 30.0
    #: wait before trying a failed sync repair again
    repair_retry_s: float = 5.0
    #: ``stall_warning_s``
    stall_warning_s: float = 60.0

    def backoff_s(self, failures_in_a_row: int) -> float:
        doublings = min(max(failures_in_a_row - 1, 0), _MAX_DOUBLINGS)
        return min(self.max_backoff_s, self.first_backoff_s * 2.0**doublings)


# ---------------------------------------------------------------------------------- the state


@dataclass(frozen=True)
class Reading:
    """The consumer fetches the partition."""


@dataclass(frozen=True)
class Held:
    """The consumer is paused until ``until``; then it seeks ``resume_from`` and resumes: a
    backoff after a rewind, or the resume right after an operator resume (``until`` = then)."""

    until: float


@dataclass(frozen=True)
class OperatorPaused:
    """Paused by the operator: only :class:`OperatorResume` lets it read again."""


Hold: TypeAlias = Reading | Held | OperatorPaused


@dataclass(frozen=True)
class Failure:
    """A copy or a sync did not make it: copy again from ``at`` once nothing is in flight."""

    at: int
    reason: str


class RepairStage(Enum):
    """Where the rebuilding of lost syncs stands."""

    #: syncs were lost: rebuild them once nothing is in flight, before the rewind
    NEEDED = "needed"
    #: :class:`RebuildSyncs` was asked for; waiting for :class:`RepairDone` or :class:`RepairFailed`
    RUNNING = "running"
    #: the last attempt failed: try again at ``retry_at``
    RETRY_WAIT = "retry wait"
    #: rebuilt syncs are written, not yet acknowledged (the lost ones wait for them)
    AWAITING_ACKS = "awaiting acknowledgements"


@dataclass(frozen=True)
class SyncRepair:
    """Lost sync writes and their repair (the tickets themselves stay with the sync writer)."""

    #: the commit position when the first of the lost syncs was lost: rebuild from there
    repair_from: int
    stage: RepairStage
    #: no repair attempt before this time (0.0: none failed yet)
    retry_at: float = 0.0
    #: lost syncs not yet replaced; the next loss only moves ``repair_from`` when False
    lost_pending: bool = True


@dataclass(frozen=True)
class PendingRestart:
    """Copy a new stretch from ``at`` once nothing is in flight: retention deleted records
    before they were copied, or the topic was recreated (``new_topic_ids``: source, remote)."""

    at: int
    new_topic_ids: tuple[bytes, bytes] | None = None


@dataclass(frozen=True)
class StallWatch:
    """The last consumer position seen while reading, since when, and whether reported."""

    position: int = -1
    since: float = 0.0
    reported: bool = False


@dataclass(frozen=True)
class PartitionState:
    """Everything that decides what happens to one source partition next (see the module
    docstring). A fresh partition copies: ``PartitionState()``."""

    hold: Hold = Reading()
    #: where the consumer seeks when it resumes; also the rewind point past which a persisted
    #: run resets ``failures_in_a_row``
    resume_from: int = 0
    failures_in_a_row: int = 0
    failure: Failure | None = None
    repair: SyncRepair | None = None
    restart: PendingRestart | None = None
    stall: StallWatch = StallWatch()


class Phase(Enum):
    """The headline of a state, for logs and status (first match, in this order)."""

    RESTARTING = "restarting"
    OPERATOR_PAUSED = "paused by the operator"
    REPAIRING = "repairing lost syncs"
    REPAIR_RETRY_WAIT = "waiting to retry a failed sync repair"
    SETTLING = "waiting for in-flight records before a rewind"
    BACKING_OFF = "backing off"
    COPYING = "copying"


def phase(state: PartitionState) -> Phase:
    if state.restart is not None:
        return Phase.RESTARTING
    if isinstance(state.hold, OperatorPaused):
        return Phase.OPERATOR_PAUSED
    if state.failure is not None:
        repair = state.repair
        if repair is not None and repair.stage is RepairStage.RETRY_WAIT:
            return Phase.REPAIR_RETRY_WAIT
        if repair is not None and repair.stage in (RepairStage.NEEDED, RepairStage.RUNNING):
            return Phase.REPAIRING
        return Phase.SETTLING
    if isinstance(state.hold, Held):
        return Phase.BACKING_OFF
    return Phase.COPYING


def copies(state: PartitionState) -> bool:
    """Are records read now copied? (reading, no failure waiting, no restart
    waiting: nothing is copied under the old topic ids.)"""
    return isinstance(state.hold, Reading) and state.failure is None and state.restart is None


def seals(state: PartitionState) -> bool:
    """Does the periodic seal close the partition's open run?"""
    return copies(state) and state.restart is None


def keepalive_allowed(state: PartitionState, syncs_unacknowledged: bool) -> bool:
    """May a keepalive sync be written now? (an operator pause does not block
    it; a backoff, a failure, a repair, a restart or unacknowledged syncs do.)"""
    return not (
        syncs_unacknowledged
        or state.repair is not None
        or state.restart is not None
        or state.failure is not None
        or isinstance(state.hold, Held)
    )


# ---------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class DeliveryFailed:
    """The copy of ``offset`` was not delivered (or was refused at produce)."""

    offset: int
    reason: str


@dataclass(frozen=True)
class SyncsLost:
    """A sync write failed; ``commit_position`` is the progress's commit position now."""

    commit_position: int
    reason: str


@dataclass(frozen=True)
class ProgressPersisted:
    """Syncs acknowledged in write order moved progress to ``end``."""

    end: int


@dataclass(frozen=True)
class NothingInFlight:
    """This cycle, no record of the partition is in flight."""


@dataclass(frozen=True)
class TimerFired:
    """A cycle of the engine's loop: deadlines up to ``now`` are due."""


@dataclass(frozen=True)
class Resumed:
    """The seek of a :class:`SeekAndResume` worked and the consumer resumed."""


@dataclass(frozen=True)
class RepairDone:
    """:class:`RebuildSyncs` worked; ``rebuilt_pending``: it wrote syncs not yet acknowledged."""

    rebuilt_pending: bool


@dataclass(frozen=True)
class RepairFailed:
    reason: str


@dataclass(frozen=True)
class RebuiltSyncsAcknowledged:
    """Every rebuilt sync is acknowledged: the lost ones count as replaced."""


@dataclass(frozen=True)
class OperatorPause:
    """The flow control document pauses the partition's topic; ``next_offset`` is where the
    progress continues reading."""

    next_offset: int


@dataclass(frozen=True)
class OperatorResume:
    """The flow control document no longer pauses the partition's topic."""


@dataclass(frozen=True)
class RetentionOvertook:
    """The next record to copy was deleted by retention (the engine checked first that the topic
    was not recreated)."""

    log_start: int
    next_offset: int


@dataclass(frozen=True)
class TopicRecreated:
    """The source or remote topic has ids other than the progress's (deleted and recreated)."""

    source_topic_id: bytes
    target_topic_id: bytes
    log_start: int


@dataclass(frozen=True)
class SkipRequested:
    """The flow's control document says: copy nothing of the partition below ``floor`` (a
    failover or a recovery wrote it; ``next_offset``: the progress's next offset now)."""

    floor: int
    next_offset: int


@dataclass(frozen=True)
class RestartSeekDone:
    """The seek of a :class:`RestartProgress` worked."""


@dataclass(frozen=True)
class PositionSeen:
    """The consumer's position and the cached log end, at a topic refresh."""

    position: int
    log_end: int


Event: TypeAlias = (
    DeliveryFailed
    | SyncsLost
    | ProgressPersisted
    | NothingInFlight
    | TimerFired
    | Resumed
    | RepairDone
    | RepairFailed
    | RebuiltSyncsAcknowledged
    | OperatorPause
    | OperatorResume
    | RetentionOvertook
    | TopicRecreated
    | SkipRequested
    | RestartSeekDone
    | PositionSeen
)


# ---------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class PauseConsumer:
    """Pause fetching the partition."""


@dataclass(frozen=True)
class SeekAndResume:
    """Seek to ``offset``; if that works, resume fetching and send :class:`Resumed`."""

    offset: int


@dataclass(frozen=True)
class Rewind:
    """Rewind the progress to ``position`` (finish what was delivered) and write its syncs;
    the consumer resumes from there after ``backoff_s`` (log ``reason``)."""

    position: int
    backoff_s: float
    failures_in_a_row: int
    reason: str


@dataclass(frozen=True)
class RebuildSyncs:
    """Rebuild the syncs of copies made from ``from_offset`` on; answer :class:`RepairDone` or
    :class:`RepairFailed`."""

    from_offset: int


@dataclass(frozen=True)
class RestartProgress:
    """Seal up to the last record read, write its syncs, forget the last copy, start new
    progress at ``at`` (with ``new_topic_ids``, forgetting the committed position; without,
    keeping the commit position when past ``at``), then seek ``at`` and on success send
    :class:`RestartSeekDone`."""

    at: int
    new_topic_ids: tuple[bytes, bytes] | None


@dataclass(frozen=True)
class ReportLostRecords:
    """Records deleted by retention before they were copied."""

    count: int
    log_start: int


@dataclass(frozen=True)
class ReportRecreatedTopic:
    log_start: int


@dataclass(frozen=True)
class ReportSkipped:
    """Offsets below a requested floor that will not be copied (``count`` from the position)."""

    count: int
    floor: int


@dataclass(frozen=True)
class ReportStall:
    """The position has not moved for ``stalled_s`` although the log goes on (a hung
    transaction holds read_committed readers back)."""

    position: int
    log_end: int
    stalled_s: float


Action: TypeAlias = (
    PauseConsumer
    | SeekAndResume
    | Rewind
    | RebuildSyncs
    | RestartProgress
    | ReportLostRecords
    | ReportRecreatedTopic
    | ReportSkipped
    | ReportStall
)

Step: TypeAlias = tuple[PartitionState, tuple[Action, ...]]

_DEFAULT_POLICY = PartitionPolicy()


# ---------------------------------------------------------------------------------- step


def step(
    state: PartitionState, event: Event, now: float, policy: PartitionPolicy = _DEFAULT_POLICY
) -> Step:
    """The state after ``event`` at ``now``, and the actions to execute in order."""
    match event:
        case DeliveryFailed(offset, reason):
            return replace(state, failure=_lower_failure(state.failure, offset, reason)), ()
        case SyncsLost(commit_position, reason):
            return _syncs_lost(state, commit_position, reason), ()
        case ProgressPersisted(end):
            # Only a run past the rewind point proves the partition copies again.
            if end > state.resume_from:
                return replace(state, failures_in_a_row=0), ()
            return state, ()
        case NothingInFlight():
            return _nothing_in_flight(state, now, policy)
        case TimerFired():
            if isinstance(state.hold, Held) and now >= state.hold.until:
                return state, (SeekAndResume(state.resume_from),)
            return state, ()
        case Resumed():
            if isinstance(state.hold, Held) and now >= state.hold.until:
                return replace(state, hold=Reading()), ()
            return state, ()
        case RepairDone(rebuilt_pending):
            return _repair_done(state, rebuilt_pending, now, policy)
        case RepairFailed():
            repair = state.repair
            if repair is None or repair.stage is not RepairStage.RUNNING:
                return state, ()
            retry = replace(
                repair, stage=RepairStage.RETRY_WAIT, retry_at=now + policy.repair_retry_s
            )
            return replace(state, repair=retry), ()
        case RebuiltSyncsAcknowledged():
            return _rebuilt_acknowledged(state), ()
        case OperatorPause(next_offset):
            return _operator_pause(state, next_offset)
        case OperatorResume():
            if isinstance(state.hold, OperatorPaused):
                # Due at once: the next cycle seeks, since records fetched while paused were
                # skipped, not copied.
                return replace(state, hold=Held(until=now)), ()
            return state, ()
        case RetentionOvertook(log_start, next_offset):
            if state.restart is not None:
                return state, ()
            lost = ReportLostRecords(max(0, log_start - next_offset), log_start)
            return replace(state, restart=PendingRestart(log_start)), (lost,)
        case TopicRecreated(source_id, target_id, log_start):
            if state.restart is not None and state.restart.new_topic_ids is not None:
                return state, ()
            restart = PendingRestart(log_start, (source_id, target_id))
            return replace(state, restart=restart), (ReportRecreatedTopic(log_start),)
        case SkipRequested(floor, next_offset):
            return _skip_requested(state, floor, next_offset)
        case RestartSeekDone():
            return replace(state, restart=None), ()
        case PositionSeen(position, log_end):
            return _position_seen(state, position, log_end, now, policy)


def _lower_failure(failure: Failure | None, at: int, reason: str) -> Failure:
    """The failure to rewind to: the lowest position that did not make it."""
    if failure is None or at < failure.at:
        return Failure(at, reason)
    return failure


def _syncs_lost(state: PartitionState, commit_position: int, reason: str) -> PartitionState:
    failure = _lower_failure(state.failure, commit_position, reason)
    repair = state.repair
    if repair is None:
        repair = SyncRepair(commit_position, RepairStage.NEEDED)
    else:
        if not repair.lost_pending:
            repair = replace(repair, repair_from=commit_position, lost_pending=True)
        # A repair in progress ends as it ends (it clears the repair whatever was lost
        # meanwhile); a failed one keeps its retry time.
        if repair.stage is RepairStage.AWAITING_ACKS:
            repair = replace(repair, stage=RepairStage.NEEDED)
    return replace(state, failure=failure, repair=repair)


def _nothing_in_flight(state: PartitionState, now: float, policy: PartitionPolicy) -> Step:
    restart = state.restart
    if restart is not None:
        # The new progress replaces the old one, failure included; repeated every cycle
        # until its seek works (RestartSeekDone).
        # A backoff or operator pause still pending resumes at the new start, not at the old
        # resume point (which may lie past a recreated topic's first records).
        restarted = replace(state, failure=None, resume_from=restart.at)
        return restarted, (RestartProgress(restart.at, restart.new_topic_ids),)
    if state.failure is None:
        return state, ()
    repair = state.repair
    if repair is not None and repair.stage in (RepairStage.NEEDED, RepairStage.RETRY_WAIT):
        if now < repair.retry_at:
            return state, ()
        running = replace(repair, stage=RepairStage.RUNNING)
        return replace(state, repair=running), (RebuildSyncs(repair.repair_from),)
    if repair is not None and repair.stage is RepairStage.RUNNING:
        return state, ()
    return _rewind(state, state.failure, now, policy)


def _rewind(state: PartitionState, failure: Failure, now: float, policy: PartitionPolicy) -> Step:
    failures = state.failures_in_a_row + 1
    backoff = policy.backoff_s(failures)
    # Under an operator pause the rewind moves the resume point but never lifts the pause.
    hold: Hold = state.hold if isinstance(state.hold, OperatorPaused) else Held(now + backoff)
    rewound = replace(
        state, hold=hold, resume_from=failure.at, failures_in_a_row=failures, failure=None
    )
    return rewound, (Rewind(failure.at, backoff, failures, failure.reason), PauseConsumer())


def _repair_done(
    state: PartitionState, rebuilt_pending: bool, now: float, policy: PartitionPolicy
) -> Step:
    repair = state.repair
    if repair is None or repair.stage is not RepairStage.RUNNING:
        return state, ()
    after = replace(repair, stage=RepairStage.AWAITING_ACKS) if rebuilt_pending else None
    repaired = replace(state, repair=after)
    if repaired.failure is None:
        return repaired, ()
    return _rewind(repaired, repaired.failure, now, policy)


def _rebuilt_acknowledged(state: PartitionState) -> PartitionState:
    repair = state.repair
    if repair is None:
        return state
    if repair.stage is RepairStage.AWAITING_ACKS:
        return replace(state, repair=None)
    # The acknowledgement of the previous repair's rebuilt syncs marks syncs lost since
    # as replaced too (the sync writer settles every lost ticket then); the repair they need
    # still runs.
    return replace(state, repair=replace(repair, lost_pending=False))


def _skip_requested(state: PartitionState, floor: int, next_offset: int) -> Step:
    restart = state.restart
    if restart is not None:
        # A restart for new topic ids starts another topic: an old floor says nothing of it.
        if restart.new_topic_ids is not None or restart.at >= floor:
            return state, ()
        raised = replace(state, restart=replace(restart, at=floor))
        return raised, (ReportSkipped(floor - restart.at, floor),)
    position = next_offset if isinstance(state.hold, Reading) else state.resume_from
    if position >= floor:
        return state, ()
    # The same restart as after retention: a new run of progress at the floor, sealed and
    # seeked once nothing is in flight; an operator pause holds on over it.
    return replace(state, restart=PendingRestart(floor)), (ReportSkipped(floor - position, floor),)


def _operator_pause(state: PartitionState, next_offset: int) -> Step:
    if isinstance(state.hold, OperatorPaused):
        return state, ()
    # A backoff keeps its resume point (the rewind's); a reading partition resumes where its
    # progress continues.
    resume_from = next_offset if isinstance(state.hold, Reading) else state.resume_from
    return replace(state, hold=OperatorPaused(), resume_from=resume_from), (PauseConsumer(),)


def _position_seen(
    state: PartitionState, position: int, log_end: int, now: float, policy: PartitionPolicy
) -> Step:
    if not isinstance(state.hold, Reading):
        return state, ()  # a held partition is expected not to move
    watch = state.stall
    if position != watch.position:
        return replace(state, stall=StallWatch(position, now)), ()
    stalled_s = now - watch.since
    if watch.reported or stalled_s < policy.stall_warning_s or not log_end > position >= 0:
        return state, ()
    reported = replace(state, stall=replace(watch, reported=True))
    return reported, (ReportStall(position, log_end, stalled_s),)


# ---------------------------------------------------------------------------------- start


@dataclass(frozen=True)
class FlowStart:
    """Where a flow starts partitions without progress."""

    kind: Literal["earliest", "latest", "timestamp"] = "earliest"
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class CommittedProgress:
    """A partition's committed progress: the next source offset to copy, and (at least once)
    the leader epoch committed with it."""

    offset: int
    leader_epoch: int | None = None


@dataclass(frozen=True)
class StartPosition:
    offset: int
    #: the leader epoch to assign with (-1: none), so the consumer checks for a truncated log
    leader_epoch: int
    #: the start is the committed progress itself: a keepalive may repeat the last copy
    resumed: bool
    #: records deleted by retention before they were copied
    lost_to_retention: int


def timestamp_to_look_up(committed: CommittedProgress | None, flow_start: FlowStart) -> int | None:
    """The timestamp whose first offset :func:`start_position` needs, if any."""
    if _has_progress(committed) or flow_start.kind != "timestamp":
        return None
    return flow_start.timestamp_ms


def start_position(
    committed: CommittedProgress | None,
    log_start: int,
    log_end: int,
    flow_start: FlowStart,
    offset_at_timestamp: int | None = None,
    *,
    floor: int | None = None,
) -> StartPosition:
    """Where to start copying a partition: committed progress, clamped to the log start (the
    records below it were lost), else the flow's start; never below ``floor`` (the flow's
    ``skip_below``). ``offset_at_timestamp`` is the answer to :func:`timestamp_to_look_up`
    (None or negative: no record that late, start at the end)."""
    start = _unfloored_start(committed, log_start, log_end, flow_start, offset_at_timestamp)
    if floor is None or start.offset >= floor:
        return start
    return replace(start, offset=floor, leader_epoch=-1, resumed=False)


def _unfloored_start(
    committed: CommittedProgress | None,
    log_start: int,
    log_end: int,
    flow_start: FlowStart,
    offset_at_timestamp: int | None,
) -> StartPosition:
    if committed is not None and _has_progress(committed):
        if committed.offset < log_start:
            return StartPosition(log_start, -1, False, log_start - committed.offset)
        epoch = committed.leader_epoch
        return StartPosition(committed.offset, -1 if epoch is None or epoch < 0 else epoch, True, 0)
    if flow_start.kind == "latest":
        return StartPosition(log_end, -1, False, 0)
    if flow_start.kind == "timestamp" and flow_start.timestamp_ms is not None:
        found = offset_at_timestamp
        return StartPosition(found if found is not None and found >= 0 else log_end, -1, False, 0)
    return StartPosition(log_start, -1, False, 0)


def _has_progress(committed: CommittedProgress | None) -> bool:
    # Kafka reports "no committed offset" as a negative offset (OFFSET_INVALID).
    return committed is not None and committed.offset >= 0
