"""The event log numbers each failover step once, in the order the steps happened."""

from __future__ import annotations

from dataclasses import replace

from drsvc.api.events import EventLog
from failover.failover_plan import FailoverRecord, Outcome, StepEvent, StepName


def _record(failover_id: str, *events: StepEvent) -> FailoverRecord:
    class Plan:
        pass

    plan = Plan()
    plan.failover_id = failover_id  # type: ignore[attr-defined]
    plan.app = "orders"  # type: ignore[attr-defined]
    return type("R", (), {"plan": plan, "events": list(events)})()  # type: ignore[no-any-return]


def test_each_step_is_one_event_in_time_order() -> None:
    log = EventLog()
    a1 = StepEvent(StepName.DEACTIVATE, Outcome.OK, 100)
    b1 = StepEvent(StepName.DEACTIVATE, Outcome.OK, 50)
    log.note([_record("a", a1), _record("b", b1)])
    assert [(e.id, e.failover_id) for e in log.after(0)] == [(1, "b"), (2, "a")]
    a2 = replace(a1, step=StepName.WAIT_LEASE, at_ms=200)
    log.note([_record("a", a1, a2), _record("b", b1)])  # seen again: not repeated
    assert [(e.id, e.step) for e in log.after(2)] == [(3, "wait-lease")]


def test_wait_polls_until_an_event_or_the_deadline() -> None:
    log = EventLog()
    slept: list[float] = []
    calls = iter([[], [], [_record("a", StepEvent(StepName.ACTIVATE, Outcome.OK, 1))]])
    found = log.wait(0, 5.0, lambda: log.note(next(calls)), slept.append, poll_s=0.5)
    assert [e.step for e in found] == ["activate"] and slept == [0.5, 0.5]
    assert log.wait(1, 0.0, lambda: None, slept.append) == []
