"""Which values of the active key a client acts on, and how often it asks: issue 32 (a value
drsvc did not write, or an older epoch, counts as none; the watch period follows the shorter of
the document's lease and the configured one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from following_fakes import KEY, follower, write
from memory_coordination import FakeClock, MemoryCoordinator

import drsvc.client.active_cluster as active_module
from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.coordination import Delete
from drsvc.client.active_cluster import ActiveCluster
from drsvc.topology.loader import load_topology_text

pytest_plugins = ["failover_fixtures"]


def _seen(active: ActiveCluster) -> tuple[str | None, str]:
    state = active.state()
    return state.cluster, state.reason


def _west_at_5_then(
    store: MemoryCoordinator, clock: FakeClock, change: Callable[[], object]
) -> ActiveCluster:
    """A client that heard west at epoch 5, then heard what ``change`` made of the key."""
    active = follower(store, clock)
    write(store, "west", 5)
    active.watch_once()
    change()
    active.watch_once()
    return active


def test_an_absent_key_is_the_preferred_cluster_under_the_configured_lease(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock, lease_s=4)
    sent = clock.monotonic()
    active.watch_once()
    assert _seen(active) == ("east", "active")
    # The topology's 4 s, not the 15 s default: the executor's wait for an application whose
    # key was never written is the configured lease too.
    assert active.state().lease_deadline_s == pytest.approx(sent + 4.0)
    clock.advance(4.0)
    assert _seen(active) == (None, "lease-lapsed")


def test_a_plain_alias_typed_by_hand_counts_as_none_and_is_counted_once(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock)
    write(store, "east", 3)
    active.watch_once()
    store.put(KEY, "west")  # no none in between, no lease wait, no epoch
    active.watch_once()
    assert _seen(active) == (None, "not-a-document")
    active.watch_once()  # the same value again, after a wait without change
    assert active.rejected_values["not-a-document"] == 1
    store.put(KEY, "none")
    active.watch_once()
    assert _seen(active) == (None, "not-a-document")
    assert active.rejected_values["not-a-document"] == 2
    write(store, None, 4)
    active.watch_once()
    write(store, "west", 5)
    active.watch_once()
    assert _seen(active) == ("west", "active")


def test_a_lower_epoch_counts_as_none(store: MemoryCoordinator, clock: FakeClock) -> None:
    # An older document put back (a restored backup, a stale writer).
    active = _west_at_5_then(store, clock, lambda: write(store, "east", 2))
    assert _seen(active) == (None, "stale-epoch")
    assert active.rejected_values["stale-epoch"] == 1
    write(store, "west", 5)
    active.watch_once()
    assert _seen(active) == ("west", "active")


def test_a_deleted_key_after_a_document_counts_as_none(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    # By hand: an absent key reads as "preferred, epoch 0".
    active = _west_at_5_then(store, clock, lambda: store.write([Delete(KEY)]))
    assert _seen(active) == (None, "stale-epoch")


def test_one_epoch_naming_two_clusters_counts_as_none(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = _west_at_5_then(store, clock, lambda: write(store, "east", 5))
    assert _seen(active) == (None, "stale-epoch")


@pytest.mark.parametrize("lease_ms", [15_000, 2_000])
def test_the_lease_never_lapses_while_consul_answers_when_the_document_lease_is_lower(
    store: MemoryCoordinator, clock: FakeClock, lease_ms: int
) -> None:
    # The document was written under a shorter lease than the topology now configures.
    active = follower(store, clock, lease_s=60)
    write(store, "east", 3, lease_ms=lease_ms)
    active.watch_once()  # index 0: answers at once
    states = []
    for _ in range(8):
        active.watch_once()  # a blocking query that returns after its wait without a change
        states.append(_seen(active))
        clock.advance(active._wait_s / 16)  # Consul's jitter
        states.append(_seen(active))
    assert set(states) == {("east", "active")}


def test_the_watch_period_is_a_quarter_of_the_configured_lease_when_the_document_has_more(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock, lease_s=4)
    write(store, "east", 3, lease_ms=60_000)
    active.watch_once()
    before = clock.monotonic()
    active.watch_once()
    assert clock.monotonic() - before == pytest.approx(1.0)


class _RecordingConsul:
    """ConsulCoordinator's stand-in: records the timeout each one was made with, and answers
    from the in-memory store."""

    made: ClassVar[list[float]] = []
    store: ClassVar[MemoryCoordinator]

    def __init__(
        self, address: str, timeout_s: float = 5.0, access: ConsulAccess | None = None
    ) -> None:
        self.made.append(timeout_s)

    def watch(self, key: str, index: int, wait_s: float) -> Any:
        return self.store.watch(key, index, wait_s)


def test_a_watch_request_is_given_up_well_within_the_documents_lease(
    monkeypatch: pytest.MonkeyPatch, store: MemoryCoordinator, clock: FakeClock
) -> None:
    _RecordingConsul.made = []
    _RecordingConsul.store = store
    monkeypatch.setattr(active_module, "ConsulCoordinator", _RecordingConsul)
    active = ActiveCluster(
        "orders",
        load_topology_text(
            "name: shop\nclusters: {east: {bootstrap_servers: 'e:1'}, west: {bootstrap_servers: "
            "'w:1'}}\nflows: [{source: east, target: west}]\napplications: [{name: orders, "
            "groups: [g], topics: [orders], preferred: east, lease_s: 60}]\n"
        ),
        consul="127.0.0.1:8500",
        clock=clock.monotonic,
    )
    write(store, "east", 3, lease_ms=15_000)
    active.watch_once()
    active.watch_once()
    # py-consul's HTTP timeout of a blocking query: the coordinator's timeout plus the wait and
    # its jitter. A hung request must end with time left in the 15 s lease to ask again.
    wait_s = active._wait_s
    request_s = _RecordingConsul.made[-1] + wait_s * 17 / 16
    assert request_s < 15 * 0.55
