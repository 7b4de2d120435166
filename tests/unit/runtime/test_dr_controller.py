"""The controller's loop around the pure decision: the lead, what it asks the executor, and
what it does when the lead is lost (an in-memory coordinator, a fake executor, a fake clock)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.errors import LockLostError
from drsvc.runtime.controller.controller import DrController
from drsvc.runtime.failover.executor import LockTiming
from drsvc.topology.loader import load_topology_text
from drsvc.topology.models import Application
from failover.active import ActiveDocument
from failover.dr_decision import Action, Observation
from failover.failover_plan import FailoverRequest

TOPOLOGY = """
name: shop
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
  - {source: west, target: east}
applications:
  - {name: orders, groups: [g], topics: [orders], preferred: east, auto_failover: true}
controller: {unreachable_after_s: 3, healthy_after_s: 0, interval_s: 1}
"""


@dataclass
class FakeRecord:
    failover_id: str
    created_ms: int = 0


@dataclass
class FakeExecutor:
    """What the controller asks of the failover executor."""

    active_on: str | None = "east"
    epoch: int = 4
    unfinished: str | None = None
    started: list[FailoverRequest] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)

    def active(self, app: Application) -> ActiveDocument:
        return ActiveDocument(self.active_on, self.epoch)

    def running(self, app: Application) -> str | None:
        return self.unfinished

    def record(self, failover_id: str) -> FakeRecord:
        return FakeRecord(failover_id)

    def failover_targets(self, app: Application, active: str) -> list[str]:
        return sorted({"east", "west"} - {active})

    def start(self, request: FailoverRequest) -> object:
        self.started.append(request)
        return _Done(request.app, request.to)

    def resume(self, failover_id: str) -> object:
        self.resumed.append(failover_id)
        return _Done("orders", "west")


class _Done:
    def __init__(self, app: str, to: str) -> None:
        self.plan = type("Plan", (), {"failover_id": "f-1", "app": app, "to_cluster": to,
                                      "kind": Action.FAILOVER})()  # fmt: skip
        self.state = Action.FAILOVER


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _controller(
    clock: FakeClock, store: MemoryCoordinator, executor: FakeExecutor, east_up: list[bool]
) -> DrController:
    def vantage(name: str):  # type: ignore[no-untyped-def]
        def look(cluster: str, now: float) -> Observation:
            return Observation(cluster, name, cluster != "east" or east_up[0], now)

        return look

    return DrController(
        load_topology_text(TOPOLOGY),
        executor,  # type: ignore[arg-type]
        store,
        [vantage("probe"), vantage("consul")],
        replica="c1",
        lock_timing=LockTiming(2, 1),
        clock=clock.monotonic,
        wall_ms=lambda: 10_000_000,
    )


def test_only_the_leader_acts_and_one_outage_is_one_request(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock)
    executor = FakeExecutor()
    east_up = [True]
    leader = _controller(clock, store, executor, east_up)
    follower = _controller(clock, store, FakeExecutor(), east_up)
    assert leader._lead() and not follower._lead()
    east_up[0] = False
    for _ in range(5):
        leader.cycle()
        clock.advance(1)
    assert [(r.app, r.to, r.request_id) for r in executor.started] == [
        ("orders", "west", "auto-orders-e4")
    ]
    assert leader.decisions.counts[("orders", "failover")] == 1


def test_an_unfinished_failover_is_resumed(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock)
    executor = FakeExecutor(active_on=None, unfinished="f-7")
    controller = _controller(clock, store, executor, [False])
    assert controller._lead()
    controller.cycle()
    assert executor.resumed == ["f-7"] and executor.started == []


def test_a_leader_that_lost_its_lock_does_not_act(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock)
    executor = FakeExecutor()
    controller = _controller(clock, store, executor, [False])
    assert controller._lead()
    lock = controller._lock
    assert lock is not None
    for _ in range(3):
        controller.cycle()
        clock.advance(1)
    store.expire(lock.session)
    with pytest.raises(LockLostError):
        controller.cycle()
    assert executor.started == []
