"""Event ids come from the failover records: every reader of the same records gives the same
ids, in the order the steps happened, so a cursor outlives the process that handed it out."""

from __future__ import annotations

from dataclasses import replace

from drsvc.api.events import EVENT_CURSOR, START, EventLog, event_id
from failover.failover_plan import FailoverRecord, Outcome, StepEvent, StepName

NOW_MS = 1_000_000  # long after every step below: all of them settled


def _record(failover_id: str, *events: StepEvent, app: str = "orders") -> FailoverRecord:
    class Plan:
        pass

    plan = Plan()
    plan.failover_id = failover_id  # type: ignore[attr-defined]
    plan.app = app  # type: ignore[attr-defined]
    return type("R", (), {"plan": plan, "events": list(events)})()  # type: ignore[no-any-return]


A1 = StepEvent(StepName.DEACTIVATE, Outcome.OK, 100)
A2 = replace(A1, step=StepName.WAIT_LEASE, at_ms=200)
B1 = StepEvent(StepName.DEACTIVATE, Outcome.OK, 50)


def test_each_step_is_one_event_in_time_order() -> None:
    log = EventLog()
    log.note([_record("a", A1), _record("b", B1)])
    assert [(e.id, e.failover_id) for e in log.after(START, NOW_MS)] == [
        ("0000000000050-b-0000", "b"),
        ("0000000000100-a-0000", "a"),
    ]
    log.note([_record("a", A1, A2), _record("b", B1)])  # seen again: not repeated
    cursor = event_id(100, "a", 0)
    assert [(e.id, e.step) for e in log.after(cursor, NOW_MS)] == [
        ("0000000000200-a-0001", "wait-lease")
    ]


def test_two_readers_of_the_same_records_give_the_same_ids() -> None:
    # one API process that saw the records grow step by step, another (a replica, or the same
    # API after a restart) that reads them all at once in another order
    first, second = EventLog(), EventLog()
    first.note([_record("a", A1)])
    first.note([_record("b", B1), _record("a", A1)])
    first.note([_record("a", A1, A2), _record("b", B1)])
    second.note([_record("a", A1, A2), _record("b", B1)])
    assert first.after(START, NOW_MS) == second.after(START, NOW_MS)
    cursor = first.after(START, NOW_MS)[1].id  # the client's last id before the restart
    assert [e.id for e in second.after(cursor, NOW_MS)] == [event_id(200, "a", 1)]


def test_a_fresh_step_waits_for_the_settle_time() -> None:
    # a step written a moment after its time must still sort after every cursor handed out
    log = EventLog(settle_ms=1000)
    log.note([_record("a", A1, A2)])
    assert [e.at_ms for e in log.after(START, 1150)] == [100]
    assert [e.at_ms for e in log.after(START, 1200)] == [100, 200]


def test_the_log_keeps_the_newest_events() -> None:
    log = EventLog(capacity=2)
    log.note([_record("a", A1, A2), _record("b", B1)])
    assert [e.at_ms for e in log.after(START, NOW_MS)] == [100, 200]


def test_cursors_are_the_start_or_an_id() -> None:
    assert EVENT_CURSOR.match(START)
    assert EVENT_CURSOR.match(event_id(1_700_000_000_000, "f-20261125T101500Z-1a2b3c4d", 3))
    for bad in ("", "12", "-1", "0000000000050-b", "abc", "0000000000050-../x-0001"):
        assert not EVENT_CURSOR.match(bad), bad
