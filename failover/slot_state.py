"""The lifecycle of one exactly-once slot as a pure state machine: when a worker takes the slot,
opens, commits or drops its transaction, gives the slot up, and when it takes it again, decided
without I/O.

The exactly-once mode (``drsvc/runtime/replication/exactly_once.py``) drives it: the transitions,
the retake delays (:class:`~failover.slots.RetakeDelays`) and the failure classification
(:func:`~failover.slots.classify_failure`) are decided here only. The machine never writes a lane
(it *tells* the engine to stop copying with :class:`HaltLanes`; the engine is the one writer of a
lane's ``copying``), and no event ever raises (an event that means nothing in a state changes
nothing, and an answer the machine did not ask for is named in a :class:`Refused` action).

How the mode drives it
======================

Keep one :class:`SlotState` per slot number for as long as the mode runs (``SlotState()`` for
every slot: not owned), across revocations, so the failures in a row survive them. Feed every
event through ``step(state, event, now, policy)`` and execute
the returned actions in order; ``now`` is the monotonic clock in seconds. Actions with I/O answer
with an event, sent at once (the mode is synchronous): :class:`TakeSlot` with :class:`Taken` or
:class:`TakeFailed`; :class:`BeginTransaction` with :class:`TransactionBegun` or
:class:`BeginFailed`; :class:`Commit` with :class:`Committed` or :class:`CommitFailed` (and
:class:`TransactionBegun` first when it had to begin a transaction itself); :class:`AskOwner` with
:class:`OwnerAnswered`. Events from a producer or lanes of an earlier incarnation of the slot (a
late delivery report of a dropped producer) must not reach the state of the current one: the mode
routes by incarnation: each taking of a slot is its own object, and a report of an earlier one is
dropped.

The transitions
===============

1. Assigned -> :class:`Assigned`: a slot not owned waits to be taken now (:class:`Waiting`); a
   slot already owned keeps what it has (a retake already scheduled keeps its time).
2. Retake due -> :class:`RetakeCheck`: a waiting slot whose time has come is taken
   (:class:`TakeSlot`: initialise its transactions, which fences the previous owner, then read its
   committed progress). :class:`Taken` starts its lanes (:class:`ResumeLanes`); :class:`TakeFailed`
   counts a failure in a row and waits the ``FAILED`` backoff (:class:`ScheduleRetake`).
3. Copying -> :class:`ProducerWanted`: a taken slot without an open transaction begins one
   (:class:`BeginTransaction`); :class:`TransactionBegun` opens it at ``now``; :class:`BeginFailed`
   drops the slot (7). :class:`Copied` counts the records the transaction holds.
4. A delivery failed, a record was refused, the producer reported a fatal error ->
   :class:`DeliveryFailed`: the transaction can no longer commit; the first failure is kept
   (:class:`Failed`) and the lanes stop copying (:class:`HaltLanes`). Nothing more is copied into
   it, and it is never committed: the next commit check drops the slot (7).
5. Commit due -> :class:`CommitCheck`: an open transaction commits once it is
   ``transaction_interval_s`` old or holds ``transaction_max_records`` records (:class:`Commit`,
   then :class:`Committing`); a failed slot is dropped (7). :class:`IdleCommitDue` (positions
   moved without records, a progress refresh or keepalive due, as the mode finds) commits a slot
   without an open transaction. :class:`Committed` resets the failures in a row; a failure that
   arrived while committing (4) is kept, and drops the slot at the next check.
6. Take again -> :class:`TakeAgain` (a ``skip_below`` floor, a topic gone or recreated): commit
   (beginning a transaction if none is open), give the slot up and take it again at once.
7. Drop: a commit failed (:class:`CommitFailed`), a begin failed, a failed slot's commit check, a
   position deleted by retention (:class:`PositionDeleted`, at once). The failure is classified by
   :func:`~failover.slots.classify_failure` from its error's fencing, the open transaction's age
   and, only when fenced, at least ``transaction_timeout_s`` old and still owned, the membership
   group's answer (:class:`AskOwner` -> :class:`OwnerAnswered`, state :class:`Dropping`). The lanes
   stop (:class:`HaltLanes`), the producer is let go (:class:`Release`, aborting the transaction
   when its error is neither absent nor fatal), a slot still owned counts a failure in a row and
   waits its backoff (:class:`ScheduleRetake`), and the failure is reported
   (:class:`ReportFailure`).
8. Revoked -> :class:`Revoked`: a taken slot commits its open transaction first (a failed one is
   dropped, 7, without asking the group or scheduling a retake), then is let go; no retake.
9. Lost -> :class:`Lost`: another worker may hold the slot already: let it go without committing.
10. Shut down -> :class:`ShuttingDown`: as a revocation, the slot still counting as owned.

After a revocation or a loss nothing is begun, committed or taken until the next
:class:`Assigned` (a commit already running finishes; its result only lets the slot go).

Every pair of state and event not named above changes nothing. Most are no-ops by nature (a
commit check with nothing due, a late report of a producer already let go, a revocation of a slot
not owned). Two kinds are refused with a :class:`Refused` action, which the mode logs: an answer
in a state that did not ask for it (:class:`Taken`, :class:`TakeFailed`,
:class:`TransactionBegun`, :class:`BeginFailed`, :class:`Committed`, :class:`CommitFailed`,
:class:`OwnerAnswered`), and :class:`Copied` with no open transaction to count into (the hot path
copies only into the producer :func:`producer_ready` allowed). A synchronous driver never sees
either. The predicates :func:`owned`, :func:`copies` (the value of the slot's lanes' ``copying``
as far as the slot decides) and :func:`producer_ready` read a state.

Behaviours kept that look questionable, for a later decision:

* The failures in a row survive revocation and reassignment (only a commit resets them), and
  take failures count with transaction failures of every kind: a slot that failed often before it
  was revoked waits long after its first failure once it is back, and a coordinator timeout after
  ordinary failures waits more than ``timed_out_retry_s``.
* A position deleted by retention drops the slot with no error of its own: it is classified
  ``FAILED`` (short backoff) even when the slot had already failed fenced, so a slot taken over
  could be taken again after half a second.
* A failed slot that is revoked or shut down is reported as a failed transaction (and, shut down,
  may still ask the group and schedule a retake).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TypeAlias

from failover.slots import RetakeDelays, SlotFailure, classify_failure

__all__ = [
    "Active",
    "AfterCommit",
    "AskOwner",
    "Assigned",
    "BeginFailed",
    "BeginTransaction",
    "Commit",
    "CommitCheck",
    "CommitFailed",
    "Committed",
    "Committing",
    "Copied",
    "DeliveryFailed",
    "Dropping",
    "Event",
    "Failed",
    "HaltLanes",
    "IdleCommitDue",
    "Lost",
    "OpenTransaction",
    "OwnerAnswered",
    "PositionDeleted",
    "Positions",
    "ProducerWanted",
    "Refused",
    "Release",
    "ReportFailure",
    "ResumeLanes",
    "RetakeCheck",
    "Revoked",
    "ScheduleRetake",
    "ShuttingDown",
    "SlotAction",
    "SlotError",
    "SlotPolicy",
    "SlotState",
    "Stage",
    "TakeAgain",
    "TakeFailed",
    "TakeSlot",
    "Taken",
    "Taking",
    "TransactionBegun",
    "TransactionFailure",
    "Unowned",
    "Waiting",
    "copies",
    "owned",
    "producer_ready",
    "step",
]


@dataclass(frozen=True)
class SlotPolicy:
    """The timings of a slot's lifecycle (from ``WorkerSettings``)."""

    #: commit an open transaction once it is this old
    transaction_interval_s: float = 0.2
    #: ... or once it holds this many records
    transaction_max_records: int = 50_000
    #: ``transaction_timeout_ms`` / 1000: only a transaction open this long can have been timed
    #: out by the coordinator
    transaction_timeout_s: float = 20.0
    #: when to take the slot again after a failure
    retake: RetakeDelays = field(default_factory=RetakeDelays)


# ---------------------------------------------------------------------------------- the state


@dataclass(frozen=True)
class SlotError:
    """What the machine needs to know of a Kafka error (the mode reads it from the client's)."""

    #: a fenced producer's error (``_FENCED``, ``PRODUCER_FENCED``, ``INVALID_PRODUCER_EPOCH``):
    #: a takeover or a coordinator-side timeout, see :func:`~failover.slots.classify_failure`
    fenced: bool
    #: the producer is unusable: aborting its transaction is pointless
    fatal: bool


@dataclass(frozen=True)
class TransactionFailure:
    """Why the open transaction can no longer commit (the first reason is kept)."""

    reason: str
    error: SlotError | None = None


@dataclass(frozen=True)
class OpenTransaction:
    """The slot's open transaction: since when, and how many records it holds."""

    opened_at: float
    records: int = 0


class AfterCommit(Enum):
    """What happens to the slot once the commit under way succeeds."""

    #: keep copying
    CONTINUE = "continue"
    #: let the slot go (revoked, shutting down)
    RELEASE = "release"
    #: let the slot go and take it again at once (a skip_below floor, topics changed)
    RETAKE = "retake"


@dataclass(frozen=True)
class Unowned:
    """The group does not assign the slot to this worker (or the worker let it go at shutdown):
    no producer, no lanes, nothing scheduled."""


@dataclass(frozen=True)
class Waiting:
    """Owned, not taken: take it at ``at``; ``after`` says which failure it waits out (None: it
    was just assigned, or given up to be taken again)."""

    at: float
    after: SlotFailure | None = None


@dataclass(frozen=True)
class Taking:
    """:class:`TakeSlot` was asked for; waiting for :class:`Taken` or :class:`TakeFailed`.
    ``owned`` turns False when the slot is revoked or lost meanwhile."""

    owned: bool = True


@dataclass(frozen=True)
class Active:
    """Taken: the slot's producer and lanes copy; ``transaction`` is the open one, if any."""

    transaction: OpenTransaction | None = None


@dataclass(frozen=True)
class Failed:
    """Taken, but its transaction cannot commit: the lanes are halted, nothing more is copied
    into it, and the next commit check drops the slot."""

    transaction: OpenTransaction | None
    failure: TransactionFailure


@dataclass(frozen=True)
class Committing:
    """:class:`Commit` was asked for; waiting for :class:`Committed` or :class:`CommitFailed`."""

    transaction: OpenTransaction | None
    then: AfterCommit
    #: False once revoked or lost (or when the commit gives the revoked slot up)
    owned: bool = True
    #: a failure reported while the commit ran (its flush serves delivery reports)
    failure: TransactionFailure | None = None


@dataclass(frozen=True)
class Dropping:
    """A fenced transaction old enough to have been timed out by the coordinator is dropped:
    :class:`AskOwner` was asked for, waiting for :class:`OwnerAnswered`. The lanes are halted."""

    transaction: OpenTransaction
    reason: str
    error: SlotError
    #: the transaction's age when it failed: what the classification weighs
    age_s: float
    owned: bool = True


Stage: TypeAlias = Unowned | Waiting | Taking | Active | Failed | Committing | Dropping


@dataclass(frozen=True)
class SlotState:
    """Everything that decides what happens to one slot next (see the module docstring). A slot
    not owned yet: ``SlotState()``."""

    stage: Stage = Unowned()
    #: failures in a row since the last commit (the retake backoff grows with it)
    failures_in_a_row: int = 0


def owned(state: SlotState) -> bool:
    """Does this worker own the slot, as far as the machine knows?"""
    stage = state.stage
    match stage:
        case Unowned():
            return False
        case Taking() | Committing() | Dropping():
            return stage.owned
        case _:
            return True


def copies(state: SlotState) -> bool:
    """May the slot's lanes copy? (taken and not failed; a commit under way does not halt them.)"""
    stage = state.stage
    return isinstance(stage, Active) or (isinstance(stage, Committing) and stage.failure is None)


def producer_ready(state: SlotState) -> bool:
    """Is the slot's producer in an open transaction that copies may go into?"""
    stage = state.stage
    return isinstance(stage, Active) and stage.transaction is not None


# ---------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Assigned:
    """The membership group assigned the slot to this worker."""


@dataclass(frozen=True)
class Revoked:
    """The membership group takes the slot back (an orderly rebalance)."""


@dataclass(frozen=True)
class Lost:
    """The slot was lost (session timeout): another worker may hold it already."""


@dataclass(frozen=True)
class RetakeCheck:
    """The loop looks at waiting slots: a retake due at or before ``now`` is taken."""


@dataclass(frozen=True)
class Taken:
    """The answer to :class:`TakeSlot`: transactions initialised, progress read, lanes made."""


@dataclass(frozen=True)
class TakeFailed:
    """The answer to :class:`TakeSlot`: initialising or reading the progress failed (the take
    let its producer go)."""

    reason: str


@dataclass(frozen=True)
class ProducerWanted:
    """The hot path is about to copy records of the slot's lanes."""


@dataclass(frozen=True)
class TransactionBegun:
    """A transaction was begun: the answer to :class:`BeginTransaction`, or reported by a
    :class:`Commit` that had to begin one."""


@dataclass(frozen=True)
class BeginFailed:
    """The answer to :class:`BeginTransaction`: it failed."""

    reason: str
    error: SlotError | None


@dataclass(frozen=True)
class Copied:
    """The hot path copied ``records`` records into the open transaction."""

    records: int


@dataclass(frozen=True)
class DeliveryFailed:
    """The open transaction cannot commit: a delivery failed, a record was refused, serving
    delivery reports raised, a report could not be placed, or the producer reported a fatal
    error (``error``: the Kafka error behind it, when there is one)."""

    reason: str
    error: SlotError | None = None


@dataclass(frozen=True)
class PositionDeleted:
    """The next record of one of the slot's partitions was deleted by retention: take the slot
    again (the take reports the loss and continues from the log start)."""

    reason: str


@dataclass(frozen=True)
class CommitCheck:
    """The loop looks at open transactions: commit the ones due, drop the failed ones."""


#: next source offset per partition, ``(topic, partition, offset)``
Positions: TypeAlias = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class IdleCommitDue:
    """The mode found that an idle slot (no open transaction) has something to commit: positions
    moved without records, a progress refresh or a keepalive due; ``positions`` as it read them."""

    positions: Positions


@dataclass(frozen=True)
class TakeAgain:
    """Commit what was copied, give the slot up and take it again at once (a ``skip_below``
    floor, a topic of the slot gone or recreated)."""


@dataclass(frozen=True)
class Committed:
    """The answer to :class:`Commit`: committed."""


@dataclass(frozen=True)
class CommitFailed:
    """The answer to :class:`Commit`: it failed. ``error`` None: the failure has no Kafka error of
    its own (records left unacknowledged, a failure reported during the commit, a client that
    raised without a cause), so the transaction's recorded failure's error, if any, stands for
    it."""

    reason: str
    error: SlotError | None


@dataclass(frozen=True)
class OwnerAnswered:
    """The answer to :class:`AskOwner`: does the group's coordinator assign the slot to this
    worker? (None: it cannot say.)"""

    still_assigned: bool | None


@dataclass(frozen=True)
class ShuttingDown:
    """The worker stops: commit and let go, as when revoked."""


Event: TypeAlias = (
    Assigned
    | Revoked
    | Lost
    | RetakeCheck
    | Taken
    | TakeFailed
    | ProducerWanted
    | TransactionBegun
    | BeginFailed
    | Copied
    | DeliveryFailed
    | PositionDeleted
    | CommitCheck
    | IdleCommitDue
    | TakeAgain
    | Committed
    | CommitFailed
    | OwnerAnswered
    | ShuttingDown
)


# ---------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class TakeSlot:
    """Make the slot's producer, initialise its transactions (fencing whoever held the slot and
    aborting its open transaction), read the committed progress into new lanes; answer
    :class:`Taken` or :class:`TakeFailed`."""


@dataclass(frozen=True)
class ResumeLanes:
    """Add the new lanes to the engine, assign their partitions at their progress, resume them
    and follow flow control: they copy from now on."""


@dataclass(frozen=True)
class BeginTransaction:
    """Begin a transaction on the slot's producer; answer :class:`TransactionBegun` or
    :class:`BeginFailed`."""


@dataclass(frozen=True)
class Commit:
    """Commit the slot's transaction, beginning one first when none is open (then report
    :class:`TransactionBegun`): flush, write the syncs and the progress of the lanes at
    ``positions`` (None: their positions read now), commit; answer :class:`Committed` or
    :class:`CommitFailed`. ``records``: how many records the transaction holds."""

    positions: Positions | None
    records: int


@dataclass(frozen=True)
class HaltLanes:
    """Stop copying the slot's lanes (records read meanwhile are skipped, not copied): the
    engine, the one writer of a lane's ``copying``, does it."""


@dataclass(frozen=True)
class AskOwner:
    """Ask the membership group's coordinator (not this worker's own, possibly stale view)
    whether it assigns the slot to this worker; answer :class:`OwnerAnswered`."""


@dataclass(frozen=True)
class Release:
    """Let the slot's producer and lanes go: drop the lanes from the engine and the consumer,
    purge the producer, abort its transaction first when ``abort_transaction`` (best effort: the
    next owner's initialisation aborts it anyway), discard it."""

    abort_transaction: bool


@dataclass(frozen=True)
class ScheduleRetake:
    """The slot is taken again at ``at`` (the state holds it; :class:`RetakeCheck` finds it)."""

    at: float
    after: SlotFailure | None


@dataclass(frozen=True)
class ReportFailure:
    """A transaction failed and the slot was dropped: count it and log it by ``kind`` (a
    takeover, a coordinator timeout, another failure). ``transaction_open_s``: how long the
    transaction was open (None: none was); ``retake_in_s``: the wait before it is taken again
    (0.0 when it is no longer owned)."""

    kind: SlotFailure
    reason: str
    transaction_open_s: float | None
    retake_in_s: float


@dataclass(frozen=True)
class Refused:
    """An answer the machine did not ask for (or copies into no open transaction): nothing
    changed. The driver has a bug; it logs this instead of acting."""

    event: str
    stage: str


SlotAction: TypeAlias = (
    TakeSlot
    | ResumeLanes
    | BeginTransaction
    | Commit
    | HaltLanes
    | AskOwner
    | Release
    | ScheduleRetake
    | ReportFailure
    | Refused
)

Step: TypeAlias = tuple[SlotState, tuple[SlotAction, ...]]

_DEFAULT_POLICY = SlotPolicy()
_NOTHING: tuple[SlotAction, ...] = ()


# ---------------------------------------------------------------------------------- step


def step(state: SlotState, event: Event, now: float, policy: SlotPolicy = _DEFAULT_POLICY) -> Step:
    """The state after ``event`` at ``now``, and the actions to execute in order."""
    stage = state.stage
    match event:
        case Assigned():
            return _assigned(state, now)
        case Revoked():
            return _given_back(state, commit=True, now=now, policy=policy)
        case Lost():
            # Someone else may hold the slot already: never commit for it again.
            return _given_back(state, commit=False, now=now, policy=policy)
        case RetakeCheck():
            if isinstance(stage, Waiting) and now >= stage.at:
                return replace(state, stage=Taking()), (TakeSlot(),)
            return state, _NOTHING
        case Taken():
            if not isinstance(stage, Taking):
                return _refused(state, event)
            if not stage.owned:
                # Revoked or lost while it was being taken: let it go at once, never copy.
                return replace(state, stage=Unowned()), (Release(abort_transaction=False),)
            return replace(state, stage=Active()), (ResumeLanes(),)
        case TakeFailed():
            if not isinstance(stage, Taking):
                return _refused(state, event)
            if not stage.owned:
                return replace(state, stage=Unowned()), _NOTHING
            # A take is retried like any other failure (counted in the same row).
            return _schedule_retake(state, SlotFailure.FAILED, now, policy)
        case ProducerWanted():
            if isinstance(stage, Active) and stage.transaction is None:
                return state, (BeginTransaction(),)
            # Open already, or no producer that copies may go into (the mode copies nothing).
            return state, _NOTHING
        case TransactionBegun():
            opened = OpenTransaction(opened_at=now)
            if isinstance(stage, Active) and stage.transaction is None:
                return replace(state, stage=Active(opened)), _NOTHING
            if isinstance(stage, Committing) and stage.transaction is None:
                return replace(state, stage=replace(stage, transaction=opened)), _NOTHING
            return _refused(state, event)
        case BeginFailed(reason, error):
            if isinstance(stage, Active) and stage.transaction is None:
                return _drop(
                    state, None, reason, error, owned=True, halted=False, now=now, policy=policy
                )
            return _refused(state, event)
        case Copied(records):
            return _copied(state, records, event)
        case DeliveryFailed(reason, error):
            return _delivery_failed(state, TransactionFailure(reason, error))
        case PositionDeleted(reason):
            # At once, not at the next commit check, and with no error of its own (so a
            # failure recorded before does not classify it).
            if isinstance(stage, Active | Failed):
                halted = isinstance(stage, Failed)
                return _drop(
                    state,
                    stage.transaction,
                    reason,
                    None,
                    owned=True,
                    halted=halted,
                    now=now,
                    policy=policy,
                )
            return state, _NOTHING
        case CommitCheck():
            if isinstance(stage, Failed):
                return _drop_failed(state, stage, owned=True, now=now, policy=policy)
            if isinstance(stage, Active) and stage.transaction is not None:
                txn = stage.transaction
                if (
                    now - txn.opened_at >= policy.transaction_interval_s
                    or txn.records >= policy.transaction_max_records
                ):
                    return _commit(state, txn, AfterCommit.CONTINUE, owned=True)
            return state, _NOTHING
        case IdleCommitDue(positions):
            if isinstance(stage, Active) and stage.transaction is None:
                return _commit(state, None, AfterCommit.CONTINUE, owned=True, positions=positions)
            return state, _NOTHING
        case TakeAgain():
            if isinstance(stage, Active):
                return _commit(state, stage.transaction, AfterCommit.RETAKE, owned=True)
            if isinstance(stage, Failed):
                return _drop_failed(state, stage, owned=True, now=now, policy=policy)
            return state, _NOTHING
        case Committed():
            if not isinstance(stage, Committing):
                return _refused(state, event)
            return _committed(state, stage, now)
        case CommitFailed(reason, error):
            if not isinstance(stage, Committing):
                return _refused(state, event)
            recorded = stage.failure.error if stage.failure is not None else None
            return _drop(
                state,
                stage.transaction,
                reason,
                error if error is not None else recorded,
                owned=stage.owned,
                halted=stage.failure is not None,
                now=now,
                policy=policy,
            )
        case OwnerAnswered(still_assigned):
            if not isinstance(stage, Dropping):
                return _refused(state, event)
            return _finish_drop(
                state,
                stage.transaction,
                stage.reason,
                stage.error,
                stage.age_s,
                owned=stage.owned,
                still_assigned=still_assigned,
                now=now,
                policy=policy,
            )
        case ShuttingDown():
            return _shutting_down(state, now, policy)


def _refused(state: SlotState, event: Event) -> Step:
    return state, (Refused(type(event).__name__, type(state.stage).__name__),)


def _assigned(state: SlotState, now: float) -> Step:
    stage = state.stage
    match stage:
        case Unowned():
            # Taken at the next retake check; the failures in a row are not forgotten.
            return replace(state, stage=Waiting(now)), (ScheduleRetake(now, None),)
        case Taking(owned=False) | Dropping(owned=False):
            return replace(state, stage=replace(stage, owned=True)), _NOTHING
        case Committing(owned=False):
            # Given back while its revocation commit ran: take it again once committed.
            return replace(
                state, stage=replace(stage, owned=True, then=AfterCommit.RETAKE)
            ), _NOTHING
        case _:
            # Owned already: a waiting slot keeps its time (a takeover's wait included).
            return state, _NOTHING


def _given_back(state: SlotState, *, commit: bool, now: float, policy: SlotPolicy) -> Step:
    """Revoked (``commit``) or lost: the slot is no longer this worker's."""
    stage = state.stage
    match stage:
        case Unowned():
            return state, _NOTHING
        case Waiting():
            return replace(state, stage=Unowned()), _NOTHING
        case Taking() | Dropping():
            # The answer under way decides; it schedules nothing for a slot not owned.
            return replace(state, stage=replace(stage, owned=False)), _NOTHING
        case Committing():
            # The commit under way finishes (it cannot be called back); then the slot goes.
            given_back = replace(stage, owned=False, then=AfterCommit.RELEASE)
            return replace(state, stage=given_back), _NOTHING
        case Active() | Failed():
            return _let_go(state, stage, commit=commit, owned=False, now=now, policy=policy)


def _shutting_down(state: SlotState, now: float, policy: SlotPolicy) -> Step:
    stage = state.stage
    match stage:
        case Active() | Failed():
            # Still owned: a failure is classified and scheduled as while running.
            return _let_go(state, stage, commit=True, owned=True, now=now, policy=policy)
        case Committing():
            return replace(state, stage=replace(stage, then=AfterCommit.RELEASE)), _NOTHING
        case _:
            # Nothing taken to let go (a take or a drop under way ends as it would).
            return state, _NOTHING


def _let_go(
    state: SlotState,
    stage: Active | Failed,
    *,
    commit: bool,
    owned: bool,
    now: float,
    policy: SlotPolicy,
) -> Step:
    """Give a taken slot up: commit its open transaction first when ``commit`` (a failed one is
    dropped instead), else abandon it (the next owner's initialisation aborts it)."""
    if isinstance(stage, Failed):
        if commit:
            return _drop_failed(state, stage, owned=owned, now=now, policy=policy)
        return replace(state, stage=Unowned()), (Release(abort_transaction=False),)
    if commit and stage.transaction is not None:
        return _commit(state, stage.transaction, AfterCommit.RELEASE, owned=owned)
    # No open transaction has nothing to commit (a revoked idle slot writes no progress).
    return replace(state, stage=Unowned()), (HaltLanes(), Release(abort_transaction=False))


def _copied(state: SlotState, records: int, event: Copied) -> Step:
    stage = state.stage
    match stage:
        case (
            Active(transaction=OpenTransaction() as txn)
            | Failed(transaction=OpenTransaction() as txn)
        ):
            counted = replace(txn, records=txn.records + records)
            return replace(state, stage=replace(stage, transaction=counted)), _NOTHING
        case Unowned() | Waiting() | Taking():
            # Credited after the slot was dropped mid-batch: those copies die with it.
            return state, _NOTHING
        case _:
            # Copies go only into an open transaction, and never while a commit or drop runs.
            return _refused(state, event)


def _delivery_failed(state: SlotState, failure: TransactionFailure) -> Step:
    stage = state.stage
    match stage:
        case Active():
            return replace(state, stage=Failed(stage.transaction, failure)), (HaltLanes(),)
        case Committing(failure=None):
            # Its flush serves delivery reports: the commit must not go through.
            return replace(state, stage=replace(stage, failure=failure)), (HaltLanes(),)
        case _:
            # Failed already (the first reason is kept), or a report of a producer already let
            # go, or of none yet.
            return state, _NOTHING


def _commit(
    state: SlotState,
    transaction: OpenTransaction | None,
    then: AfterCommit,
    *,
    owned: bool,
    positions: Positions | None = None,
) -> Step:
    records = transaction.records if transaction is not None else 0
    committing = Committing(transaction, then, owned)
    return replace(state, stage=committing), (Commit(positions, records),)


def _committed(state: SlotState, stage: Committing, now: float) -> Step:
    # A commit resets the retake backoff, whatever comes next.
    done = replace(state, failures_in_a_row=0)
    if stage.then is AfterCommit.CONTINUE:
        if stage.failure is not None:
            # Failed after its last check: kept, and dropped at the next commit check.
            return replace(done, stage=Failed(None, stage.failure)), _NOTHING
        return replace(done, stage=Active()), _NOTHING
    halt: tuple[SlotAction, ...] = (HaltLanes(),) if stage.failure is None else _NOTHING
    release = Release(abort_transaction=False)
    if stage.then is AfterCommit.RETAKE and stage.owned:
        return replace(done, stage=Waiting(now)), (*halt, release, ScheduleRetake(now, None))
    return replace(done, stage=Unowned()), (*halt, release)


def _drop_failed(
    state: SlotState, stage: Failed, *, owned: bool, now: float, policy: SlotPolicy
) -> Step:
    """A failed transaction never commits: its commit is the drop, for its recorded reason."""
    failure = stage.failure
    return _drop(
        state,
        stage.transaction,
        failure.reason,
        failure.error,
        owned=owned,
        halted=True,
        now=now,
        policy=policy,
    )


def _drop(
    state: SlotState,
    transaction: OpenTransaction | None,
    reason: str,
    error: SlotError | None,
    *,
    owned: bool,
    halted: bool,
    now: float,
    policy: SlotPolicy,
) -> Step:
    """Drop the slot's producer; a slot still owned is taken again after its backoff."""
    halt: tuple[SlotAction, ...] = _NOTHING if halted else (HaltLanes(),)
    age = now - transaction.opened_at if transaction is not None else None
    if (
        error is not None
        and error.fenced
        and transaction is not None
        and age is not None
        and age >= policy.transaction_timeout_s
        and owned
    ):
        # Only then can the group's answer matter (a takeover or a timeout), and only a slot
        # still owned is worth asking about.
        dropping = Dropping(transaction, reason, error, age, owned)
        return replace(state, stage=dropping), (*halt, AskOwner())
    dropped, actions = _finish_drop(
        state,
        transaction,
        reason,
        error,
        age,
        owned=owned,
        still_assigned=None,
        now=now,
        policy=policy,
    )
    return dropped, (*halt, *actions)


def _finish_drop(
    state: SlotState,
    transaction: OpenTransaction | None,
    reason: str,
    error: SlotError | None,
    age_s: float | None,
    *,
    owned: bool,
    still_assigned: bool | None,
    now: float,
    policy: SlotPolicy,
) -> Step:
    kind = classify_failure(
        fenced=error is not None and error.fenced,
        transaction_age_s=age_s,
        transaction_timeout_s=policy.transaction_timeout_s,
        still_assigned=still_assigned,
    )
    # An abort only helps a producer that is still usable, and only with a transaction open.
    release = Release(
        abort_transaction=transaction is not None and error is not None and not error.fatal
    )
    open_s = now - transaction.opened_at if transaction is not None else None
    if not owned:
        return replace(state, stage=Unowned()), (release, ReportFailure(kind, reason, open_s, 0.0))
    waiting, at = _retake_later(state, kind, now, policy)
    report = ReportFailure(kind, reason, open_s, at - now)
    return waiting, (release, ScheduleRetake(at, kind), report)


def _schedule_retake(state: SlotState, kind: SlotFailure, now: float, policy: SlotPolicy) -> Step:
    waiting, at = _retake_later(state, kind, now, policy)
    return waiting, (ScheduleRetake(at, kind),)


def _retake_later(
    state: SlotState, kind: SlotFailure, now: float, policy: SlotPolicy
) -> tuple[SlotState, float]:
    """One more failure in a row: wait its backoff (:class:`~failover.slots.RetakeDelays`)."""
    failures = state.failures_in_a_row + 1
    at = now + policy.retake.delay_s(kind, failures)
    return SlotState(Waiting(at, kind), failures), at
