"""The controller's loop around the pure decision: the lead, what it asks the executor, what it
does when the lead is lost, and what it counts in its metrics (an in-memory coordinator, a fake
executor, a fake clock, a registry of its own per test)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from memory_coordination import FakeClock, MemoryCoordinator
from prometheus_client import CollectorRegistry

from drsvc.errors import CoordinatorUnavailableError, LockLostError
from drsvc.runtime.controller.controller import DrController
from drsvc.runtime.controller.metrics import controller_metrics
from drsvc.runtime.failover.executor import LockTiming
from drsvc.topology.loader import load_topology_text
from drsvc.topology.models import Application
from failover.active import ActiveDocument
from failover.dr_decision import Action, Observation
from failover.errors import FailoverRefused
from failover.failover_plan import FailoverRequest, FailoverState

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
    #: what start and resume return (the record's state) or raise
    ends: FailoverState | Exception = FailoverState.COMPLETED

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
        return self._end(request.app, request.to)

    def resume(self, failover_id: str) -> object:
        self.resumed.append(failover_id)
        return self._end("orders", "west")

    def _end(self, app: str, to: str) -> object:
        if isinstance(self.ends, Exception):
            raise self.ends
        return _Done(app, to, self.ends)


class _Done:
    def __init__(self, app: str, to: str, state: FailoverState) -> None:
        self.plan = type("Plan", (), {"failover_id": "f-1", "app": app, "to_cluster": to,
                                      "kind": Action.FAILOVER})()  # fmt: skip
        self.state = state


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _controller(
    clock: FakeClock,
    store: MemoryCoordinator,
    executor: FakeExecutor,
    east_up: list[bool],
    *,
    replica: str = "c1",
    registry: CollectorRegistry | None = None,
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
        replica=replica,
        lock_timing=LockTiming(2, 1),
        clock=clock.monotonic,
        wall_ms=lambda: 10_000_000,
        metrics=controller_metrics(registry or CollectorRegistry()),
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


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_decisions_are_counted_by_app_and_action(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    executor = FakeExecutor()
    east_up = [True]
    controller = _controller(clock, MemoryCoordinator(clock), executor, east_up, registry=registry)
    assert controller._lead()
    for _ in range(2):  # east up: hold, twice
        controller.cycle()
        clock.advance(1)
    east_up[0] = False
    for _ in range(5):  # down for 0, 1, 2 s: hold; 3 s: failover; then the cooldown holds
        controller.cycle()
        clock.advance(1)
    decisions = "drsvc_controller_decisions_total"
    assert _sample(registry, decisions, app="orders", action="hold") == 6
    assert _sample(registry, decisions, app="orders", action="failover") == 1
    assert _sample(registry, decisions, app="orders", action="resume") is None
    assert len(executor.started) == 1
    failovers = "drsvc_controller_failovers_total"
    assert _sample(registry, failovers, app="orders", action="failover", outcome="completed") == 1


@pytest.mark.parametrize(
    ("ends", "outcome"),
    [
        (FailoverState.COMPLETED, "completed"),
        (FailoverState.ROLLED_BACK, "rolled_back"),
        (FailoverRefused("orders: a failover is running"), "refused"),
        (CoordinatorUnavailableError("no Consul"), "error"),
    ],
)
def test_a_resumed_failover_is_counted_by_outcome(
    clock: FakeClock, ends: FailoverState | Exception, outcome: str
) -> None:
    registry = CollectorRegistry()
    executor = FakeExecutor(active_on=None, unfinished="f-7", ends=ends)
    controller = _controller(clock, MemoryCoordinator(clock), executor, [False], registry=registry)
    assert controller._lead()
    controller.cycle()
    assert executor.resumed == ["f-7"]
    labels = {"app": "orders", "action": "resume"}
    assert _sample(registry, "drsvc_controller_decisions_total", **labels) == 1
    assert _sample(registry, "drsvc_controller_failovers_total", **labels, outcome=outcome) == 1


def test_a_lost_lead_is_counted_as_an_error_and_not_swallowed(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    executor = FakeExecutor(active_on=None, unfinished="f-7", ends=LockLostError("lost"))
    controller = _controller(clock, MemoryCoordinator(clock), executor, [False], registry=registry)
    assert controller._lead()
    with pytest.raises(LockLostError):
        controller.cycle()
    labels = {"app": "orders", "action": "resume", "outcome": "error"}
    assert _sample(registry, "drsvc_controller_failovers_total", **labels) == 1


def test_the_leader_gauge_follows_the_lock(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    store = MemoryCoordinator(clock)
    leader = _controller(clock, store, FakeExecutor(), [True], registry=registry)
    follower = _controller(clock, store, FakeExecutor(), [True], replica="c2", registry=registry)

    def leads(replica: str) -> float | None:
        return _sample(registry, "drsvc_controller_leader", replica=replica)

    assert (leads("c1"), leads("c2")) == (0, 0)  # both known from the start, neither leads
    assert leader._lead() and not follower._lead()
    assert (leads("c1"), leads("c2")) == (1, 0)
    lock = leader._lock
    assert lock is not None
    store.expire(lock.session)
    assert not leader._lead()  # it notices, and the lock is in its lock delay
    assert leads("c1") == 0
    clock.advance(2)
    assert follower._lead()
    assert (leads("c1"), leads("c2")) == (0, 1)


def test_a_stopped_leader_is_no_longer_counted_as_leading(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    controller = _controller(clock, MemoryCoordinator(clock), FakeExecutor(), [True],
                             registry=registry)  # fmt: skip
    leading_during_the_cycle: list[float | None] = []

    class StopAfterOneCycle(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            leading = _sample(registry, "drsvc_controller_leader", replica="c1")
            leading_during_the_cycle.append(leading)
            self.set()
            return True

    controller.run(StopAfterOneCycle())
    assert leading_during_the_cycle == [1]
    assert _sample(registry, "drsvc_controller_leader", replica="c1") == 0
    assert _sample(registry, "drsvc_controller_decisions_total", app="orders", action="hold") == 1
