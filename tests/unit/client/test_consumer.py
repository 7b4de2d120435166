"""FailoverConsumer on the fake clock (issue 32): it follows a switch on its own, not only
inside poll/consume; it never commits to the old cluster after the lease of the answer naming it
ends; it closes its membership there by the lease's end; it commits only what the application
processed; and it reads Consul on its own connection, not the watch's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from following_fakes import (
    FakeMessage,
    RecordingClients,
    Traffic,
    consumer_class,
    follower,
    topology,
    write,
)
from memory_coordination import FakeClock, MemoryCoordinator

import drsvc.client.active_cluster as active_module
from drsvc.adapters.consul_access import ConsulAccess
from drsvc.client.active_cluster import ActiveCluster
from drsvc.client.consumer import FailoverConsumer
from drsvc.errors import CoordinatorUnavailableError, NoActiveClusterError

pytest_plugins = ["failover_fixtures"]

LEASE_S = 4.0
MARGIN_S = 0.5


@pytest.fixture
def traffic(clock: FakeClock) -> Traffic:
    return Traffic(clock)


@pytest.fixture
def records() -> dict[str, list[FakeMessage]]:
    return {"east": [FakeMessage("orders", 0, n) for n in range(6)]}


@pytest.fixture(autouse=True)
def fake_consumer(traffic: Traffic, records: dict[str, list[FakeMessage]]) -> Any:
    """The consumers the client builds: recording ones, through the port's factory."""
    fake = consumer_class(traffic, records)
    traffic.clients = RecordingClients(topology(LEASE_S), consumer_class=fake)
    return fake


def _consumer(
    store: MemoryCoordinator,
    clock: FakeClock,
    traffic: Traffic,
    config: dict[str, Any] | None = None,
) -> tuple[ActiveCluster, FailoverConsumer]:
    active = follower(store, clock, lease_s=LEASE_S)
    consumer = FailoverConsumer(
        "orders",
        active.application.topology,
        config or {"group.id": "g"},
        active=active,
        clients=traffic.clients,
    )
    consumer.subscribe(["orders"])
    return active, consumer


def _joined_east(
    store: MemoryCoordinator,
    clock: FakeClock,
    traffic: Traffic,
    config: dict[str, Any] | None = None,
) -> tuple[ActiveCluster, FailoverConsumer, float]:
    write(store, "east", 1, lease_ms=int(LEASE_S * 1000), by_failover=False)
    active, consumer = _consumer(store, clock, traffic, config)
    heard = clock.monotonic()
    active.watch_once()
    active.notify_changes()
    consumer.consume(2, 0)  # joins east, reads orders-0 at 0 and 1
    assert consumer.cluster == "east"
    return active, consumer, heard + LEASE_S


def _none_heard(store: MemoryCoordinator, active: ActiveCluster, *, notify: bool = True) -> None:
    """The executor writes none and the client hears it (and, with ``notify``, tells)."""
    write(store, None, 2, lease_ms=int(LEASE_S * 1000))
    active.watch_once()
    if notify:
        active.notify_changes()


def _none_heard_holding_two(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> tuple[FailoverConsumer, float]:
    """Joined east, the application processed 0 and 1 and holds 2 and 3 when the client hears
    none; the lease's end of the answer that named east is returned."""
    active, consumer, lease_end = _joined_east(store, clock, traffic)
    consumer.consume(2, 0)
    _none_heard(store, active)
    return consumer, lease_end


def _eventually(condition: Callable[[], bool], what: str) -> None:
    """The client's own threads (leaving a cluster) run at once on fakes; allow them a moment
    of real time."""
    deadline = time.monotonic() + 5
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within 5 s: {what}")
        time.sleep(0.01)


def _east(traffic: Traffic, what: str) -> list[tuple[str, float]]:
    return [(w, at) for c, w, at in traffic.calls if c == "east" and w.startswith(what)]


def test_a_commit_after_the_switch_is_refused_and_never_reaches_the_old_cluster(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, consumer, lease_end = _joined_east(store, clock, traffic)
    # The executor writes none while the application is busy with what it read.
    _none_heard(store, active, notify=False)
    clock.advance(30)  # the lease is long gone, the new cluster active by now
    with pytest.raises(NoActiveClusterError):
        consumer.commit()
    consumer.close()
    assert all(at < lease_end - MARGIN_S for _, at in _east(traffic, "commit"))


def test_a_commit_late_in_the_lease_is_refused(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, consumer, _ = _joined_east(store, clock, traffic)
    clock.advance(LEASE_S - MARGIN_S / 2)  # the lease still holds, but only just
    assert active.cluster == "east"
    with pytest.raises(NoActiveClusterError):
        consumer.commit()
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    assert _east(traffic, "commit") == []


def test_the_old_cluster_is_left_by_the_leases_end_without_a_poll(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, consumer, lease_end = _joined_east(store, clock, traffic)
    # Consul stops answering; the application processes and never polls.
    clock.advance(LEASE_S)
    active.notify_changes()  # the notifier wakes at the lease's deadline
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    [(_, closed_at)] = _east(traffic, "close")
    assert closed_at <= lease_end
    assert all(at < lease_end - MARGIN_S for _, at in _east(traffic, "commit"))
    assert consumer.cluster is None


def test_hearing_none_the_next_call_commits_what_was_processed_and_leaves(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    consumer, lease_end = _none_heard_holding_two(store, clock, traffic)
    time.sleep(0.5)  # the guard's ticks: it leaves the application time to finish
    assert _east(traffic, "close") == []
    assert consumer.consume(2, 0) == []  # nothing more from east; 2 and 3 are processed now
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    [(commit, at)] = _east(traffic, "commit")
    assert commit == "commit orders-0@4"
    assert at < lease_end - MARGIN_S
    assert consumer.cluster is None


def test_hearing_none_the_guard_leaves_for_an_application_that_does_not_call(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    _held_open, lease_end = _none_heard_holding_two(store, clock, traffic)  # never called again
    clock.advance(LEASE_S - LEASE_S / 4)  # the guard's point: a quarter lease before the end
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    # Only what was processed is committed; 2 and 3 are read again on the new cluster.
    assert [w for w, at in _east(traffic, "commit") if at < lease_end - MARGIN_S] == [
        "commit orders-0@2"
    ]
    assert len(_east(traffic, "commit")) == 1
    [(_, closed_at)] = _east(traffic, "close")
    assert closed_at < lease_end


def test_the_notifier_never_waits_for_the_application_thread(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, consumer, lease_end = _joined_east(store, clock, traffic)
    inside, done = threading.Event(), threading.Event()

    def application_inside_a_call() -> None:
        with consumer._lock:
            inside.set()
            done.wait(10)

    app = threading.Thread(target=application_inside_a_call)
    app.start()
    inside.wait(5)
    _none_heard(store, active, notify=False)
    started = time.monotonic()
    active.notify_changes()
    assert time.monotonic() - started < 1.0
    done.set()
    app.join(5)
    # The application went off to process for a long time: the switch is followed anyway.
    clock.advance(LEASE_S - LEASE_S / 4)
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    [(_, closed_at)] = _east(traffic, "close")
    assert closed_at < lease_end


def test_automatic_commits_are_made_within_the_lease_and_only_of_what_was_processed(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic, fake_consumer: Any
) -> None:
    config = {"group.id": "g", "enable.auto.commit": True, "auto.commit.interval.ms": 1000}
    active, consumer, _ = _joined_east(store, clock, traffic, config)
    [east] = fake_consumer.instances
    # librdkafka would commit in the background, after a switch too: this class does it.
    underlying = (
        east.config.get("enable.auto.commit"),
        east.config.get("enable.auto.offset.store"),
    )
    assert underlying == (False, False)
    clock.advance(1.0)
    active.watch_once()  # the lease renewed
    consumer.consume(2, 0)
    assert [w for w, _ in _east(traffic, "commit")] == ["commit orders-0@2"]
    clock.advance(LEASE_S)  # lapsed
    assert consumer.consume(2, 0) == []
    with pytest.raises(NoActiveClusterError):
        consumer.commit()
    _eventually(lambda: bool(_east(traffic, "close")), "east's consumer closed")
    assert len(_east(traffic, "commit")) == 1


class _RecordingConsul:
    """ConsulCoordinator's stand-in: records which instance served which call, on which
    thread; watches are answered from the in-memory store, reads of a failover record fail."""

    calls: ClassVar[list[tuple[int, str]]] = []
    store: ClassVar[MemoryCoordinator]

    def __init__(
        self, address: str, timeout_s: float = 5.0, access: ConsulAccess | None = None
    ) -> None:
        pass

    def watch(self, key: str, index: int, wait_s: float) -> Any:
        self.calls.append((id(self), "watch"))
        return self.store.watch(key, index, wait_s)

    def get(self, key: str) -> Any:
        self.calls.append((id(self), "get"))
        raise CoordinatorUnavailableError("not in this test")


def test_the_failover_record_is_not_read_on_the_watchs_http_session(
    monkeypatch: pytest.MonkeyPatch, store: MemoryCoordinator, clock: FakeClock
) -> None:
    _RecordingConsul.calls = []
    _RecordingConsul.store = store
    monkeypatch.setattr(active_module, "ConsulCoordinator", _RecordingConsul)
    write(store, "west", 3)  # made active by failover f-3: the consumer reads its cut-offs
    active = ActiveCluster(
        "orders", topology(LEASE_S), consul="127.0.0.1:8500", clock=clock.monotonic
    )
    active.start = lambda: active  # type: ignore[method-assign]
    consumer = FailoverConsumer(
        "orders", active.application.topology, {"group.id": "g"}, active=active
    )
    consumer.subscribe(["orders"])
    active.watch_once()
    consumer.consume(1, 0)
    watchers = {who for who, what in _RecordingConsul.calls if what == "watch"}
    readers = {who for who, what in _RecordingConsul.calls if what == "get"}
    assert watchers and readers
    assert not watchers & readers
