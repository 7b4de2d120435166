"""A failover fences the application's transactional producers on the cluster it leaves."""

from __future__ import annotations

from collections.abc import Sequence

from failover_topologies import Clock, application, east_west, executor_on
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator

from drsvc.runtime.failover.executor import LockTiming
from drsvc.runtime.failover.fencing import FencingReport
from drsvc.topology.models import Topology
from failover.failover_plan import FailoverRecord, FailoverRequest, FailoverState, StepName

pytest_plugins = ["failover_fixtures"]

NS = "t"


def _topology(transactional_ids: list[str]) -> Topology:
    return east_west(NS, application(lease_s=3, transactional_ids=transactional_ids))


class Watching(FakeFailoverClusters):
    """Fake clusters that note, at each fencing, whether the lease wait had ended."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.fenced_at: list[float] = []

    def fence(
        self, alias: str, transactional_ids: Sequence[str], timeout_s: float
    ) -> FencingReport:
        self.fenced_at.append(self.clock.monotonic())
        return super().fence(alias, transactional_ids, timeout_s)


def _run(
    clock: Clock, clusters: FakeFailoverClusters, ids: list[str], force: bool = False
) -> tuple[MemoryCoordinator, FailoverRecord]:
    clusters.translations[("g1", "east", "west")] = [exact("orders", 0, 10, "east.orders", 110)]
    clusters.ends["west"] = {("east.orders", 0): 150}
    store = MemoryCoordinator(clock)
    executor = executor_on(_topology(ids), store, clusters, clock, LockTiming(ttl_s=10))
    return store, executor.start(FailoverRequest("app", "west", force=force))


def test_a_planned_failover_fences_every_declared_id_on_the_old_cluster_after_the_lease(
    clock: Clock,
) -> None:
    clusters = Watching(clock)
    _, record = _run(clock, clusters, ["orders-tx-0", "orders-tx-1"])
    assert record.state is FailoverState.COMPLETED
    assert clusters.fencings == [("east", ("orders-tx-0", "orders-tx-1"))]
    events = {e.step: e for e in record.events}
    deactivated_s = (events[StepName.DEACTIVATE].at_ms - 1_800_000_000_000) / 1000
    # Never before the lease has run out: a producer still inside it may write.
    assert clusters.fenced_at[0] - deactivated_s >= 3 * 1.01 + 1 - 0.01
    assert "fenced 2 of 2 transactional id(s) on east" in events[StepName.WAIT_LEASE].detail


def test_a_fencing_that_fails_is_recorded_and_the_failover_completes(clock: Clock) -> None:
    clusters = FakeFailoverClusters(unfenceable={"orders-tx-1"})
    _, record = _run(clock, clusters, ["orders-tx-0", "orders-tx-1"])
    assert record.state is FailoverState.COMPLETED
    wait = next(e for e in record.events if e.step is StepName.WAIT_LEASE)
    assert "fenced 1 of 2" in wait.detail
    assert "not fenced: orders-tx-1 (coordinator not available)" in wait.detail


def test_no_fencing_without_declared_ids_or_in_an_unplanned_failover(clock: Clock) -> None:
    plain = FakeFailoverClusters()
    _run(clock, plain, [])
    assert plain.fencings == []
    forced = FakeFailoverClusters()
    forced.down.add("east")
    forced.checkpoint_map[("east", "west")] = {}
    _, record = _run(Clock(), forced, ["orders-tx-0"], force=True)
    assert forced.fencings == []
    assert record.state is FailoverState.COMPLETED


def test_a_recovery_fences_the_declared_ids_on_the_lost_cluster_before_it_measures(
    clock: Clock,
) -> None:
    clusters = FakeFailoverClusters()
    clusters.down.add("east")
    clusters.checkpoint_map[("east", "west")] = {}
    clusters.replicated_map[("east", "west")] = {("orders", 0): 50}
    store, record = _run(clock, clusters, ["orders-tx-0"], force=True)
    assert record.state is FailoverState.COMPLETED
    clusters.down.clear()
    clusters.ends["east"] = {("orders", 0): 58}
    clusters.ends["west"] = {("orders", 0): 7, ("east.orders", 0): 150}
    executor = executor_on(_topology(["orders-tx-0"]), store, clusters, clock, LockTiming(ttl_s=10))
    executor.recover("app", dry_run=True)
    assert clusters.fencings == []  # a dry run changes nothing
    assert executor.recover("app").recovery is not None
    assert clusters.fencings == [("east", ("orders-tx-0",))]
