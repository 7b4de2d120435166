"""The in-memory coordinator keeps the semantics the Consul one has (see coordination's docs)."""

from __future__ import annotations

import pytest
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters.coordination import Delete, Put
from drsvc.errors import ConfigError, ConflictError, CoordinatorUnavailableError, LockLostError

TTL = 10.0
DELAY = 5.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> MemoryCoordinator:
    return MemoryCoordinator(clock)


def test_indexes_grow_across_the_store_and_puts_compare_and_set(store: MemoryCoordinator) -> None:
    assert store.get("a") is None
    assert store.put("a", "1")
    assert store.put("b", "1")
    a, b = store.get("a"), store.get("b")
    assert a is not None and b is not None
    assert (a.value, a.session) == ("1", None)
    assert b.index > a.index > 0
    assert not store.put("a", "2", index=0)  # create-only
    assert not store.put("a", "2", index=a.index + 100)  # stale index
    assert store.put("a", "2", index=a.index)
    assert store.put("c", "1", index=0)
    assert [(e.key, e.value) for e in store.list("")] == [("a", "2"), ("b", "1"), ("c", "1")]
    assert [e.key for e in store.list("b")] == ["b"]


def test_a_transaction_is_all_or_nothing_and_names_the_conflicting_key(
    store: MemoryCoordinator,
) -> None:
    store.put("x", "1")
    x = store.get("x")
    assert x is not None
    store.put("x", "changed")
    before = store.index
    with pytest.raises(ConflictError) as caught:
        store.write([Put("new", "v", 0), Put("x", "2", x.index), Delete("gone")])
    assert caught.value.key == "x"
    assert store.get("new") is None and store.index == before
    current = store.get("x")
    assert current is not None
    store.write([Put("new", "v", 0), Put("x", "2", current.index), Delete("x2")])
    written = store.get("new"), store.get("x")
    assert all(e is not None and e.index == store.index for e in written)


def test_a_conditional_delete_needs_the_current_index(store: MemoryCoordinator) -> None:
    store.put("k", "v")
    entry = store.get("k")
    assert entry is not None
    with pytest.raises(ConflictError, match="k"):
        store.write([Delete("k", entry.index + 1)])
    with pytest.raises(ConfigError):
        store.write([Delete("k", 0)])
    store.write([Delete("k", entry.index)])
    assert store.get("k") is None


def test_a_held_lock_is_refused_to_others_and_free_after_release(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None and lock.held()
    entry = store.get("lock")
    assert entry is not None and (entry.value, entry.session) == ("me", lock.session)
    clock.advance(10 * TTL)  # an alive holder renews: time does not take the lock
    assert lock.held() and lock.remaining_s() == TTL
    assert store.try_lock("lock", "other") is None
    lock.release()
    lock.release()  # idempotent
    assert not lock.held() and lock.remaining_s() == 0
    entry = store.get("lock")
    assert entry is not None and entry.session is None
    other = store.try_lock("lock", "other")  # a release starts no lock delay
    assert other is not None


def test_a_dead_holder_loses_the_lock_after_its_ttl_and_the_lock_delay(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None
    store.pause_holder(lock.session)
    clock.advance(TTL - 0.1)
    assert lock.held() and lock.remaining_s() == pytest.approx(0.1)
    assert store.try_lock("lock", "next") is None
    clock.advance(0.1)
    assert not lock.held()
    entry = store.get("lock")
    assert entry is not None and entry.session is None and entry.value == "me"
    clock.advance(DELAY - 0.1)
    assert store.try_lock("lock", "next") is None  # the lock delay
    clock.advance(0.1)
    assert store.try_lock("lock", "next") is not None


def test_consul_may_take_up_to_twice_the_ttl(clock: FakeClock) -> None:
    store = MemoryCoordinator(clock, ttl_factor=2.0)
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None
    store.pause_holder(lock.session)
    clock.advance(TTL)
    assert not lock.held()  # the holder gives up at one TTL ...
    assert store.try_lock("lock", "next") is None  # ... Consul keeps the session longer
    clock.advance(TTL + DELAY)
    assert store.try_lock("lock", "next") is not None


def test_an_alive_holder_notices_an_invalidated_session_at_once(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None
    store.expire(lock.session)
    assert not lock.held()
    with pytest.raises(LockLostError, match="lock"):
        lock.ensure_held()
    with pytest.raises(LockLostError):
        store.write([Put("k", "v")], lock=lock)
    with pytest.raises(LockLostError):
        store.write([], lock=lock)  # refused locally even with nothing to write
    assert store.get("k") is None
    lock.release()  # never raises for a lost lock
    clock.advance(DELAY)
    assert store.try_lock("lock", "next") is not None


def test_a_paused_holder_whose_session_was_invalidated_is_refused_by_the_store(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=0)
    assert lock is not None
    store.pause_holder(lock.session)
    store.expire(lock.session)
    taker = store.try_lock("lock", "taker")
    assert taker is not None
    assert lock.held()  # by its own clock it still has time
    with pytest.raises(LockLostError, match="refused"):
        store.write([Put("k", "v")], lock=lock)
    assert store.get("k") is None
    store.write([Put("k", "taker")], lock=taker)
    store.resume_holder(lock.session)
    assert not lock.held()


def test_a_resumed_holder_whose_session_survived_keeps_the_lock(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None
    store.pause_holder(lock.session)
    clock.advance(TTL / 2)
    store.resume_holder(lock.session)
    clock.advance(TTL)
    assert lock.held()
    store.write([Put("k", "v")], lock=lock)


def test_a_write_under_a_lock_checks_the_session_and_the_indexes(
    store: MemoryCoordinator,
) -> None:
    lock = store.try_lock("lock", "me")
    assert lock is not None
    store.write([Put("a", "1", 0)], lock=lock)
    with pytest.raises(ConflictError) as caught:
        store.write([Put("b", "1"), Put("a", "2", 0)], lock=lock)
    assert caught.value.key == "a" and store.get("b") is None


def test_watch_returns_at_once_on_a_change_and_else_after_the_wait(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    entry, index = store.watch("w", 0, 30)
    assert entry is None and index >= 1
    start = clock.monotonic()
    entry, again = store.watch("w", index, 30)
    assert entry is None and again == index and clock.monotonic() == start + 30
    store.put("w", "1")
    entry, index = store.watch("w", index, 30)
    assert entry is not None and entry.value == "1" and index == entry.index
    assert clock.monotonic() == start + 30
    store.put("other", "x")  # another key's change does not wake the watch
    entry, same = store.watch("w", index, 5)
    assert same == index and clock.monotonic() == start + 35
    store.write([Delete("w")])
    entry, after = store.watch("w", index, 5)
    assert entry is None and after > index and clock.monotonic() == start + 35


def test_outages_raise_coordinator_unavailable(store: MemoryCoordinator) -> None:
    store.put("k", "v")
    store.fail_next(2)
    for _ in range(2):
        with pytest.raises(CoordinatorUnavailableError):
            store.get("k")
    assert store.get("k") is not None
    store.unavailable = True
    with pytest.raises(CoordinatorUnavailableError):
        store.try_lock("lock", "me")
    with pytest.raises(CoordinatorUnavailableError):
        store.watch("k", 1, 5)
    store.unavailable = False
    assert store.put("k", "w")


def test_a_release_during_an_outage_leaves_the_session_to_expire(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    lock = store.try_lock("lock", "me", ttl_s=TTL, lock_delay_s=DELAY)
    assert lock is not None
    store.unavailable = True
    lock.release()  # best effort: does not raise
    store.unavailable = False
    assert store.try_lock("lock", "next") is None
    clock.advance(TTL + DELAY)
    assert store.try_lock("lock", "next") is not None


def test_close_releases_every_lock(store: MemoryCoordinator) -> None:
    locks = [store.try_lock(f"l{i}", "me") for i in range(3)]
    store.close()
    assert all(lock is not None and not lock.held() for lock in locks)
    assert all(e.session is None for e in store.list("l"))


def test_fake_clock_sleep_advances(clock: FakeClock) -> None:
    start = clock.monotonic()
    clock.sleep(2.5)
    clock.advance(0.5)
    assert clock.monotonic() == start + 3
    with pytest.raises(ValueError):
        clock.advance(-1)
