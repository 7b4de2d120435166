"""A failover of an application that fences its writes: the fence-writes step denies WRITE on
the old cluster and lifts it on the new one, a failback undoes it, and a failure rolls back with
the old cluster writable again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from failover_topologies import Clock, application, caught_up, east_west, executor_on
from memory_coordination import MemoryCoordinator

from drsvc.errors import ConfigError
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.topology.models import Topology
from failover.failover_plan import FailoverRequest, FailoverState, Outcome, StepName
from failover.kafka_acls import Grant

pytest_plugins = ["failover_fixtures"]

NS = "t"
PRINCIPAL = "User:orders-service"


@dataclass
class FakeAcls:
    """ACL bindings per cluster; ``refuse`` names clusters whose ACL calls are not authorised."""

    bindings: dict[str, set[Grant]] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)

    def delete(self, cluster: str, grants: Sequence[Grant]) -> int:
        self._check(cluster)
        present = self.bindings.setdefault(cluster, set())
        gone = present & set(grants)
        present -= gone
        return len(gone)

    def create(self, cluster: str, grants: Sequence[Grant]) -> int:
        self._check(cluster)
        self.bindings.setdefault(cluster, set()).update(grants)
        return len(grants)

    def _check(self, cluster: str) -> None:
        if cluster in self.refuse:
            raise ConfigError(f"cluster '{cluster}': creating ACLs: not authorised")

    def denied(self, cluster: str) -> set[str]:
        return {g.resource_name for g in self.bindings.get(cluster, set())}


def _topology() -> Topology:
    app = application(lease_s=1, principal=PRINCIPAL, fence_writes=True)
    return east_west(NS, app)


def _executor(clock: Clock, store: MemoryCoordinator, acls: FakeAcls) -> FailoverExecutor:
    clusters = caught_up()
    clusters.translations[("g1", "west", "east")] = clusters.translations[("g1", "east", "west")]
    return executor_on(
        _topology(), store, clusters, clock, LockTiming(ttl_s=10), write_fence_acls=acls
    )


def test_a_planned_failover_fences_the_old_cluster_and_records_the_step(clock: Clock) -> None:
    acls = FakeAcls()
    store = MemoryCoordinator(clock)
    executor = _executor(clock, store, acls)
    record = executor.start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    steps = [e.step for e in record.events]
    assert steps.index(StepName.FENCE_WRITES) == steps.index(StepName.WAIT_LEASE) + 1
    event = next(e for e in record.events if e.step is StepName.FENCE_WRITES)
    assert event.outcome is Outcome.OK
    assert f"DENY WRITE of {PRINCIPAL} on east: orders" in event.detail
    assert acls.denied("east") == {"orders"} and acls.denied("west") == set()


def test_a_fence_that_cannot_be_set_rolls_back_and_the_old_cluster_stays_writable(
    clock: Clock,
) -> None:
    acls = FakeAcls(refuse={"east"})
    store = MemoryCoordinator(clock)
    record = _executor(clock, store, acls).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.ROLLED_BACK
    failed = next(e for e in record.events if e.step is StepName.FENCE_WRITES)
    assert failed.outcome is Outcome.FAILED and "not authorised" in failed.detail
    reactivate = next(e for e in record.events if e.step is StepName.REACTIVATE)
    assert reactivate.outcome is Outcome.OK
    assert "never recorded as set: reactivating anyway" in reactivate.detail


def test_a_rollback_after_the_fence_lifts_it_on_the_old_cluster(clock: Clock) -> None:
    acls = FakeAcls()
    store = MemoryCoordinator(clock)
    clusters = caught_up()
    clusters.lagging_rounds = 10_000  # replication never catches up: the failover rolls back
    executor = executor_on(
        _topology(),
        store,
        clusters,
        clock,
        LockTiming(ttl_s=10),
        write_fence_acls=acls,
        catch_up_timeout_s=20,
    )
    record = executor.start(FailoverRequest("app", "west"))
    steps = [(e.step, e.outcome) for e in record.events]
    assert (StepName.FENCE_WRITES, Outcome.OK) in steps
    assert record.state is FailoverState.ROLLED_BACK, steps
    assert acls.denied("east") == set()
    reactivate = next(e for e in record.events if e.step is StepName.REACTIVATE)
    assert reactivate.outcome is Outcome.OK
    assert "DENY WRITE lifted on east (1 of 1 present)" in reactivate.detail


def test_a_failback_lifts_the_fence_and_fences_the_other_cluster(clock: Clock) -> None:
    acls = FakeAcls()
    store = MemoryCoordinator(clock)
    executor = _executor(clock, store, acls)
    assert executor.start(FailoverRequest("app", "west")).state is FailoverState.COMPLETED
    back = executor.start(FailoverRequest("app", "east"))
    assert back.state is FailoverState.COMPLETED
    assert acls.denied("east") == set() and acls.denied("west") == {"orders"}
    again = _executor(clock, store, acls).start(FailoverRequest("app", "west"))
    assert again.state is FailoverState.COMPLETED
    assert acls.denied("east") == {"orders"} and acls.denied("west") == set()
