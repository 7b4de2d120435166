"""The lease wait between none and the new cluster, against a real client on the fake clock.

Each test lets a client (:class:`drsvc.client.active_cluster.ActiveCluster`, the class
applications use) read the old cluster at the worst moment: just before the write of none
commits. Whatever happens to that write (a slow commit, an acknowledgement that never arrives)
or to the executors' wall clocks (a step, a resumer on another host whose clock is ahead), no
client may still hold the old cluster when the new one is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest
from failover_topologies import Clock, application, caught_up, east_west, executor_on
from memory_coordination import MemoryCoordinator

from drsvc.adapters.coordination import Lock, Put, WriteOp
from drsvc.client.active_cluster import ActiveCluster, ActiveState
from drsvc.errors import CoordinatorUnavailableError
from drsvc.runtime.failover import executor as executor_module
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.topology.models import Topology
from failover.active import lease_wait_s
from failover.failover_plan import FailoverRequest, FailoverState
from failover.naming import app_active_key

NS = "lease"
KEY = app_active_key(NS, "app")
#: sums of the fake clock's float seconds are off by far less than this
FLOAT_ERROR_S = 1e-6


def _topology(lease_s: float = 15) -> Topology:
    return east_west(NS, application(lease_s=lease_s))


# One host's clocks (failover_topologies.Clock): monotonic time moves with the fake clock; the
# wall clock is that plus an offset that tests step (NTP) or set per host (another machine's).


class OtherHost:
    """Another machine sharing the same real time: its own monotonic origin, and a wall clock
    ``ahead_ms`` ahead of the first host's."""

    def __init__(self, shared: Clock, ahead_ms: int) -> None:
        self._shared = shared
        self._ahead_ms = ahead_ms

    def time_ms(self) -> int:
        return self._shared.time_ms() + self._ahead_ms

    def monotonic(self) -> float:
        return self._shared.monotonic() + 7_000.0

    def sleep(self, seconds: float) -> None:
        self._shared.sleep(seconds)


def _written(ops: Sequence[WriteOp]) -> list[str | None]:
    """The active clusters a transaction writes (None: none)."""
    return [json.loads(op.value)["cluster"] for op in ops if isinstance(op, Put) and op.key == KEY]


class Consul(MemoryCoordinator):
    """The store, with a client that reads the key just before the write of none commits, and
    a record of what that client held whenever a cluster was written."""

    def __init__(self, clock: Clock, *, commit_delay_s: float, ack_lost: bool = False) -> None:
        super().__init__(clock)
        self._fake_clock = clock
        self.commit_delay_s = commit_delay_s
        self.ack_lost = ack_lost
        self.client = ActiveCluster("app", _topology(), coordinator=self, clock=clock.monotonic)
        self.wall_step_ms = 0
        #: (monotonic time, cluster written, what the client held then)
        self.cluster_writes: list[tuple[float, str, ActiveState]] = []

    def write(self, ops: Sequence[WriteOp], *, lock: Lock | None = None) -> None:
        written = _written(ops)
        if None in written and self.commit_delay_s:
            delay, self.commit_delay_s = self.commit_delay_s, 0.0
            # Consul holds the write (a leader election holds RPCs for up to 7 s); just before
            # it commits, the client's watch answers with the old value.
            self._fake_clock.advance(delay - 0.05)
            self.client.watch_once()
            self._fake_clock.advance(0.05)
            super().write(ops, lock=lock)
            self._fake_clock.wall_offset_ms += self.wall_step_ms
            if self.ack_lost:
                raise CoordinatorUnavailableError("the transaction timed out (it committed)")
            return
        for cluster in written:
            if cluster is not None:
                now = self._fake_clock.monotonic()
                self.cluster_writes.append((now, cluster, self.client.state()))
        super().write(ops, lock=lock)


class Crash(BaseException):
    """A kill -9 at a failpoint."""


@pytest.fixture
def crash_after_deactivate(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def failpoint(name: str) -> None:
        if name == "after-deactivate":
            raise Crash(name)

    monkeypatch.setattr(executor_module, "_failpoint", failpoint)
    yield
    monkeypatch.undo()


def _executor(store: Consul, clock: object) -> FailoverExecutor:
    return executor_on(_topology(), store, caught_up(), clock)


@pytest.mark.parametrize(("delay_s", "planned"), [(0.1, True), (5.0, True), (5.0, False)])
def test_a_slow_commit_of_none_never_leaves_a_client_on_the_old_cluster(
    delay_s: float, planned: bool
) -> None:
    clock = Clock()
    store = Consul(clock, commit_delay_s=delay_s)
    clusters = caught_up()
    if not planned:
        clusters.down.add("east")
    executor = executor_on(_topology(), store, clusters, clock)
    record = executor.start(FailoverRequest("app", "west", force=not planned))
    assert record.state is FailoverState.COMPLETED
    (at, _cluster, held) = store.cluster_writes[-1]
    assert held.cluster is None, f"client on {held.cluster} until {held.lease_deadline_s:.2f}"
    # The client read east through a request sent 0.05 s before the commit; its lease ran
    # until then + 15 s, and west was written only after that.
    heard_at = 1000.0 + delay_s - 0.05
    assert at >= heard_at + 15.0


def test_a_wall_clock_step_during_the_wait_does_not_shorten_it() -> None:
    clock = Clock()
    store = Consul(clock, commit_delay_s=0.1)
    store.wall_step_ms = 5_000  # NTP steps the executor's wall clock just after the commit
    record = _executor(store, clock).start(FailoverRequest("app", "west"))
    assert record.state is FailoverState.COMPLETED
    _at, _cluster, held = store.cluster_writes[-1]
    assert held.cluster is None, f"client on {held.cluster} until {held.lease_deadline_s:.2f}"


@pytest.mark.usefixtures("crash_after_deactivate")
def test_a_resumer_whose_wall_clock_is_ahead_waits_a_full_lease() -> None:
    clock = Clock()
    store = Consul(clock, commit_delay_s=0.1)
    with pytest.raises(Crash):
        _executor(store, clock).start(FailoverRequest("app", "west"))
    (record,) = _executor(store, clock).records()
    # Another host, whose wall clock is 10 s ahead, resumes at once.
    elsewhere = OtherHost(clock, ahead_ms=10_000)
    resumed_at = clock.monotonic()
    done = _executor(store, elsewhere).resume(record.plan.failover_id)
    assert done.state is FailoverState.COMPLETED
    at, _cluster, held = store.cluster_writes[-1]
    assert held.cluster is None, f"client on {held.cluster} until {held.lease_deadline_s:.2f}"
    assert at - resumed_at >= lease_wait_s(15) - FLOAT_ERROR_S


def test_a_write_of_none_whose_acknowledgement_was_lost_is_waited_out_from_the_retry() -> None:
    clock = Clock()
    # The transaction is held 5 s and commits, but the executor's request timed out first.
    store = Consul(clock, commit_delay_s=5.0, ack_lost=True)
    executor = _executor(store, clock)
    with pytest.raises(CoordinatorUnavailableError):
        executor.start(FailoverRequest("app", "west"))
    (record,) = executor.records()
    resumed_at = clock.monotonic()
    done = executor.resume(record.plan.failover_id)
    assert done.state is FailoverState.COMPLETED
    at, _cluster, held = store.cluster_writes[-1]
    assert held.cluster is None, f"client on {held.cluster} until {held.lease_deadline_s:.2f}"
    assert at - resumed_at >= lease_wait_s(15) - FLOAT_ERROR_S
