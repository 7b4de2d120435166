"""The exactly-once slot's lifecycle as a pure machine: every state against every event
(table-driven), today's failure scenarios on a fake clock, and properties over random runs of a
synchronous driver (the way the exactly-once mode drives it)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fake_kafka import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.slot_state import (
    Active,
    AfterCommit,
    AskOwner,
    Assigned,
    BeginFailed,
    BeginTransaction,
    Commit,
    CommitCheck,
    CommitFailed,
    Committed,
    Committing,
    Copied,
    DeliveryFailed,
    Dropping,
    Event,
    Failed,
    HaltLanes,
    IdleCommitDue,
    Lost,
    OpenTransaction,
    OwnerAnswered,
    PositionDeleted,
    ProducerWanted,
    Refused,
    Release,
    ReportFailure,
    ResumeLanes,
    RetakeCheck,
    Revoked,
    ScheduleRetake,
    ShuttingDown,
    SlotAction,
    SlotError,
    SlotPolicy,
    SlotState,
    TakeAgain,
    TakeFailed,
    Taken,
    TakeSlot,
    Taking,
    TransactionBegun,
    TransactionFailure,
    Unowned,
    Waiting,
    copies,
    owned,
    producer_ready,
    step,
)
from failover.slots import RetakeDelays, SlotFailure

DELAYS = RetakeDelays(
    taken_over_s=15.0, timeout_first_s=0.1, timeout_max_s=5.0, failed_first_s=0.5, failed_max_s=30.0
)


class ReferenceBackoff:
    """The retake bookkeeping the machine must agree with, kept the plain way: a count of
    failures in a row per slot, reset by a commit, and each kind's delay written out."""

    def __init__(self, delays: RetakeDelays) -> None:
        self.delays = delays
        self.in_a_row: dict[int, int] = {}

    def failed(self, slot: int, kind: SlotFailure, now: float) -> float:
        count = self.in_a_row.get(slot, 0) + 1
        self.in_a_row[slot] = count
        d = self.delays
        if kind is SlotFailure.TAKEN_OVER:
            return now + d.taken_over_s
        first, most = (
            (d.timeout_first_s, d.timeout_max_s)
            if kind is SlotFailure.TRANSACTION_TIMED_OUT
            else (d.failed_first_s, d.failed_max_s)
        )
        return now + min(most, first * 2 ** min(count - 1, 16))

    def succeeded(self, slot: int) -> None:
        self.in_a_row.pop(slot, None)

    def failures_in_a_row(self, slot: int) -> int:
        return self.in_a_row.get(slot, 0)


POLICY = SlotPolicy(
    transaction_interval_s=0.2,
    transaction_max_records=10,
    transaction_timeout_s=20.0,
    retake=DELAYS,
)
NOW = 100.0

#: errors as the mode reads them from Kafka's: a fatal fence (_FENCED), a fence seen in a delivery
#: report (INVALID_PRODUCER_EPOCH, not fatal), an ordinary error
FENCED = SlotError(fenced=True, fatal=True)
EPOCH = SlotError(fenced=True, fatal=False)
PLAIN = SlotError(fenced=False, fatal=False)

POSITIONS = (("orders", 0, 42),)
OPEN = OpenTransaction(opened_at=99.9, records=3)
OPEN_LONG = OpenTransaction(opened_at=99.5, records=3)
REFUSED = TransactionFailure("refused", PLAIN)

# ------------------------------------------------------------------------ the transition table

STATES: dict[str, SlotState] = {
    "unowned": SlotState(),
    "waiting": SlotState(Waiting(105.0, SlotFailure.FAILED), 1),
    "taking": SlotState(Taking()),
    "taking, given back": SlotState(Taking(owned=False)),
    "idle": SlotState(Active()),
    "open": SlotState(Active(OPEN), 2),
    "failed": SlotState(Failed(OPEN, REFUSED), 2),
    "committing": SlotState(Committing(OPEN_LONG, AfterCommit.CONTINUE), 2),
    "committing, failed": SlotState(
        Committing(OPEN_LONG, AfterCommit.CONTINUE, failure=TransactionFailure("epoch", EPOCH)), 2
    ),
    "committing, given back": SlotState(Committing(OPEN_LONG, AfterCommit.RELEASE, owned=False), 2),
    "dropping": SlotState(Dropping(OpenTransaction(70.0, 3), "fenced", FENCED, 30.0), 2),
}

EVENTS: dict[str, Event] = {
    "Assigned": Assigned(),
    "Revoked": Revoked(),
    "Lost": Lost(),
    "RetakeCheck": RetakeCheck(),
    "Taken": Taken(),
    "TakeFailed": TakeFailed("down"),
    "ProducerWanted": ProducerWanted(),
    "TransactionBegun": TransactionBegun(),
    "BeginFailed": BeginFailed("begin", PLAIN),
    "Copied": Copied(4),
    "DeliveryFailed": DeliveryFailed("refused", PLAIN),
    "PositionDeleted": PositionDeleted("deleted"),
    "CommitCheck": CommitCheck(),
    "IdleCommitDue": IdleCommitDue(POSITIONS),
    "TakeAgain": TakeAgain(),
    "Committed": Committed(),
    "CommitFailed": CommitFailed("commit", PLAIN),
    "OwnerAnswered": OwnerAnswered(True),
    "ShuttingDown": ShuttingDown(),
}

#: answers to actions: the machine refuses the ones it did not ask for
ANSWERS = {
    "Taken",
    "TakeFailed",
    "TransactionBegun",
    "BeginFailed",
    "Committed",
    "CommitFailed",
    "OwnerAnswered",
}

Outcome = tuple[SlotState, tuple[SlotAction, ...]]


def refused(state: str, event: str) -> Outcome:
    return STATES[state], (Refused(event, type(STATES[state].stage).__name__),)


def retake_failed(
    failures: int, reason: str, open_s: float | None, *, abort: bool, halt: bool = True
) -> Outcome:
    """A drop classified FAILED, the slot still owned: its ``failures``-th failure in a row."""
    at = NOW + DELAYS.delay_s(SlotFailure.FAILED, failures)
    actions: tuple[SlotAction, ...] = (
        *((HaltLanes(),) if halt else ()),
        Release(abort_transaction=abort),
        ScheduleRetake(at, SlotFailure.FAILED),
        ReportFailure(SlotFailure.FAILED, reason, open_s, at - NOW),
    )
    return SlotState(Waiting(at, SlotFailure.FAILED), failures), actions


LET_GO: tuple[SlotAction, ...] = (HaltLanes(), Release(abort_transaction=False))

#: every pair not listed changes nothing: an answer is refused, any other event is a no-op
TABLE: dict[tuple[str, str], Outcome] = {
    # not owned: only an assignment matters (taken at once); answers are refused
    ("unowned", "Assigned"): (SlotState(Waiting(NOW)), (ScheduleRetake(NOW, None),)),
    # waiting: a revocation or a loss forgets the retake, not the failures in a row
    ("waiting", "Revoked"): (SlotState(Unowned(), 1), ()),
    ("waiting", "Lost"): (SlotState(Unowned(), 1), ()),
    # taking: the answer decides; a slot given back meanwhile is let go at once
    ("taking", "Revoked"): (SlotState(Taking(owned=False)), ()),
    ("taking", "Lost"): (SlotState(Taking(owned=False)), ()),
    ("taking", "Taken"): (SlotState(Active()), (ResumeLanes(),)),
    (
        "taking",
        "TakeFailed",
    ): (
        SlotState(Waiting(NOW + 0.5, SlotFailure.FAILED), 1),
        (ScheduleRetake(NOW + 0.5, SlotFailure.FAILED),),
    ),
    ("taking, given back", "Assigned"): (SlotState(Taking()), ()),
    ("taking, given back", "Taken"): (SlotState(), (Release(abort_transaction=False),)),
    ("taking, given back", "TakeFailed"): (SlotState(), ()),
    # taken, no transaction open
    ("idle", "Revoked"): (SlotState(), LET_GO),  # nothing to commit
    ("idle", "Lost"): (SlotState(), LET_GO),
    ("idle", "ProducerWanted"): (STATES["idle"], (BeginTransaction(),)),
    ("idle", "TransactionBegun"): (SlotState(Active(OpenTransaction(NOW))), ()),
    ("idle", "BeginFailed"): retake_failed(1, "begin", None, abort=False),
    ("idle", "Copied"): refused("idle", "Copied"),
    ("idle", "DeliveryFailed"): (SlotState(Failed(None, REFUSED)), (HaltLanes(),)),
    ("idle", "PositionDeleted"): retake_failed(1, "deleted", None, abort=False),
    (
        "idle",
        "IdleCommitDue",
    ): (
        SlotState(Committing(None, AfterCommit.CONTINUE)),
        (Commit(POSITIONS, 0),),
    ),
    (
        "idle",
        "TakeAgain",
    ): (SlotState(Committing(None, AfterCommit.RETAKE)), (Commit(None, 0),)),
    ("idle", "ShuttingDown"): (SlotState(), LET_GO),
    # taken, a transaction open (not due yet at NOW)
    (
        "open",
        "Revoked",
    ): (
        SlotState(Committing(OPEN, AfterCommit.RELEASE, owned=False), 2),
        (Commit(None, 3),),
    ),
    ("open", "Lost"): (SlotState(Unowned(), 2), LET_GO),  # never commit for a lost slot
    ("open", "Copied"): (SlotState(Active(OpenTransaction(99.9, 7)), 2), ()),
    ("open", "DeliveryFailed"): (SlotState(Failed(OPEN, REFUSED), 2), (HaltLanes(),)),
    ("open", "PositionDeleted"): retake_failed(3, "deleted", NOW - 99.9, abort=False),
    (
        "open",
        "TakeAgain",
    ): (SlotState(Committing(OPEN, AfterCommit.RETAKE), 2), (Commit(None, 3),)),
    ("open", "ShuttingDown"): (
        SlotState(Committing(OPEN, AfterCommit.RELEASE), 2),
        (Commit(None, 3),),
    ),
    # failed: nothing more is copied into it, and it never commits; its commit is a drop
    (
        "failed",
        "Revoked",
    ): (
        SlotState(Unowned(), 2),
        (
            Release(abort_transaction=True),
            ReportFailure(SlotFailure.FAILED, "refused", NOW - 99.9, 0.0),
        ),
    ),
    ("failed", "Lost"): (SlotState(Unowned(), 2), (Release(abort_transaction=False),)),
    ("failed", "Copied"): (SlotState(Failed(OpenTransaction(99.9, 7), REFUSED), 2), ()),
    ("failed", "PositionDeleted"): retake_failed(3, "deleted", NOW - 99.9, abort=False, halt=False),
    ("failed", "CommitCheck"): retake_failed(3, "refused", NOW - 99.9, abort=True, halt=False),
    ("failed", "TakeAgain"): retake_failed(3, "refused", NOW - 99.9, abort=True, halt=False),
    ("failed", "ShuttingDown"): retake_failed(3, "refused", NOW - 99.9, abort=True, halt=False),
    # committing: its answer decides; a revocation or a loss only lets the slot go afterwards
    (
        "committing",
        "Revoked",
    ): (SlotState(Committing(OPEN_LONG, AfterCommit.RELEASE, owned=False), 2), ()),
    (
        "committing",
        "Lost",
    ): (SlotState(Committing(OPEN_LONG, AfterCommit.RELEASE, owned=False), 2), ()),
    ("committing", "Copied"): refused("committing", "Copied"),
    (
        "committing",
        "DeliveryFailed",
    ): (
        SlotState(Committing(OPEN_LONG, AfterCommit.CONTINUE, failure=REFUSED), 2),
        (HaltLanes(),),
    ),
    ("committing", "Committed"): (SlotState(Active()), ()),  # the backoff starts over
    ("committing", "CommitFailed"): retake_failed(3, "commit", NOW - 99.5, abort=True),
    (
        "committing",
        "ShuttingDown",
    ): (SlotState(Committing(OPEN_LONG, AfterCommit.RELEASE), 2), ()),
    # committing with a failure reported meanwhile: kept, never copied into again
    (
        "committing, failed",
        "Revoked",
    ): (
        SlotState(
            Committing(
                OPEN_LONG,
                AfterCommit.RELEASE,
                owned=False,
                failure=TransactionFailure("epoch", EPOCH),
            ),
            2,
        ),
        (),
    ),
    (
        "committing, failed",
        "Lost",
    ): (
        SlotState(
            Committing(
                OPEN_LONG,
                AfterCommit.RELEASE,
                owned=False,
                failure=TransactionFailure("epoch", EPOCH),
            ),
            2,
        ),
        (),
    ),
    ("committing, failed", "Copied"): refused("committing, failed", "Copied"),
    (
        "committing, failed",
        "Committed",
    ): (SlotState(Failed(None, TransactionFailure("epoch", EPOCH))), ()),
    ("committing, failed", "CommitFailed"): retake_failed(
        3, "commit", NOW - 99.5, abort=True, halt=False
    ),
    (
        "committing, failed",
        "ShuttingDown",
    ): (
        SlotState(
            Committing(OPEN_LONG, AfterCommit.RELEASE, failure=TransactionFailure("epoch", EPOCH)),
            2,
        ),
        (),
    ),
    # committing a revoked slot: taken again if it comes back meanwhile, else let go
    (
        "committing, given back",
        "Assigned",
    ): (SlotState(Committing(OPEN_LONG, AfterCommit.RETAKE), 2), ()),
    ("committing, given back", "Copied"): refused("committing, given back", "Copied"),
    (
        "committing, given back",
        "DeliveryFailed",
    ): (
        SlotState(Committing(OPEN_LONG, AfterCommit.RELEASE, owned=False, failure=REFUSED), 2),
        (HaltLanes(),),
    ),
    ("committing, given back", "Committed"): (SlotState(), LET_GO),
    (
        "committing, given back",
        "CommitFailed",
    ): (
        SlotState(Unowned(), 2),
        (
            HaltLanes(),
            Release(abort_transaction=True),
            ReportFailure(SlotFailure.FAILED, "commit", NOW - 99.5, 0.0),
        ),
    ),
    # dropping a fenced transaction that outlived the timeout: the group's answer decides
    (
        "dropping",
        "Revoked",
    ): (SlotState(Dropping(OpenTransaction(70.0, 3), "fenced", FENCED, 30.0, owned=False), 2), ()),
    (
        "dropping",
        "Lost",
    ): (SlotState(Dropping(OpenTransaction(70.0, 3), "fenced", FENCED, 30.0, owned=False), 2), ()),
    ("dropping", "Copied"): refused("dropping", "Copied"),
    (
        "dropping",
        "OwnerAnswered",
    ): (
        SlotState(Waiting(NOW + 0.4, SlotFailure.TRANSACTION_TIMED_OUT), 3),
        (
            Release(abort_transaction=False),  # a fatal error: no abort
            ScheduleRetake(NOW + 0.4, SlotFailure.TRANSACTION_TIMED_OUT),
            ReportFailure(SlotFailure.TRANSACTION_TIMED_OUT, "fenced", 30.0, (NOW + 0.4) - NOW),
        ),
    ),
}


def expected_outcome(state: str, event: str) -> Outcome:
    if (state, event) in TABLE:
        return TABLE[(state, event)]
    if event in ANSWERS:
        return refused(state, event)
    return STATES[state], ()


PAIRS = [(s, e) for s in STATES for e in EVENTS]


def test_the_table_names_only_known_states_and_events() -> None:
    assert set(TABLE) <= set(PAIRS)
    assert set(EVENTS) == {type(event).__name__ for event in EVENTS.values()}
    assert set(EVENTS) >= ANSWERS


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=[f"{s} x {e}" for s, e in PAIRS])
def test_transition(state: str, event: str) -> None:
    assert step(STATES[state], EVENTS[event], NOW, POLICY) == expected_outcome(state, event)


# ------------------------------------------------------------------------ what the table leaves


@pytest.mark.parametrize(
    ("transaction", "due"),
    [
        (OpenTransaction(99.81, 9), False),
        (OpenTransaction(99.8, 0), True),  # 0.2 s old
        (OpenTransaction(99.99, 10), True),  # transaction_max_records
        (OpenTransaction(99.99, 9), False),
    ],
)
def test_a_transaction_commits_by_age_or_size(transaction: OpenTransaction, due: bool) -> None:
    state = SlotState(Active(transaction))
    after = step(state, CommitCheck(), NOW, POLICY)
    if due:
        committing = SlotState(Committing(transaction, AfterCommit.CONTINUE))
        assert after == (committing, (Commit(None, transaction.records),))
    else:
        assert after == (state, ())


def test_a_waiting_slot_is_taken_when_its_time_comes() -> None:
    waiting = STATES["waiting"]
    assert step(waiting, RetakeCheck(), 104.99, POLICY) == (waiting, ())
    assert step(waiting, RetakeCheck(), 105.0, POLICY) == (SlotState(Taking(), 1), (TakeSlot(),))


def test_an_assignment_keeps_a_retake_already_scheduled() -> None:
    # Today's setdefault: a takeover's wait is not cut short by another assignment.
    waiting = SlotState(Waiting(115.0, SlotFailure.TAKEN_OVER), 1)
    assert step(waiting, Assigned(), NOW, POLICY) == (waiting, ())


def test_stage_predicates() -> None:
    expected = {
        # name: (owned, copies, producer ready)
        "unowned": (False, False, False),
        "waiting": (True, False, False),
        "taking": (True, False, False),
        "taking, given back": (False, False, False),
        "idle": (True, True, False),
        "open": (True, True, True),
        "failed": (True, False, False),
        "committing": (True, True, False),  # a commit does not halt the lanes
        "committing, failed": (True, False, False),
        "committing, given back": (False, True, False),
        "dropping": (True, False, False),
    }
    assert set(expected) == set(STATES)
    for name, (is_owned, copying, ready) in expected.items():
        state = STATES[name]
        assert (owned(state), copies(state), producer_ready(state)) == (is_owned, copying, ready)


# ------------------------------------------------------------------------ today's scenarios


def run(state: SlotState, *timed: tuple[float, Event]) -> tuple[SlotState, list[SlotAction]]:
    """Step through ``timed`` (absolute times); return the last state and every action."""
    actions: list[SlotAction] = []
    for now, event in timed:
        state, done = step(state, event, now, POLICY)
        actions.extend(done)
    return state, actions


def taken_at(now: float, failures: int = 0) -> SlotState:
    """A slot taken, its transaction begun at ``now``."""
    state, actions = run(
        SlotState(failures_in_a_row=failures),
        (now, Assigned()),
        (now, RetakeCheck()),
        (now, Taken()),
        (now, ProducerWanted()),
        (now, TransactionBegun()),
    )
    assert actions == [ScheduleRetake(now, None), TakeSlot(), ResumeLanes(), BeginTransaction()]
    return state


def drop_kind(actions: list[SlotAction]) -> SlotFailure:
    reports = [a for a in actions if isinstance(a, ReportFailure)]
    assert len(reports) == 1
    return reports[0].kind


TIMEOUT_S = POLICY.transaction_timeout_s
#: how long a transaction stays open before a fence counts as the coordinator's timeout (a margin
#: past the timeout: the age is a difference of clock readings)
LATE_S = TIMEOUT_S + 1.0


@pytest.mark.parametrize(
    ("error", "age", "assigned", "expected"),
    [
        # Not fenced: an ordinary failure, whatever else holds.
        (PLAIN, 30.0, True, SlotFailure.FAILED),
        (PLAIN, None, None, SlotFailure.FAILED),
        # Fenced after the transaction outlived its timeout, the slot still ours: a timeout.
        (FENCED, 20.0, True, SlotFailure.TRANSACTION_TIMED_OUT),
        (FENCED, 45.0, True, SlotFailure.TRANSACTION_TIMED_OUT),
        # The group gave the slot to someone else (a paused worker waking up): a takeover.
        (FENCED, 45.0, False, SlotFailure.TAKEN_OVER),
        # The group could not say: assume a takeover rather than fence the real owner.
        (FENCED, 45.0, None, SlotFailure.TAKEN_OVER),
        # Younger than the timeout: another instance bumped the epoch (the group is not asked).
        (FENCED, 19.9, True, SlotFailure.TAKEN_OVER),
        # No transaction open: nothing could time out.
        (FENCED, None, True, SlotFailure.TAKEN_OVER),
    ],
)
def test_failures_are_classified_as_today(
    error: SlotError, age: float | None, assigned: bool | None, expected: SlotFailure
) -> None:
    start = 1000.0
    if age is None:
        # The producer failed between transactions (its error callback), then the commit check.
        state, actions = run(
            SlotState(Active()),
            (start, DeliveryFailed("fatal producer error", error)),
            (start + 1.0, CommitCheck()),
        )
    else:
        state, actions = run(
            taken_at(start), (start + 1.0, Copied(5)), (start + age, CommitCheck())
        )
        assert actions == [Commit(None, 5)]
        state, actions = run(state, (start + age, CommitFailed("transaction: fenced", error)))
    # The group is asked only when its answer can matter.
    asked = AskOwner() in actions
    assert asked is (error.fenced and age is not None and age >= TIMEOUT_S)
    if asked:
        state, answered = step(state, OwnerAnswered(assigned), start + (age or 0.0), POLICY)
        actions.extend(answered)
    assert drop_kind(actions) is expected
    assert isinstance(state.stage, Waiting) and state.stage.after is expected


def fail_timed_out(state: SlotState, opened_at: float) -> tuple[SlotState, float]:
    """The transaction opened at ``opened_at`` times out on the coordinator; return the state
    and how long it waits before it is taken again."""
    failed_at = opened_at + LATE_S
    state, actions = run(
        state,
        (failed_at, CommitCheck()),
        (failed_at, CommitFailed("transaction: fenced", FENCED)),
        (failed_at, OwnerAnswered(True)),
    )
    assert drop_kind(actions) is SlotFailure.TRANSACTION_TIMED_OUT
    assert isinstance(state.stage, Waiting)
    return state, state.stage.at - failed_at


def retake(state: SlotState) -> tuple[SlotState, float]:
    """Take a waiting slot again when due and open a transaction; return it and the time."""
    assert isinstance(state.stage, Waiting)
    at = state.stage.at
    state, _ = run(state, (at, RetakeCheck()), (at, Taken()), (at, ProducerWanted()))
    state, _ = run(state, (at, TransactionBegun()))
    return state, at


def test_a_timed_out_slot_is_taken_again_promptly_with_a_growing_backoff() -> None:
    delays_max_2s = RetakeDelays(taken_over_s=15.0, timeout_first_s=0.1, timeout_max_s=2.0)
    policy = SlotPolicy(transaction_timeout_s=TIMEOUT_S, retake=delays_max_2s)
    clock = FakeClock()
    state, delays = taken_at(clock.monotonic()), []
    for _ in range(7):
        clock.advance(LATE_S)  # the target is slow: the transaction outlives its timeout
        failed_at = clock.monotonic()
        timed_out: tuple[Event, ...] = (
            CommitCheck(),
            CommitFailed("fenced", FENCED),
            OwnerAnswered(True),
        )
        for event in timed_out:
            state, _ = step(state, event, failed_at, policy)
        assert isinstance(state.stage, Waiting)
        delays.append(round(state.stage.at - failed_at, 6))
        # Not a moment early: the retake waits its backoff.
        assert step(state, RetakeCheck(), failed_at, policy) == (state, ())
        clock.advance(state.stage.at - failed_at)
        taken_again: tuple[Event, ...] = (
            RetakeCheck(),
            Taken(),
            ProducerWanted(),
            TransactionBegun(),
        )
        for event in taken_again:
            state, _ = step(state, event, clock.monotonic(), policy)
        assert producer_ready(state)
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert max(delays) < 15.0


def test_a_commit_resets_the_backoff() -> None:
    state, now = taken_at(1000.0), 1000.0
    waits = []
    for _ in range(4):
        state, wait = fail_timed_out(state, now)
        waits.append(round(wait, 6))
        state, now = retake(state)
    assert waits == [0.1, 0.2, 0.4, 0.8] and state.failures_in_a_row == 4
    state, actions = run(state, (now + 0.5, CommitCheck()), (now + 0.5, Committed()))
    assert actions == [Commit(None, 0)] and state == SlotState(Active())
    state, _ = run(state, (now + 1, ProducerWanted()), (now + 1, TransactionBegun()))
    _, wait = fail_timed_out(state, now + 1)
    assert round(wait, 6) == 0.1


def test_only_a_takeover_waits_the_long_delay() -> None:
    now = 1000.0
    # A takeover: fenced before the transaction could have timed out.
    state, actions = run(taken_at(now), (now + 1, DeliveryFailed("epoch", EPOCH)))
    state, actions = run(state, (now + 1, CommitCheck()))
    assert state.stage == Waiting(now + 1 + 15.0, SlotFailure.TAKEN_OVER)
    assert ScheduleRetake(now + 16.0, SlotFailure.TAKEN_OVER) in actions
    # An ordinary failure, and a timeout.
    state, _ = run(taken_at(now), (now + 1, DeliveryFailed("refused", PLAIN)))
    state, _ = run(state, (now + 1, CommitCheck()))
    assert state.stage == Waiting(now + 1.5, SlotFailure.FAILED)
    _, wait = fail_timed_out(taken_at(now), now)
    assert round(wait, 6) == 0.1


def test_slots_back_off_independently() -> None:
    # One state per slot: the failures of one never lengthen another's wait.
    busy, now = taken_at(0.0), 0.0
    for _ in range(5):
        busy, _ = fail_timed_out(busy, now)
        busy, now = retake(busy)
    assert busy.failures_in_a_row == 5
    _, wait = fail_timed_out(taken_at(0.0), 0.0)
    assert round(wait, 6) == 0.1


def test_a_failure_halts_the_lanes_and_drops_the_slot_at_the_next_check() -> None:
    state, actions = run(taken_at(0.0), (0.05, Copied(3)), (0.06, DeliveryFailed("boom", PLAIN)))
    assert actions == [HaltLanes()] and not copies(state) and not producer_ready(state)
    # Nothing more is copied into it, and the next failure does not replace the first.
    state, actions = run(state, (0.07, ProducerWanted()), (0.08, DeliveryFailed("later", EPOCH)))
    assert actions == [] and isinstance(state.stage, Failed)
    assert state.stage.failure == TransactionFailure("boom", PLAIN)
    state, actions = run(state, (0.1, CommitCheck()))
    assert not any(isinstance(a, Commit) for a in actions)
    assert actions == [
        Release(abort_transaction=True),
        ScheduleRetake(0.1 + 0.5, SlotFailure.FAILED),
        ReportFailure(SlotFailure.FAILED, "boom", 0.1, (0.1 + 0.5) - 0.1),
    ]


def test_a_failure_reported_during_a_commit_stands_for_its_error() -> None:
    # The flush served a report of a fenced record; the commit then fails with no error of
    # its own ("not acknowledged"): the recorded error classifies it, and (not fatal) aborts.
    state, _ = run(taken_at(0.0), (0.3, CommitCheck()))
    state, actions = run(
        state,
        (1.0, DeliveryFailed("epoch", EPOCH)),
        (21.0, CommitFailed("3 record(s) not acknowledged in 20.0s", None)),
    )
    assert actions == [HaltLanes(), AskOwner()]
    state, actions = run(state, (21.5, OwnerAnswered(True)))
    assert actions[0] == Release(abort_transaction=True)
    assert drop_kind(actions) is SlotFailure.TRANSACTION_TIMED_OUT


def test_a_commit_that_begins_its_own_transaction_ages_it_from_then() -> None:
    # An idle slot's commit begins a transaction; a fence 25 s later (a flush that hung) is
    # old enough to have been timed out by the coordinator.
    state, actions = run(SlotState(Active()), (0.0, IdleCommitDue(POSITIONS)))
    assert actions == [Commit(POSITIONS, 0)]
    state, _ = run(state, (5.0, TransactionBegun()))
    state, actions = run(state, (30.0, CommitFailed("fenced", FENCED)))
    assert actions == [HaltLanes(), AskOwner()]
    assert isinstance(state.stage, Dropping) and state.stage.age_s == 25.0


def test_a_revoked_slot_commits_then_lets_go_and_is_not_retaken() -> None:
    state, _ = run(taken_at(0.0), (0.05, Copied(2)))
    state, actions = run(state, (0.1, Revoked()))
    assert actions == [Commit(None, 2)] and not owned(state)
    state, actions = run(state, (0.1, Committed()))
    assert actions == [HaltLanes(), Release(abort_transaction=False)]
    assert state == SlotState()
    # A failing revocation commit is reported, never retried nor retaken.
    state, _ = run(taken_at(0.0, failures=2), (0.1, Revoked()))
    state, actions = run(state, (0.2, CommitFailed("fenced", FENCED)))
    assert not any(isinstance(a, ScheduleRetake | AskOwner) for a in actions)
    assert drop_kind(actions) is SlotFailure.TAKEN_OVER
    assert state == SlotState(Unowned(), 2)  # not counted: the slot is not ours


def test_a_lost_slot_never_commits_again() -> None:
    state, _ = run(taken_at(0.0), (0.05, Copied(2)))
    state, actions = run(state, (0.1, Lost()))
    assert actions == [HaltLanes(), Release(abort_transaction=False)]
    state, actions = run(
        state,
        (1.0, CommitCheck()),
        (1.0, TakeAgain()),
        (1.0, RetakeCheck()),
        (1.0, ProducerWanted()),
    )
    assert actions == [] and state == SlotState()


def test_take_again_commits_then_retakes_at_once() -> None:
    # A skip_below floor, or a topic recreated: commit, give up, take again at once (no backoff).
    state, _ = run(taken_at(0.0, failures=3), (0.05, Copied(2)), (0.1, TakeAgain()))
    state, actions = run(state, (0.1, Committed()))
    assert actions == [HaltLanes(), Release(abort_transaction=False), ScheduleRetake(0.1, None)]
    assert state == SlotState(Waiting(0.1))
    assert step(state, RetakeCheck(), 0.1, POLICY) == (SlotState(Taking()), (TakeSlot(),))


def test_a_take_failure_backs_off_like_any_failure() -> None:
    state, _ = run(SlotState(), (0.0, Assigned()), (0.0, RetakeCheck()))
    delays = []
    for _ in range(4):
        now = state.stage.at if isinstance(state.stage, Waiting) else 0.0
        state, _ = run(state, (now, RetakeCheck()), (now, TakeFailed("init: down")))
        assert isinstance(state.stage, Waiting)
        delays.append(state.stage.at - now)
    assert delays == [0.5, 1.0, 2.0, 4.0]


def test_a_deleted_position_drops_at_once_with_no_error_of_its_own() -> None:
    # Kept from today (questionable): a slot that failed fenced and then meets a deleted
    # position is classified FAILED, not as a takeover, so it is retaken after 0.5 s.
    state, _ = run(taken_at(0.0), (1.0, DeliveryFailed("fatal: fenced", FENCED)))
    state, actions = run(state, (1.0, PositionDeleted("orders-0: position deleted")))
    assert drop_kind(actions) is SlotFailure.FAILED
    assert Release(abort_transaction=False) in actions
    assert state.stage == Waiting(1.5, SlotFailure.FAILED)


def test_a_slot_given_back_while_the_group_is_asked_is_not_retaken() -> None:
    state = STATES["dropping"]
    state, _ = step(state, Revoked(), NOW, POLICY)
    state, actions = step(state, OwnerAnswered(None), NOW, POLICY)
    assert state == SlotState(Unowned(), 2)
    assert actions == (
        Release(abort_transaction=False),
        ReportFailure(SlotFailure.TAKEN_OVER, "fenced", NOW - 70.0, 0.0),
    )


def test_a_shutdown_commits_open_transactions_and_lets_every_slot_go() -> None:
    state, actions = run(taken_at(0.0), (0.05, Copied(1)), (0.1, ShuttingDown()))
    assert actions == [Commit(None, 1)]
    state, actions = run(state, (0.1, Committed()))
    assert actions == [HaltLanes(), Release(abort_transaction=False)] and state == SlotState()
    waiting = SlotState(Waiting(5.0))
    assert step(waiting, ShuttingDown(), 0.1, POLICY) == (waiting, ())


# ------------------------------------------------------------------------ properties

errors = st.sampled_from([None, FENCED, EPOCH, PLAIN])
spontaneous: st.SearchStrategy[Event] = st.one_of(
    st.just(Assigned()),
    st.just(Revoked()),
    st.just(Lost()),
    st.just(RetakeCheck()),
    st.just(ProducerWanted()),
    st.builds(DeliveryFailed, st.sampled_from(["refused", "timed out"]), errors),
    st.just(PositionDeleted("deleted")),
    st.just(CommitCheck()),
    st.just(IdleCommitDue(POSITIONS)),
    st.just(TakeAgain()),
)
#: time between events: often nothing, sometimes past the transaction timeout
gaps = st.one_of(st.just(0.0), st.floats(0.0, 1.0), st.floats(15.0, 30.0))


@dataclass
class Model:
    """What the properties expect, followed apart from the machine's own fields."""

    owned: bool = False
    given_back: bool = False
    holding: bool = False  # a producer exists (taken or being taken)
    lanes_running: bool = False
    transaction_failed: bool = False
    records: int = 0
    retake_at: float = 0.0


def check(
    model: Model,
    backoff: ReferenceBackoff,
    before: SlotState,
    event: Event,
    state: SlotState,
    actions: tuple[SlotAction, ...],
    now: float,
) -> None:
    """The properties of one step, updating ``model`` (and ``backoff``, the reference)."""
    kinds = {type(action) for action in actions}
    assert Refused not in kinds  # a synchronous driver only answers what was asked
    follow_event(model, backoff, before, event, kinds)
    follow_actions(model, backoff, actions, now)
    if isinstance(event, TakeFailed) and isinstance(before.stage, Taking):
        model.holding = False
    if isinstance(event, Committed) and model.transaction_failed:
        assert not isinstance(state.stage, Active)  # a failed transaction never goes on

    assert copies(state) is model.lanes_running
    assert owned(state) is model.owned
    assert state.failures_in_a_row == backoff.failures_in_a_row(0)
    stage = state.stage
    if isinstance(stage, Active | Failed | Committing) and stage.transaction is not None:
        assert stage.transaction.records == model.records
    if isinstance(stage, Committing | Failed) and stage.failure is not None:
        assert model.transaction_failed


def follow_event(
    model: Model,
    backoff: ReferenceBackoff,
    before: SlotState,
    event: Event,
    kinds: set[type[SlotAction]],
) -> None:
    if isinstance(event, Assigned):
        model.owned, model.given_back = True, False
    forbidden = {Commit, BeginTransaction, TakeSlot, ResumeLanes, ScheduleRetake}
    if model.given_back or isinstance(event, Lost):
        # After a revocation or a loss: nothing begun, committed, taken or scheduled again
        # (a lost slot not even its open transaction) ...
        assert not forbidden & kinds
    if isinstance(event, Revoked):
        # ... a revoked one commits what it copied, as it lets go
        assert not (forbidden - {Commit}) & kinds
    if isinstance(event, Revoked | Lost):
        model.owned, model.given_back = False, True
    if isinstance(event, Committed) and isinstance(before.stage, Committing):
        backoff.succeeded(0)
        model.records = 0
    if isinstance(event, DeliveryFailed) and copies(before):
        model.transaction_failed = True
    if isinstance(event, Copied) and producer_ready(before):
        model.records += event.records


def follow_actions(
    model: Model, backoff: ReferenceBackoff, actions: tuple[SlotAction, ...], now: float
) -> None:
    for action in actions:
        match action:
            case TakeSlot():
                assert not model.holding and not model.lanes_running
                assert now >= model.retake_at  # never before the backoff allows
                model.holding = True
            case ResumeLanes():
                assert model.holding and not model.lanes_running
                model.lanes_running = True
            case HaltLanes():
                assert model.lanes_running
                model.lanes_running = False
            case Commit(_, records):
                assert not model.transaction_failed  # a failed transaction never commits
                assert records == model.records  # each record counted in one commit
            case Release():
                # Lanes halt before the producer goes (and before any retake).
                assert model.holding and not model.lanes_running
                model.holding = False
                model.transaction_failed = False
                model.records = 0
            case ScheduleRetake(at, after):
                assert not model.lanes_running
                if after is None:
                    assert at == now
                else:
                    assert at == backoff.failed(0, after, now)  # the reference bookkeeping
                model.retake_at = at
            case ReportFailure():
                assert any(isinstance(a, Release) for a in actions)
            case _:
                pass


def answers(
    data: st.DataObject, state: SlotState, actions: tuple[SlotAction, ...]
) -> list[tuple[float, Event]]:
    """How a synchronous driver answers ``actions`` (time may pass while it does)."""
    found: list[tuple[float, Event]] = []
    for action in actions:
        match action:
            case TakeSlot():
                took: st.SearchStrategy[Event] = st.sampled_from([Taken(), TakeFailed("down")])
                found.append((0.0, data.draw(took)))
            case BeginTransaction():
                begun: st.SearchStrategy[Event] = st.sampled_from(
                    [TransactionBegun(), BeginFailed("begin", PLAIN)]
                )
                found.append((0.0, data.draw(begun)))
            case Commit():
                stage = state.stage
                if isinstance(stage, Committing) and stage.transaction is None:
                    found.append((0.0, TransactionBegun()))
                if data.draw(st.booleans()):
                    # its flush served a failed delivery report
                    found.append((0.0, DeliveryFailed("flushed", data.draw(errors))))
                outcome = st.one_of(
                    st.just(Committed()), st.builds(CommitFailed, st.just("commit"), errors)
                )
                found.append((data.draw(gaps), data.draw(outcome)))
            case AskOwner():
                answer = st.sampled_from([True, False, None])
                found.append((0.0, OwnerAnswered(data.draw(answer))))
            case _:
                pass
    return found


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_properties_hold_when_driven_like_the_mode(data: st.DataObject) -> None:
    state, model, backoff, clock = SlotState(), Model(), ReferenceBackoff(DELAYS), FakeClock()
    pending: list[tuple[float, Event]] = []
    for _ in range(data.draw(st.integers(1, 80))):
        if pending:
            gap, event = pending.pop(0)
        else:
            gap, event = data.draw(gaps), data.draw(spontaneous)
            if isinstance(event, ProducerWanted) and data.draw(st.booleans()):
                pending.append((0.0, Copied(data.draw(st.integers(1, 6)))))
        clock.advance(gap)
        now = clock.monotonic()
        if isinstance(event, Copied) and not producer_ready(state):
            continue  # the hot path copies only into a producer it was given
        before = state
        state, actions = step(state, event, now, POLICY)
        check(model, backoff, before, event, state, actions, now)
        pending = answers(data, state, actions) + pending


every_event: st.SearchStrategy[Event] = st.one_of(
    spontaneous,
    st.sampled_from([Taken(), TakeFailed("x"), TransactionBegun(), Committed(), ShuttingDown()]),
    st.builds(BeginFailed, st.just("x"), errors),
    st.builds(Copied, st.integers(0, 5)),
    st.builds(CommitFailed, st.just("x"), errors),
    st.builds(OwnerAnswered, st.sampled_from([True, False, None])),
)
histories = st.lists(st.tuples(gaps, every_event), max_size=60)


@settings(max_examples=300, deadline=None)
@given(histories)
def test_any_event_in_any_state_is_handled(history: list[tuple[float, Event]]) -> None:
    """Whatever arrives, the machine never raises, refuses only answers it did not ask for (and
    copies into no open transaction), and refuses without changing anything."""
    state, now = SlotState(), 0.0
    for gap, event in history:
        now += gap
        after, actions = step(state, event, now, POLICY)
        if any(isinstance(a, Refused) for a in actions):
            assert isinstance(event, Copied) or type(event).__name__ in ANSWERS
            assert after == state and len(actions) == 1
        state = after


@settings(max_examples=200, deadline=None)
@given(histories)
def test_stepping_is_pure(history: list[tuple[float, Event]]) -> None:
    """The same history gives the same states and actions (no hidden state, nothing mutated)."""
    state, now, trace = SlotState(), 0.0, []
    for gap, event in history:
        now += gap
        result = step(state, event, now, POLICY)
        assert step(state, event, now, POLICY) == result
        state = result[0]
        trace.append(result)
    state, now = SlotState(), 0.0
    for (gap, event), expected in zip(history, trace, strict=True):
        now += gap
        assert step(state, event, now, POLICY) == expected
        state = expected[0]
