"""The active document the executor writes: its lease follows the topology, its epoch never
goes back (the documents drsvc creates at start: test_failover_bootstrap)."""

from __future__ import annotations

from failover_topologies import Clock, application, caught_up, east_west, executor_on
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator

from drsvc.adapters.coordination import Lock, Put, WriteOp
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.topology.models import Topology
from failover.active import ActiveDocument, decode_active, lease_wait_s
from failover.failover_plan import FailoverRequest, FailoverState
from failover.naming import app_active_key

NS = "docs"
KEY = app_active_key(NS, "app")


def topology(lease_s: float, apps: tuple[str, ...] = ("app",)) -> Topology:
    return east_west(
        NS,
        *(
            application(name, ("g1",), lease_s=lease_s)
            if name == "app"
            else application(name, (f"{name}-g",), preferred="west", lease_s=lease_s)
            for name in apps
        ),
    )


class Store(MemoryCoordinator):
    """Keeps every document written to the application's key, with the monotonic time its
    write was acknowledged."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self._at = clock
        self.documents: list[tuple[float, ActiveDocument]] = []

    def write(self, ops: list[WriteOp], *, lock: Lock | None = None) -> None:  # type: ignore[override]
        super().write(ops, lock=lock)
        for op in ops:
            if isinstance(op, Put) and op.key == KEY:
                self.documents.append((self._at.monotonic(), decode_active(op.value, "east")))


def _clusters() -> FakeFailoverClusters:
    fake = caught_up()
    fake.translations[("g1", "west", "east")] = [exact("east.orders", 0, 110, "orders", 10)]
    return fake


def _executor(store: Store, clock: Clock, lease_s: float) -> FailoverExecutor:
    return executor_on(topology(lease_s), store, _clusters(), clock)


def fail_over(store: Store, clock: Clock, lease_s: float, to: str) -> None:
    record = _executor(store, clock, lease_s).start(FailoverRequest("app", to))
    assert record.state is FailoverState.COMPLETED, record.events
    clock.sleep(60)  # past the lock delay, as a later failover would be


def test_without_a_key_the_wait_is_the_configured_lease_not_the_default() -> None:
    clock = Clock()
    store = Store(clock)
    fail_over(store, clock, 2, "west")
    (none_at, none), (west_at, west) = store.documents
    assert (none.cluster, none.lease_ms, west.cluster, west.lease_ms) == (None, 2000, "west", 2000)
    # A planned failover whose groups are caught up: the whole gap is the lease wait.
    assert abs((west_at - none_at) - lease_wait_s(2)) < 1e-6


def test_the_lease_follows_the_topology_once_the_old_lease_has_run_out() -> None:
    clock = Clock()
    store = Store(clock)
    fail_over(store, clock, 15, "west")
    fail_over(store, clock, 2, "east")  # the topology now says 2 s
    leases = [(d.cluster, d.lease_ms) for _at, d in store.documents]
    # Clients of west may hold 15 s: none keeps 15 s, and east gets the 2 s configured.
    assert leases == [(None, 15_000), ("west", 15_000), (None, 15_000), ("east", 2_000)]
    (none_at, _), (east_at, _) = store.documents[2:]
    assert east_at - none_at >= lease_wait_s(15) - 1e-6
    fail_over(store, clock, 2, "west")
    assert [(d.cluster, d.lease_ms) for _at, d in store.documents[4:]] == [
        (None, 2_000),
        ("west", 2_000),
    ]


def test_a_value_written_by_hand_does_not_take_the_epoch_back() -> None:
    clock = Clock()
    store = Store(clock)
    fail_over(store, clock, 2, "west")
    fail_over(store, clock, 2, "east")
    assert [d.epoch for _at, d in store.documents] == [1, 2, 3, 4]
    assert store.put(KEY, "east")  # an operator writes a plain alias
    fail_over(store, clock, 2, "west")
    assert [(d.cluster, d.epoch) for _at, d in store.documents[4:]] == [(None, 5), ("west", 6)]
    store.put(KEY, ActiveDocument("west", 1, "f-hand", 0).encode())  # or a lower epoch
    fail_over(store, clock, 2, "east")
    assert [(d.cluster, d.epoch) for _at, d in store.documents[6:]] == [(None, 7), ("east", 8)]
