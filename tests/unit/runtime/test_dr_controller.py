"""The controller's loop around the pure decision: the lead, what it asks the executor, what it
does when the lead is lost, and what it counts in its metrics (an in-memory coordinator, a fake
executor, a fake clock, a registry of its own per test). Moves run on the controller's worker
threads: the tests wait for them (``wait_for_moves``) before they look."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from memory_coordination import FakeClock, MemoryCoordinator
from prometheus_client import CollectorRegistry

from drsvc.errors import CoordinatorUnavailableError, LockLostError, RefusedError
from drsvc.runtime.controller.controller import DrController
from drsvc.runtime.controller.metrics import controller_metrics
from drsvc.runtime.failover.executor import LockTiming
from drsvc.topology.loader import load_topology_text
from drsvc.topology.models import Application
from failover.active import ActiveDocument
from failover.dr_decision import Action, Observation
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
    #: the store the controller's moves read through (set by ``_controller``)
    coordinator: Any = None

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

    def resume(self, failover_id: str, wait_s: float | None = None) -> object:
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
    topology: str = TOPOLOGY,
    **options: Any,
) -> DrController:
    executor.coordinator = store
    return DrController(
        load_topology_text(topology),
        executor,  # type: ignore[arg-type]
        store,
        [vantage("probe", east_up), vantage("consul", east_up)],
        replica=replica,
        lock_timing=LockTiming(2, 1),
        clock=clock.monotonic,
        wall_ms=lambda: 10_000_000,
        metrics=controller_metrics(registry or CollectorRegistry()),
        **options,
    )


def vantage(name: str, east_up: list[bool]):  # type: ignore[no-untyped-def]
    """A vantage point that sees west up, and east as ``east_up[0]`` says when asked."""

    def look(cluster: str, now: float) -> Observation:
        return Observation(cluster, name, cluster != "east" or east_up[0], now)

    return look


def cycles(controller: DrController, clock: FakeClock, n: int) -> None:
    """``n`` cycles a second apart, each with its moves run to their end."""
    for _ in range(n):
        controller.cycle()
        settle(controller)
        clock.advance(1)


def settle(controller: DrController) -> None:
    """Wait for the moves the controller handed to its worker threads. (A controller without
    ``wait_for_moves`` ran every move inside ``cycle``: so do these tests on the code before
    moves ran on threads, where they show what it did.)"""
    wait_for_moves = getattr(controller, "wait_for_moves", None)
    if wait_for_moves is not None:
        assert wait_for_moves(10)


def test_only_the_leader_acts_and_one_outage_is_one_request(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock)
    executor = FakeExecutor()
    east_up = [True]
    leader = _controller(clock, store, executor, east_up)
    follower = _controller(clock, store, FakeExecutor(), east_up)
    assert leader._lead() and not follower._lead()
    east_up[0] = False
    cycles(leader, clock, 5)
    assert [(r.app, r.to, r.request_id) for r in executor.started] == [
        ("orders", "west", "auto-orders-e4")
    ]
    assert executor.started[0].requested_by.describe() == f"controller:{leader.replica}"
    assert leader.decisions.counts[("orders", "failover")] == 1


def test_an_unfinished_failover_is_resumed(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock)
    executor = FakeExecutor(active_on=None, unfinished="f-7")
    controller = _controller(clock, store, executor, [False])
    assert controller._lead()
    cycles(controller, clock, 1)
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
    cycles(controller, clock, 2)  # east up: hold, twice
    east_up[0] = False
    cycles(controller, clock, 5)  # down for 0, 1, 2 s: hold; 3 s: failover; then the cooldown
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
        (RefusedError("orders: a failover is running"), "refused"),
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
    cycles(controller, clock, 1)
    assert executor.resumed == ["f-7"]
    labels = {"app": "orders", "action": "resume"}
    assert _sample(registry, "drsvc_controller_decisions_total", **labels) == 1
    assert _sample(registry, "drsvc_controller_failovers_total", **labels, outcome=outcome) == 1


def test_a_move_that_lost_its_application_lock_is_counted_as_an_error_and_the_lead_stays(
    clock: FakeClock,
) -> None:
    # The executor's own lock (the application's) lapsed under a move: that move stops, and
    # the controller, whose lead is a different lock, goes on leading.
    registry = CollectorRegistry()
    executor = FakeExecutor(active_on=None, unfinished="f-7", ends=LockLostError("lost"))
    controller = _controller(clock, MemoryCoordinator(clock), executor, [False], registry=registry)
    assert controller._lead()
    cycles(controller, clock, 1)
    labels = {"app": "orders", "action": "resume", "outcome": "error"}
    assert _sample(registry, "drsvc_controller_failovers_total", **labels) == 1
    assert controller.leading


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


# -- decided per action (issue 32) -----------------------------------------------------------


def _apps(n: int) -> str:
    """The shop with ``n`` opted-in applications on east: a1, a2, ..."""
    head = TOPOLOGY.split("applications:", maxsplit=1)[0]
    apps = "".join(
        f"  - {{name: a{i}, groups: [g{i}], topics: [t{i}], preferred: east,"
        " auto_failover: true}\n"
        for i in range(1, n + 1)
    )
    controller = "controller: {unreachable_after_s: 3, healthy_after_s: 0, interval_s: 1}\n"
    return f"{head}applications:\n{apps}{controller}"


def test_a_cluster_back_after_the_cycle_looked_is_not_failed_away_from(clock: FakeClock) -> None:
    # East is down for the threshold; the cycle's observations say so; east answers again right
    # after they were taken (here: while the cycle reads the application's state). The move
    # looks again first and stands down.
    east_up = [False]
    decided_at = clock.monotonic() + 3  # down for 0, 1, 2 s: hold; 3 s: failover

    class EastBackAfterTheLook(FakeExecutor):
        def failover_targets(self, app: Application, active: str) -> list[str]:
            if clock.monotonic() >= decided_at:
                east_up[0] = True
            return super().failover_targets(app, active)

    registry = CollectorRegistry()
    executor = EastBackAfterTheLook()
    controller = _controller(clock, MemoryCoordinator(clock), executor, east_up, registry=registry)
    assert controller._lead()
    cycles(controller, clock, 4)
    assert controller.decisions.counts[("orders", "failover")] == 1  # decided on the old look
    assert executor.started == []  # and stood down on the fresh one
    held = {"app": "orders", "action": "failover", "outcome": "held"}
    assert _sample(registry, "drsvc_controller_failovers_total", **held) == 1


def test_east_back_during_the_first_move_keeps_the_others_where_they_are(
    clock: FakeClock,
) -> None:
    # Three applications on east, one move at a time: the first move takes 20 s (an unplanned
    # failover's lease wait), and east is back by its end. The two queued behind it look again
    # before they start, see east up, and stay.
    east_up = [False]
    log: list[tuple[str, str]] = []

    class SlowExecutor(FakeExecutor):
        def start(self, request: FailoverRequest) -> object:
            log.append((request.app, "east up" if east_up[0] else "east down"))
            if len(log) == 1:
                clock.advance(20)
                east_up[0] = True
            return super().start(request)

    executor = SlowExecutor()
    controller = _controller(clock, MemoryCoordinator(clock), executor, east_up,
                             topology=_apps(3), max_concurrent_moves=1)  # fmt: skip
    assert controller._lead()
    cycles(controller, clock, 5)
    assert log == [("a1", "east down")]
    # Stood down, they keep no cooldown: east lost again, they move once it has been down for
    # the threshold again.
    east_up[0] = False
    cycles(controller, clock, 6)
    assert log == [("a1", "east down"), ("a2", "east down"), ("a3", "east down")]


def test_a_dead_clusters_slow_probe_does_not_stand_the_move_down(clock: FakeClock) -> None:
    # The probe of a dead cluster answers only once its timeout has run out, later than the
    # fresh look waits; with Consul's checks it is one of the two vantage points. Its earlier
    # "unreachable" stands while its new ask waits, and the move goes ahead.
    def slow_probe(cluster: str, now: float) -> Observation:
        if cluster == "east":
            time.sleep(0.3)
        return Observation(cluster, "probe", cluster != "east", now)

    executor = FakeExecutor()
    store = MemoryCoordinator(clock)
    executor.coordinator = store
    controller = DrController(
        load_topology_text(TOPOLOGY),
        executor,  # type: ignore[arg-type]
        store,
        [slow_probe, vantage("consul", [False])],
        replica="c1",
        lock_timing=LockTiming(2, 1),
        clock=clock.monotonic,
        metrics=controller_metrics(CollectorRegistry()),
        recheck_wait_s=0.1,
    )
    assert controller._lead()
    cycles(controller, clock, 4)
    assert [r.app for r in executor.started] == ["orders"]


def test_five_applications_start_their_moves_together_within_one_cycle(
    clock: FakeClock,
) -> None:
    # Every start waits until all five have started: one after another, the first would wait
    # for ever (here: until the barrier's timeout breaks it).
    together = threading.Barrier(5, timeout=5)

    class TogetherExecutor(FakeExecutor):
        def start(self, request: FailoverRequest) -> object:
            together.wait()
            return super().start(request)

    executor = TogetherExecutor()
    controller = _controller(clock, MemoryCoordinator(clock), executor, [False],
                             topology=_apps(5))  # fmt: skip
    assert controller._lead()
    cycles(controller, clock, 3)  # down for 0, 1, 2 s: hold
    assert executor.started == []
    controller.cycle()  # down for 3 s: five failovers, one cycle
    settle(controller)
    assert sorted(r.app for r in executor.started) == [f"a{i}" for i in range(1, 6)]
    assert not together.broken


def test_a_failover_whose_executor_is_alive_is_left_to_it(clock: FakeClock) -> None:
    # A failover the API started is running (its lock held through a live session): the
    # controller neither resumes it nor waits for its lock. Once the holder's session is gone
    # (the API died), the controller resumes the same failover.
    store = MemoryCoordinator(clock)
    holder = store.try_lock(
        "drsvc/shop/apps/orders/lock", '{"failover_id": "f-7"}', ttl_s=2, lock_delay_s=1
    )
    assert holder is not None
    executor = FakeExecutor(active_on=None, unfinished="f-7")
    controller = _controller(clock, store, executor, [False])
    assert controller._lead()
    cycles(controller, clock, 3)
    assert executor.resumed == []
    assert controller.decisions.counts.get(("orders", "resume")) is None
    assert "its executor holds the application's lock" in controller.decisions.last["orders"]
    store.expire(holder.session)
    cycles(controller, clock, 1)
    assert executor.resumed == ["f-7"]


def test_a_resume_waiting_for_a_lock_never_holds_the_loop_or_other_applications(
    clock: FakeClock,
) -> None:
    # orders: a failover whose executor died; its resume waits for the lock (at most the lock
    # delay). ledger: on east, which is down. ledger's failover starts while orders' resume
    # still waits, and each cycle returns at once.
    topology = TOPOLOGY.replace(
        "controller:",
        "  - {name: ledger, groups: [l], topics: [ledger], preferred: east, auto_failover: true}\n"
        "controller:",
    )
    release = threading.Event()
    resumed_to_its_end = threading.Event()

    class Executor(FakeExecutor):
        def active(self, app: Application) -> ActiveDocument:
            return ActiveDocument(None if app.name == "orders" else "east", self.epoch)

        def running(self, app: Application) -> str | None:
            return "f-7" if app.name == "orders" and not resumed_to_its_end.is_set() else None

        def resume(self, failover_id: str, wait_s: float | None = None) -> object:
            self.resumed.append(failover_id)
            release.wait(5)
            resumed_to_its_end.set()
            return _Done("orders", "west", FailoverState.COMPLETED)

    executor = Executor()
    controller = _controller(clock, MemoryCoordinator(clock), executor, [False],
                             topology=topology)  # fmt: skip
    assert controller._lead()
    try:
        for _ in range(5):  # ledger: east down for 0 to 3 s, a failover at 3 s
            controller.cycle()
            clock.advance(1)
        assert not resumed_to_its_end.is_set()
        deadline = threading.Event()
        for _ in range(50):  # ledger's move runs on its own thread: give it a moment
            if executor.started:
                break
            deadline.wait(0.1)
        assert [r.app for r in executor.started] == ["ledger"]
        assert executor.resumed == ["f-7"]  # once: its move is still running
    finally:
        release.set()
    settle(controller)
