"""The failover executor on an in-memory coordinator, fake clusters and a fake clock."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from failover_topologies import Clock, application, east_west, executor_on
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator

from drsvc.errors import KafkaUnavailableError, LockLostError, RefusedError
from drsvc.runtime.failover import executor as executor_module
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.replication.control import FlowControl
from drsvc.topology.models import Topology
from failover.active import ActiveDocument, decode_active, lease_wait_s
from failover.checkpoints import Checkpoint, CheckpointKey
from failover.failover_plan import FailoverKind, FailoverRequest, FailoverState
from failover.naming import (
    app_active_key,
    app_lock_key,
    flow_control_key,
    flow_stale_records_key,
)
from failover.stale_epochs import EpochWatch, StaleEntry, StaleRecords

pytest_plugins = ["failover_fixtures"]

NS = "t"
TOPIC = "orders"
REMOTE = "east.orders"


def _topology(policy: str = "refuse", on_recovery: str = "quarantine") -> Topology:
    return east_west(
        NS,
        application(
            groups=("g1", "g2"),
            topics=(TOPIC,),
            lease_s=3,
            on_unknown_translation=policy,
            on_recovery=on_recovery,
        ),
    )


class Crash(BaseException):
    """A kill -9 at a failpoint (BaseException: nothing in the executor catches it)."""


@pytest.fixture
def clusters() -> FakeFailoverClusters:
    fake = FakeFailoverClusters()
    for group, offsets in (("g1", (10, 20)), ("g2", (4, 0))):
        fake.translations[(group, "east", "west")] = [
            exact(TOPIC, p, o, REMOTE, o + 100) for p, o in enumerate(offsets)
        ]
    fake.ends["west"] = {(REMOTE, 0): 150, (REMOTE, 1): 160}
    return fake


def _executor(
    store: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    clock: Clock,
    policy: str = "refuse",
    catch_up_s: float = 30.0,
) -> FailoverExecutor:
    return executor_on(_topology(policy), store, clusters, clock, catch_up_timeout_s=catch_up_s)


def _active(store: MemoryCoordinator) -> ActiveDocument:
    entry = store.get(app_active_key(NS, "app"))
    return decode_active(None if entry is None else entry.value, "east")


def test_a_planned_failover_switches_through_none_after_the_lease(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    assert record.plan.kind is FailoverKind.PLANNED
    steps = [e.step.value for e in record.events]
    assert steps == ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
    deactivated, activated = record.events[0].at_ms, record.events[-1].at_ms
    assert activated - deactivated >= round(lease_wait_s(3) * 1000)  # stamps are whole ms
    active = _active(store)
    assert (active.cluster, active.epoch, active.failover_id) == (
        "west",
        2,
        record.plan.failover_id,
    )
    assert clusters.committed[("west", "g1")] == {(REMOTE, 0): 110, (REMOTE, 1): 120}
    assert clusters.committed[("west", "g2")] == {(REMOTE, 0): 104, (REMOTE, 1): 100}
    assert {(c.topic, c.partition, c.offset) for c in record.cutoffs} == {
        (REMOTE, 0, 150),
        (REMOTE, 1, 160),
    }
    assert all(g.exact for g in record.groups) and len(record.groups) == 4
    assert (
        store.get(app_lock_key(NS, "app")) is None or not store.get(app_lock_key(NS, "app")).session
    )  # type: ignore[union-attr]


def test_the_record_is_stored_and_listed(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    record = executor.start(FailoverRequest("app", "west"))
    assert executor.record(record.plan.failover_id) == record
    assert [r.plan.failover_id for r in executor.records()] == [record.plan.failover_id]


def test_the_same_request_id_is_one_failover(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    first = executor.start(FailoverRequest("app", "west", request_id="r-1"))
    again = executor.start(FailoverRequest("app", "west", request_id="r-1"))
    assert again == first
    assert len(executor.records()) == 1


def test_a_second_failover_while_one_runs_is_refused_naming_it(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    holder = store.try_lock(app_lock_key(NS, "app"), '{"failover_id": "f-other"}')
    assert holder is not None
    with pytest.raises(RefusedError, match="f-other"):
        _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert _active(store).cluster == "east"


def test_offsets_of_topics_the_application_does_not_list_neither_block_nor_move(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    stale = replace(exact("retired", 0, 5, "east.retired", 5), target_offset=None, reason="x")
    clusters.translations[("g1", "east", "west")].append(stale)
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    assert all(g.source_topic == TOPIC for g in record.groups)
    assert ("east.retired", 0) not in clusters.committed[("west", "g1")]


def test_a_finished_failover_whose_executor_died_holding_the_lock_does_not_block_the_next(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    done = executor.start(FailoverRequest("app", "west"))
    # Its executor was killed after recording the end, before releasing the lock.
    dead = store.try_lock(
        app_lock_key(NS, "app"), json.dumps({"failover_id": done.plan.failover_id})
    )
    assert dead is not None
    store.pause_holder(dead.session)
    assert executor.running(executor.application("app")) is None
    clusters.translations[("g1", "west", "east")] = []
    clusters.translations[("g2", "west", "east")] = []
    back = executor.start(FailoverRequest("app", "east"))
    assert back.state is FailoverState.COMPLETED
    assert _active(store).cluster == "east"


def test_refusals_change_nothing(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    for request, why in (
        (FailoverRequest("app", "east"), "already active on east"),
        (FailoverRequest("app", "mars"), "unknown cluster 'mars'"),
    ):
        with pytest.raises(RefusedError, match=why):
            executor.start(request)
    clusters.members[("west", "g2")] = 1
    with pytest.raises(RefusedError, match="g2 of application app have live members"):
        executor.start(FailoverRequest("app", "west"))
    assert store.list("drsvc/") == [] or all("lock" in e.key for e in store.list("drsvc/"))


def test_a_dry_run_writes_nothing(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    plan, targets, note = _executor(store, clusters, clock).preview(FailoverRequest("app", "west"))
    assert plan.kind is FailoverKind.PLANNED and note == ""
    assert len(targets) == 4
    assert store.list("") == []
    assert clusters.commits == []


def test_replication_that_does_not_catch_up_rolls_back_saying_what_lagged(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.lagging_rounds = 10_000
    record = _executor(store, clusters, clock, catch_up_s=20).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.ROLLED_BACK
    failed = next(e for e in record.events if e.outcome.value == "failed")
    assert failed.step.value == "wait-caught-up"
    assert "g1 orders-0" in failed.detail and "5 behind" in failed.detail
    active = _active(store)
    assert (active.cluster, active.epoch) == ("east", 2)
    assert clusters.commits == []


def test_replication_that_catches_up_in_time_completes(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.lagging_rounds = 4
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED


def test_each_poll_of_the_wait_translates_every_group_at_once(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    # One call per poll, each reading a sync topic once for all groups (no call per group).
    clusters.lagging_rounds = 4
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    assert len(clusters.group_batches) >= 3
    assert set(clusters.group_batches) == {(("g1", "g2"), "east", "west")}


def test_a_member_that_joins_on_the_target_after_planning_rolls_back(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    original = clusters.translate

    def member_joins(group: str, from_alias: str, to_alias: str):  # type: ignore[no-untyped-def]
        # The wait for replication comes after the plan checked for members.
        clusters.members[("west", "g1")] = 1
        return original(group, from_alias, to_alias)

    clusters.translate = member_joins  # type: ignore[method-assign]
    record = executor.start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.ROLLED_BACK
    failed = next(e for e in record.events if e.outcome.value == "failed")
    assert failed.step.value == "set-offsets" and "g1 has live members on west" in failed.detail
    assert _active(store).cluster == "east"


def test_an_unplanned_failover_uses_checkpoints_and_reports_what_did_not_cross(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.down.add("east")
    clusters.checkpoint_map[("east", "west")] = {
        CheckpointKey("g1", REMOTE, 0): Checkpoint(TOPIC, 10, 110, "exact"),
        CheckpointKey("g1", REMOTE, 1): Checkpoint(TOPIC, 20, 120, "exact"),
        CheckpointKey("g2", REMOTE, 0): Checkpoint(TOPIC, 4, 104, "exact"),
        CheckpointKey("other", REMOTE, 0): Checkpoint(TOPIC, 1, 1, "exact"),
    }
    clusters.replicated_map[("east", "west")] = {(TOPIC, 0): 50, (TOPIC, 1): 60}
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west", force=True))
    assert record.state is FailoverState.COMPLETED
    assert record.plan.kind is FailoverKind.UNPLANNED
    assert [e.step.value for e in record.events] == [
        "deactivate",
        "set-offsets",
        "wait-lease",
        "activate",
    ]
    assert clusters.committed[("west", "g1")] == {(REMOTE, 0): 110, (REMOTE, 1): 120}
    assert ("west", "other") not in clusters.committed
    ranges = {(u.topic, u.partition, u.first_offset, u.last_offset) for u in record.unreplicated}
    assert ranges == {(TOPIC, 0, 50, None), (TOPIC, 1, 60, None)}
    control = store.get(flow_control_key(NS, "east", "west"))
    assert control is not None and json.loads(control.value)["paused_topics"] == [TOPIC]


def test_an_unknown_translation_follows_the_application_policy(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.down.add("east")
    clusters.checkpoint_map[("east", "west")] = {
        CheckpointKey("g1", REMOTE, 0): Checkpoint(TOPIC, 10, None, "ahead-of-syncs", pending=3),
    }
    refused = _executor(store, clusters, clock, "refuse").start(
        FailoverRequest("app", "west", force=True)
    )
    assert refused.state is FailoverState.ROLLED_BACK
    assert "east.orders" in next(e for e in refused.events if e.outcome.value == "failed").detail
    clock.sleep(60)
    done = _executor(store, clusters, clock, "earliest").start(
        FailoverRequest("app", "west", force=True)
    )
    assert done.state is FailoverState.COMPLETED
    assert clusters.committed[("west", "g1")] == {(REMOTE, 0): 0}


CRASH_POINTS = [
    f"{when}-{step}"
    for step in ("deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate")
    for when in ("during", "after")
]


@pytest.fixture
def crash_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    armed: list[str] = []

    def failpoint(name: str) -> None:
        if armed and armed[0] == name:
            armed.clear()
            raise Crash(name)

    monkeypatch.setattr(executor_module, "_failpoint", failpoint)
    yield armed


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_executor_killed_at_any_point_is_resumed_to_the_same_end(
    store: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    clock: Clock,
    crash_at: list[str],
    point: str,
) -> None:
    history: list[ActiveDocument] = []
    original_write = store.write

    def watching_write(ops, *, lock=None):  # type: ignore[no-untyped-def]
        original_write(ops, lock=lock)
        history.append(_active(store))

    store.write = watching_write  # type: ignore[method-assign]
    crash_at.append(point)
    with pytest.raises(Crash):
        _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    (latest,) = _executor(store, clusters, clock).records()
    resumed = _executor(store, clusters, clock).resume(latest.plan.failover_id)
    assert resumed.state is FailoverState.COMPLETED
    ok = [e.step.value for e in resumed.events if e.outcome.value == "ok"]
    assert ok == ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
    assert _active(store).cluster == "west"
    # Never two active clusters: every change goes through none.
    clusters_seen = [d.cluster for d in history]
    for before, after in itertools.pairwise(clusters_seen):
        assert not (before and after and before != after), clusters_seen
    # Never a group moved backwards: every commit of a partition has the same offset.
    by_partition: dict[tuple[str, str, tuple[str, int]], set[int]] = {}
    for alias, group, tp, offset in clusters.commits:
        by_partition.setdefault((alias, group, tp), set()).add(offset)
    assert all(len(offsets) == 1 for offsets in by_partition.values()), by_partition


def test_an_executor_that_lost_its_lock_writes_nothing(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _executor(store, clusters, clock)
    original_sleep = clock.sleep

    def paused(seconds: float) -> None:
        # The process is paused during the lease wait long enough for its session to expire.
        lock = store.get(app_lock_key(NS, "app"))
        if lock is not None and lock.session is not None:
            store.expire(lock.session)
        original_sleep(seconds)

    clock.sleep = paused  # type: ignore[method-assign]
    with pytest.raises(LockLostError):
        executor.start(FailoverRequest("app", "west"))
    clock.sleep = original_sleep  # type: ignore[method-assign]
    (record,) = executor.records()
    assert [e.step.value for e in record.events] == ["deactivate"]
    assert _active(store).cluster is None
    assert clusters.commits == []
    clock.sleep(60)
    resumed = executor.resume(record.plan.failover_id)
    assert resumed.state is FailoverState.COMPLETED


# -- the recovery of a returned site ----------------------------------------------------------


def _lost_east(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock, policy: str
) -> FailoverExecutor:
    """East is lost with records 50..57 of partition 0 not crossed; the application is moved
    to west (unplanned), then east comes back."""
    executor = executor_on(_topology(on_recovery=policy), store, clusters, clock)
    clusters.down.add("east")
    clusters.checkpoint_map[("east", "west")] = {
        CheckpointKey("g1", REMOTE, 0): Checkpoint(TOPIC, 50, 150, "exact"),
    }
    clusters.replicated_map[("east", "west")] = {(TOPIC, 0): 50, (TOPIC, 1): 60}
    forced = FailoverRequest("app", "west", force=True)
    assert executor.start(forced).state is FailoverState.COMPLETED
    clusters.ends["east"] = {(TOPIC, 0): 58, (TOPIC, 1): 60}
    clusters.ends["west"] = {(TOPIC, 0): 7, (TOPIC, 1): 3, (REMOTE, 0): 150, (REMOTE, 1): 160}
    return executor


def _control(store: MemoryCoordinator) -> FlowControl:
    key = flow_control_key(NS, "east", "west")
    entry = store.get(key)
    assert entry is not None
    return FlowControl.from_json(entry.value, key)


def test_recovery_waits_for_the_lost_cluster_and_a_failback_waits_for_the_recovery(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _lost_east(store, clusters, clock, "quarantine")
    with pytest.raises(RefusedError, match="east does not answer yet"):
        executor.recover("app")
    clusters.down.clear()
    with pytest.raises(RefusedError, match="drsvc recover --app app"):
        executor.start(FailoverRequest("app", "east"))
    assert _active(store).cluster == "west"


def test_quarantine_lists_the_divergence_and_the_flow_skips_it(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _lost_east(store, clusters, clock, "quarantine")
    clusters.down.clear()
    preview = executor.recover("app", dry_run=True)
    assert preview.recovery is not None and not preview.recovery.completed
    assert TOPIC in _control(store).paused_topics  # the dry run changed nothing
    record = executor.recover("app")
    recovery = record.recovery
    assert recovery is not None and recovery.completed
    assert [(r.topic, r.partition, r.first_offset, r.last_offset) for r in recovery.divergence] == [
        (TOPIC, 0, 50, 57)
    ]
    assert clusters.replayed == []
    control = _control(store)
    assert TOPIC not in control.paused_topics
    assert dict(control.skip_below) == {(TOPIC, 0): 58}
    assert executor.record(record.plan.failover_id).recovery == recovery
    with pytest.raises(RefusedError, match="no unplanned failover waiting"):
        executor.recover("app")
    # Failing back, a group that would start inside the divergence starts past it.
    clusters.translations[("g1", "west", "east")] = [exact(REMOTE, 0, 150, TOPIC, 52)]
    back = executor.start(FailoverRequest("app", "east"))
    assert back.state is FailoverState.COMPLETED
    (g1,) = [g for g in back.groups if g.group == "g1"]
    assert (g1.target_offset, g1.reason) == (58, "past-recovered-divergence")
    assert clusters.committed[("east", "g1")] == {(TOPIC, 0): 58}


def test_the_divergence_starts_past_copies_whose_syncs_the_lost_worker_never_wrote(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _lost_east(store, clusters, clock, "quarantine")
    clusters.down.clear()
    # The flow's worker copied offsets 50-52 of partition 0, then lost the partition with east
    # before their sync was written: they crossed, and are not part of what did not.
    clusters.unsynced_map[("east", "west")] = {(TOPIC, 0): 53}
    recovery = executor.recover("app").recovery
    assert recovery is not None
    assert [(r.topic, r.partition, r.first_offset, r.last_offset) for r in recovery.divergence] == [
        (TOPIC, 0, 53, 57)
    ]
    assert dict(_control(store).skip_below) == {(TOPIC, 0): 58}


def test_replay_copies_the_divergence_once_even_when_interrupted(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    executor = _lost_east(store, clusters, clock, "replay")
    clusters.down.clear()
    clusters.failing_replays = 1
    with pytest.raises(KafkaUnavailableError):
        executor.recover("app")
    (pending,) = [r for r in executor.records() if r.awaits_recovery]
    assert pending.recovery is not None and pending.recovery.into == "west"
    clock.sleep(60)  # the interrupted run's lock is gone
    record = executor.recover("app")
    assert record.recovery is not None and record.recovery.replayed == 8
    offsets = [o for _f, _i, _id, _t, _p, o in clusters.replayed]
    assert offsets == list(range(50, 58))
    assert TOPIC not in _control(store).paused_topics


@pytest.mark.parametrize(("look", "ends"), [(True, (69, 79)), (False, (None, None))])
def test_the_controller_s_executor_does_not_look_at_the_lost_cluster_again(
    store: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    clock: Clock,
    look: bool,
    ends: tuple[int | None, int | None],
) -> None:
    # Forced while east still answers: the CLI's executor looks and reports exact ends; the
    # controller's (which acts only once every vantage point lost east) reports them unknown.
    clusters.ends["east"] = {(TOPIC, 0): 70, (TOPIC, 1): 80}
    clusters.replicated_map[("east", "west")] = {(TOPIC, 0): 50, (TOPIC, 1): 60}
    executor = executor_on(_topology("refuse"), store, clusters, clock, look_at_lost_cluster=look)
    record = executor.start(FailoverRequest("app", "west", force=True))
    assert record.state is FailoverState.COMPLETED
    got = {u.partition: u.last_offset for u in record.unreplicated}
    assert got == {0: ends[0], 1: ends[1]}


def test_a_planned_failover_has_the_old_cluster_s_flows_watch_its_ends_at_the_new_epoch(
    store: MemoryCoordinator, clusters: FakeFailoverClusters, clock: Clock
) -> None:
    clusters.ends["east"] = {(TOPIC, 0): 30, (TOPIC, 1): 40, ("other", 0): 5}
    executor = _executor(store, clusters, clock)
    record = executor.start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    entry = store.get(flow_control_key(NS, "east", "west"))
    assert entry is not None
    control = FlowControl.from_json(entry.value, "k")
    assert control.epoch_watch == {TOPIC: EpochWatch("app", 2, {0: 30, 1: 40})}
    assert "are counted" in record.events[-1].detail
    # Only flows out of the old cluster judge: west's records are the new epoch's.
    west = store.get(flow_control_key(NS, "west", "east"))
    assert west is None or not FlowControl.from_json(west.value, "k").epoch_watch

    # What the flow's workers list for this switch shows in the failover's report.
    listed = StaleRecords().merged(
        [
            StaleEntry("app", TOPIC, 1, 2, (41, 42)),
            StaleEntry("app", TOPIC, 1, 9, (77,)),  # another switch's
            StaleEntry("payments", TOPIC, 0, 2, (3,)),  # another application's
        ]
    )
    store.put(flow_stale_records_key(NS, "east", "west"), listed.encode())
    assert executor.stale_records(record) == [
        ("east->west", StaleEntry("app", TOPIC, 1, 2, (41, 42)))
    ]


def test_a_planned_failover_goes_on_without_a_watch_when_the_old_ends_are_unknown(
    store: MemoryCoordinator,
    clusters: FakeFailoverClusters,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = clusters.partition_ends

    def ends(alias: str, topics: object) -> object:
        if alias == "east":
            raise KafkaUnavailableError("east: timed out listing offsets")
        return real(alias, topics)  # type: ignore[arg-type]

    monkeypatch.setattr(clusters, "partition_ends", ends)
    record = _executor(store, clusters, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    entry = store.get(flow_control_key(NS, "east", "west"))
    assert entry is None or not FlowControl.from_json(entry.value, "k").epoch_watch
