"""What a failover request may start: planned stays planned, preconditions hold, request ids
belong to one application and one request, and a planned failover that no wait can make exact
is refused before the application is deactivated; a planned one also waits for its groups to
leave the old cluster."""

from __future__ import annotations

from dataclasses import replace

import pytest
from failover_topologies import Clock, caught_up, east_west, executor_on, orders_and_payments
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator

from drsvc.errors import ConfigError, RefusedError, RequestMismatchError
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.translation.group_translation import Unrouted
from drsvc.topology.models import Topology
from failover.active import decode_active, lease_wait_s
from failover.failover_plan import FailoverKind, FailoverRequest, FailoverState
from failover.naming import app_active_key

pytest_plugins = ["failover_fixtures"]

NS = "req"


def topology() -> Topology:
    return east_west(NS, *orders_and_payments())


@pytest.fixture
def clusters() -> FakeFailoverClusters:
    return caught_up({"g1": "orders", "g2": "pay"})


@pytest.fixture
def executor(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> FailoverExecutor:
    return executor_on(topology(), store, clusters, clock, catch_up_timeout_s=30)


def _active(store: MemoryCoordinator, app: str) -> str | None:
    entry = store.get(app_active_key(NS, app))
    return decode_active(None if entry is None else entry.value, "east").cluster


def written(store: MemoryCoordinator) -> list[str]:
    """Keys written, other than the applications' locks."""
    return [e.key for e in store.list("") if not e.key.endswith("/lock")]


# -- planned stays planned ---------------------------------------------------------------------


def test_without_force_an_old_cluster_that_does_not_answer_is_a_refusal_not_unplanned(
    executor: FailoverExecutor, store: MemoryCoordinator, clusters: FakeFailoverClusters
) -> None:
    clusters.down.add("east")
    for attempt in (executor.preview, executor.start):
        with pytest.raises(RefusedError, match=r"east does not answer.*--force runs an unplan"):
            attempt(FailoverRequest("orders", "west"))
    assert written(store) == [] and clusters.commits == []
    forced = executor.start(FailoverRequest("orders", "west", force=True))
    assert (forced.state, forced.plan.kind) == (FailoverState.COMPLETED, FailoverKind.UNPLANNED)


# -- request ids -------------------------------------------------------------------------------


def test_a_request_id_belongs_to_its_application(
    executor: FailoverExecutor, store: MemoryCoordinator
) -> None:
    orders = executor.start(FailoverRequest("orders", "west", request_id="r-42"))
    payments = executor.start(FailoverRequest("payments", "west", request_id="r-42"))
    assert payments.plan.app == "payments"
    assert payments.plan.failover_id != orders.plan.failover_id
    assert (_active(store, "orders"), _active(store, "payments")) == ("west", "west")
    # The same request again is the same failover, for each application.
    again = executor.start(FailoverRequest("payments", "west", request_id="r-42"))
    assert again.plan.failover_id == payments.plan.failover_id


def test_a_request_id_used_for_another_request_of_the_application_is_refused(
    executor: FailoverExecutor, store: MemoryCoordinator
) -> None:
    first = executor.start(FailoverRequest("orders", "west", request_id="r-7"))
    assert first.state is FailoverState.COMPLETED
    started = f"r-7 of application orders started failover {first.plan.failover_id}"
    with pytest.raises(RefusedError, match=f"{started}, a different request") as refused:
        executor.start(FailoverRequest("orders", "east", request_id="r-7"))
    assert type(refused.value) is RequestMismatchError  # HTTP 409
    assert _active(store, "orders") == "west"
    assert len(executor.records()) == 1


@pytest.mark.parametrize("request_id", ["../apps/payments/failover", "..", "a/b", ".hidden"])
def test_a_request_id_that_is_not_a_plain_name_is_refused_before_anything_is_read_or_written(
    executor: FailoverExecutor, store: MemoryCoordinator, request_id: str
) -> None:
    executor.start(FailoverRequest("payments", "west"))
    before = {e.key: e.value for e in store.list("")}
    with pytest.raises(ConfigError, match="request id"):
        executor.start(FailoverRequest("orders", "west", request_id=request_id))
    assert {e.key: e.value for e in store.list("")} == before
    assert _active(store, "orders") == "east"


# -- the plan check: refuse what no wait makes exact ------------------------------------------


@pytest.mark.parametrize(
    "reason", ["before-syncs", "log-truncated", "replication-gap", "sync-conflict"]
)
def test_a_translation_no_wait_can_make_exact_is_refused_before_deactivate(
    executor: FailoverExecutor,
    store: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    reason: str,
) -> None:
    stuck = replace(exact("orders", 3, 0, "east.orders", 0), target_offset=None, reason=reason)
    clusters.translations[("g1", "east", "west")].append(stuck)
    with pytest.raises(RefusedError, match=f"group g1 orders-3 at 0: {reason}"):
        executor.start(FailoverRequest("orders", "west"))
    assert written(store) == [] and clusters.commits == []
    with pytest.raises(RefusedError, match="cannot become exact by waiting"):
        executor.preview(FailoverRequest("orders", "west"))


def test_a_topic_no_flow_copies_is_refused_before_deactivate(
    executor: FailoverExecutor, store: MemoryCoordinator, clusters: FakeFailoverClusters
) -> None:
    original = clusters.translate

    def unrouted(group: str, from_alias: str, to_alias: str):  # type: ignore[no-untyped-def]
        found = original(group, from_alias, to_alias)
        if found is None:
            return None
        return replace(found, unrouted=(Unrouted("orders", (1,), "east->west excludes it"),))

    clusters.translate = unrouted  # type: ignore[method-assign]
    with pytest.raises(RefusedError, match=r"group g1 orders: no route \(east->west excludes"):
        executor.start(FailoverRequest("orders", "west"))
    assert written(store) == []


def test_a_translation_that_waiting_fixes_is_waited_for(
    executor: FailoverExecutor, clusters: FakeFailoverClusters
) -> None:
    clusters.lagging_rounds = 3  # not replicated yet: waiting fixes it
    record = executor.start(FailoverRequest("orders", "west"))
    assert record.state is FailoverState.COMPLETED


# -- members on the old cluster ----------------------------------------------------------------


def test_a_planned_failover_rolls_back_naming_the_members_that_stay_on_the_old_cluster(
    executor: FailoverExecutor, store: MemoryCoordinator, clusters: FakeFailoverClusters
) -> None:
    clusters.members[("east", "g1")] = 1  # a consumer that never leaves its group on east
    record = executor.start(FailoverRequest("orders", "west"))
    assert record.state is FailoverState.ROLLED_BACK
    failed = next(e for e in record.events if e.outcome.value == "failed")
    assert failed.step.value == "wait-caught-up"
    assert "group g1 has 1 member(s) on east: g1-member-0 (client id app, host /10.0.0.1)" in (
        failed.detail
    )
    assert clusters.commits == []
    assert _active(store, "orders") == "east"


def test_a_planned_failover_goes_on_once_the_members_left_the_old_cluster(
    executor: FailoverExecutor, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.members[("east", "g1")] = 1
    original_sleep = clock.sleep
    slept: list[float] = []

    def member_leaves_after_a_while(seconds: float) -> None:
        slept.append(seconds)
        # Past the lease wait, while the executor waits for the groups: its session times out.
        if sum(slept) > lease_wait_s(15) + 3:
            clusters.members[("east", "g1")] = 0
        original_sleep(seconds)

    clock.sleep = member_leaves_after_a_while  # type: ignore[method-assign]
    record = executor.start(FailoverRequest("orders", "west"))
    assert record.state is FailoverState.COMPLETED
    caught_up = next(e for e in record.events if e.step.value == "wait-caught-up")
    deactivated = record.events[0]
    assert caught_up.at_ms - deactivated.at_ms >= (lease_wait_s(15) + 3) * 1000
    assert clusters.committed[("west", "g1")] == {("east.orders", 0): 110}
