"""ConsulCoordinator against a real Consul agent (the session's local environment).

Every test works under its own key prefix, so it never sees another test's keys. Sessions use
short TTLs: the local agent allows TTLs down to 1 s.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests

from drsvc.adapters.consul_coordination import ConsulCoordinator, ConsulLock
from drsvc.adapters.coordination import Delete, Put
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.errors import ConflictError, LockLostError


@pytest.fixture(scope="module")
def consul_addr(cluster_pair: EnvironmentInfo) -> str:
    # The session's Consul (one server per site plus a witness); the clusters are not used.
    addr = cluster_pair.consul_http_addr
    assert addr is not None
    return addr


@pytest.fixture
def prefix() -> str:
    return f"drsvc-test/coordination-{uuid.uuid4().hex[:12]}/"


@pytest.fixture
def coordinator(consul_addr: str) -> Iterator[ConsulCoordinator]:
    store = ConsulCoordinator(consul_addr)
    try:
        yield store
    finally:
        store.close()


def _destroy(consul_addr: str, session: str) -> None:
    """Destroy a session behind its holder's back."""
    answer = requests.put(f"http://{consul_addr}/v1/session/destroy/{session}", timeout=5)
    answer.raise_for_status()


def _wait_until(condition: Callable[[], bool], timeout_s: float) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, "condition not met in time"
        time.sleep(0.05)
    return time.monotonic() - started


class _Deaf:
    """A lock whose holder believes it still holds it (as one paused past its TTL does)."""

    def __init__(self, lock: ConsulLock) -> None:
        self.key = lock.key
        self.session = lock.session

    def held(self) -> bool:
        return True

    def remaining_s(self) -> float:
        return 1.0

    def ensure_held(self) -> None:
        pass

    def release(self) -> None:
        pass


def test_get_put_compare_and_set_and_list(coordinator: ConsulCoordinator, prefix: str) -> None:
    key = prefix + "a"
    assert coordinator.get(key) is None
    assert coordinator.put(key, "één")
    entry = coordinator.get(key)
    assert entry is not None and (entry.key, entry.value, entry.session) == (key, "één", None)
    assert not coordinator.put(key, "x", index=0)
    assert not coordinator.put(key, "x", index=entry.index + 1000)
    assert coordinator.put(key, "two", index=entry.index)
    assert coordinator.put(prefix + "c", "3", index=0)
    assert coordinator.put(prefix + "b", "2")
    listed = coordinator.list(prefix)
    assert [(e.key, e.value) for e in listed] == [
        (key, "two"),
        (prefix + "b", "2"),
        (prefix + "c", "3"),
    ]
    assert listed[0].index > entry.index
    assert coordinator.list(prefix + "nothing") == []


def test_a_transaction_is_all_or_nothing_and_names_the_conflicting_key(
    coordinator: ConsulCoordinator, prefix: str
) -> None:
    coordinator.put(prefix + "x", "1")
    coordinator.put(prefix + "gone", "1")
    stale = coordinator.get(prefix + "x")
    assert stale is not None
    coordinator.put(prefix + "x", "changed")
    with pytest.raises(ConflictError) as caught:
        coordinator.write(
            [
                Put(prefix + "new", "v", 0),
                Delete(prefix + "gone"),
                Put(prefix + "x", "2", stale.index),
            ]
        )
    assert caught.value.key == prefix + "x"
    assert coordinator.get(prefix + "new") is None and coordinator.get(prefix + "gone") is not None
    current = coordinator.get(prefix + "x")
    gone = coordinator.get(prefix + "gone")
    assert current is not None and gone is not None
    with pytest.raises(ConflictError) as caught:
        coordinator.write([Delete(prefix + "gone", gone.index + 1000)])
    assert caught.value.key == prefix + "gone"
    coordinator.write(
        [
            Put(prefix + "new", "v", 0),
            Delete(prefix + "gone", gone.index),
            Put(prefix + "x", "2", current.index),
        ]
    )
    assert [(e.key, e.value) for e in coordinator.list(prefix)] == [
        (prefix + "new", "v"),
        (prefix + "x", "2"),
    ]
    coordinator.write([])


def test_a_lock_is_exclusive_renewed_and_free_again_after_release(
    coordinator: ConsulCoordinator, consul_addr: str, prefix: str
) -> None:
    key = prefix + "lock"
    lock = coordinator.try_lock(key, "first", ttl_s=1, lock_delay_s=1)
    assert lock is not None and lock.held() and 0 < lock.remaining_s() <= 1
    other = ConsulCoordinator(consul_addr)
    try:
        assert other.try_lock(key, "second", ttl_s=1, lock_delay_s=0) is None
        # Past twice the TTL the renewal thread has kept the session alive.
        time.sleep(2.5)
        assert lock.held()
        entry = coordinator.get(key)
        assert entry is not None and (entry.value, entry.session) == ("first", lock.session)
        coordinator.write([Put(prefix + "guarded", "v")], lock=lock)
        lock.release()
        lock.release()
        assert not lock.held() and lock.remaining_s() == 0
        with pytest.raises(LockLostError):
            coordinator.write([Put(prefix + "guarded", "w")], lock=lock)
        entry = coordinator.get(key)
        assert entry is not None and entry.session is None
        # A release (key first, then the session) starts no lock delay.
        second = other.try_lock(key, "second", ttl_s=1, lock_delay_s=0)
        assert second is not None
    finally:
        other.close()
    entry = coordinator.get(key)
    assert entry is not None and entry.session is None and entry.value == "second"


def test_a_lost_lock_is_noticed_and_refused(
    coordinator: ConsulCoordinator, consul_addr: str, prefix: str
) -> None:
    lock = coordinator.try_lock(prefix + "lock", "me", ttl_s=1.5, lock_delay_s=0)
    assert lock is not None
    _destroy(consul_addr, lock.session)
    took = _wait_until(lambda: not lock.held(), timeout_s=3)
    assert took < 1.5  # noticed by the next renewal (every TTL/3), not by running out
    with pytest.raises(LockLostError, match="lock"):
        lock.ensure_held()
    with pytest.raises(LockLostError):
        coordinator.write([Put(prefix + "k", "v")], lock=lock)
    assert coordinator.get(prefix + "k") is None
    lock.release()  # never raises for a lost lock


def test_consul_itself_refuses_a_write_whose_session_was_lost(
    coordinator: ConsulCoordinator, consul_addr: str, prefix: str
) -> None:
    key = prefix + "lock"
    lock = coordinator.try_lock(key, "me", ttl_s=30, lock_delay_s=0)
    assert lock is not None
    _destroy(consul_addr, lock.session)
    deaf = _Deaf(lock)  # the local check passes: only Consul's check-session can refuse
    with pytest.raises(LockLostError, match=key):
        coordinator.write([Put(prefix + "k", "v")], lock=deaf)
    assert coordinator.get(prefix + "k") is None
    # Someone else takes the key; the old session still cannot write under it.
    taker = coordinator.try_lock(key, "taker", ttl_s=30, lock_delay_s=0)
    assert taker is not None
    with pytest.raises(LockLostError):
        coordinator.write([Put(prefix + "k", "v")], lock=deaf)
    coordinator.write([Put(prefix + "k", "taker")], lock=taker)
    assert [e.value for e in coordinator.list(prefix + "k")] == ["taker"]
    # The same through the real lock before its renewal noticed: Consul's answer marks it lost.
    taker_session = taker.session
    _destroy(consul_addr, taker_session)
    assert taker.held()
    with pytest.raises(LockLostError, match="refused"):
        coordinator.write([Put(prefix + "k", "late")], lock=taker)
    assert not taker.held()
    entry = coordinator.get(prefix + "k")
    assert entry is not None and entry.value == "taker"


def test_the_lock_delay_keeps_a_lost_lock_from_being_taken(
    coordinator: ConsulCoordinator, consul_addr: str, prefix: str
) -> None:
    key = prefix + "lock"
    lock = coordinator.try_lock(key, "me", ttl_s=10, lock_delay_s=2)
    assert lock is not None
    _destroy(consul_addr, lock.session)
    destroyed = time.monotonic()
    assert coordinator.try_lock(key, "next", ttl_s=10, lock_delay_s=0) is None
    taken: list[ConsulLock] = []

    def take() -> bool:
        got = coordinator.try_lock(key, "next", ttl_s=10, lock_delay_s=0)
        if got is not None:
            taken.append(got)
        return got is not None

    _wait_until(take, timeout_s=5)
    waited = time.monotonic() - destroyed
    assert 1.8 <= waited < 3.5, waited


def test_a_dead_holder_is_invalidated_after_one_to_two_ttls(
    coordinator: ConsulCoordinator, consul_addr: str, prefix: str
) -> None:
    # A holder that never renews: a session with a 1 s TTL made directly.
    key = prefix + "lock"
    answer = requests.put(
        f"http://{consul_addr}/v1/session/create",
        json={"TTL": "1s", "LockDelay": "0s", "Behavior": "release"},
        timeout=5,
    )
    answer.raise_for_status()
    session = answer.json()["ID"]
    acquired = requests.put(
        f"http://{consul_addr}/v1/kv/{key}?acquire={session}", data="dead", timeout=5
    )
    assert acquired.json() is True
    created = time.monotonic()
    taken: list[ConsulLock] = []

    def take() -> bool:
        got = coordinator.try_lock(key, "next", ttl_s=5, lock_delay_s=0)
        if got is not None:
            taken.append(got)
        return got is not None

    _wait_until(take, timeout_s=5)
    waited = time.monotonic() - created
    assert 0.9 <= waited < 3.0, waited


def test_watch_returns_on_a_change_and_after_the_wait_without_one(
    consul_addr: str, prefix: str
) -> None:
    # A client timeout shorter than the wait: a blocking query must not time out.
    coordinator = ConsulCoordinator(consul_addr, timeout_s=0.5)
    key = prefix + "watched"
    entry, index = coordinator.watch(key, 0, 5)
    assert entry is None and index >= 1
    started = time.monotonic()
    entry, again = coordinator.watch(key, index, 1.5)
    took = time.monotonic() - started
    assert entry is None and again == index
    assert 1.4 <= took < 1.5 * 17 / 16 + 0.5, took

    writer = threading.Timer(0.5, lambda: coordinator.put(key, "changed"))
    writer.start()
    started = time.monotonic()
    try:
        entry, index = coordinator.watch(key, index, 5)
    finally:
        writer.join()
    took = time.monotonic() - started
    assert entry is not None and entry.value == "changed" and index == entry.index
    assert 0.4 <= took < 2.5, took
    coordinator.put(prefix + "elsewhere", "x")
    started = time.monotonic()
    entry, same = coordinator.watch(key, index, 1)
    assert entry is not None and same == index and time.monotonic() - started >= 0.9
