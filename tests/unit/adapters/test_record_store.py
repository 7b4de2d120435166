"""Failover records in the coordination store (the in-memory one): chunks first, the head last,
stale chunks removed after it; readers never take a half-written record for one."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial

import pytest
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters import record_store
from drsvc.adapters.coordination import Entry, Put
from drsvc.adapters.record_store import read_record, read_records, write_record
from drsvc.errors import ConflictError, LockLostError, TooLargeError
from failover.active import ActiveDocument
from failover.errors import FormatError, RecordFormatError
from failover.failover_plan import (
    FailoverRecord,
    FailoverRequest,
    GroupTarget,
    Situation,
    plan_failover,
)
from failover.failover_record import encode_record
from failover.naming import failover_chunks_prefix, failover_record_key, failovers_prefix
from failover.record_chunks import split_record

NS = "t"
ID = "f-20260101T000000Z-1a2b3c4d"


def _record(partitions: int, failover_id: str = ID, offset: int = 1_000) -> FailoverRecord:
    situation = Situation(frozenset({"east", "west"}), ActiveDocument("east"), True)
    plan = plan_failover(FailoverRequest("orders", "west"), situation, failover_id)
    groups = tuple(
        GroupTarget(f"group-{p % 5}", "east.orders", p, offset + p, True, "orders", p)
        for p in range(partitions)
    )
    return FailoverRecord(plan, created_ms=1, groups=groups)


@pytest.fixture
def store() -> MemoryCoordinator:
    coordinator = MemoryCoordinator(FakeClock())
    coordinator.max_value_bytes = 512 * 1024  # Consul's default kv_max_value_size
    return coordinator


def _chunk_keys(store: MemoryCoordinator, failover_id: str = ID) -> list[str]:
    return [e.key for e in store.list(failover_chunks_prefix(NS, failover_id))]


def test_a_large_record_is_stored_in_chunks_and_read_back(store: MemoryCoordinator) -> None:
    record = _record(5_000)
    with pytest.raises(TooLargeError):  # as one value, as before
        store.write([Put(failover_record_key(NS, ID), encode_record(record))])
    write_record(store, NS, record, lock=None, create=True)
    assert len(_chunk_keys(store)) > 1
    assert read_record(store, NS, ID) == record
    assert read_records(store, NS) == [record]
    # the head is the last write: chunks are in place before any reader can see it
    assert store.writes[-1][-1].key == failover_record_key(NS, ID)


def test_a_small_record_stays_whole_with_no_chunks(store: MemoryCoordinator) -> None:
    record = _record(3)
    write_record(store, NS, record, lock=None)
    head = store.get(failover_record_key(NS, ID))
    assert head is not None and json.loads(head.value)["v"] == 1
    assert _chunk_keys(store) == []
    assert read_record(store, NS, ID) == record


def test_a_rewrite_with_other_positions_removes_the_old_chunks(store: MemoryCoordinator) -> None:
    write_record(store, NS, _record(5_000), lock=None)
    before = set(_chunk_keys(store))
    moved = _record(5_000, offset=7_000)
    write_record(store, NS, moved, lock=None)
    after = set(_chunk_keys(store))
    assert after and not before & after
    assert read_record(store, NS, ID) == moved
    # a rewrite with the same positions writes no chunk again
    writes = len(store.writes)
    write_record(store, NS, replace(moved, created_ms=2), lock=None)
    assert [op.key for ops in store.writes[writes:] for op in ops] == [failover_record_key(NS, ID)]
    # and one that fits whole again leaves no chunk behind
    write_record(store, NS, _record(2), lock=None)
    assert _chunk_keys(store) == []


def test_chunks_left_by_a_writer_that_died_are_removed_by_the_next_write(
    store: MemoryCoordinator,
) -> None:
    write_record(store, NS, _record(3), lock=None)
    orphan = split_record(_record(5_000, offset=9))
    assert orphan.chunk_set is not None
    key = f"{failover_chunks_prefix(NS, ID)}{orphan.chunk_set.tag}/0000"
    store.put(key, orphan.chunks[0])
    assert read_record(store, NS, ID) == _record(3)  # the head names none: not read
    write_record(store, NS, _record(4), lock=None)
    assert _chunk_keys(store) == []


def test_a_create_of_an_existing_record_conflicts_and_changes_nothing(
    store: MemoryCoordinator,
) -> None:
    write_record(store, NS, _record(3), lock=None, create=True)
    with pytest.raises(ConflictError):
        write_record(store, NS, _record(4), lock=None, create=True)
    assert read_record(store, NS, ID) == _record(3)


def test_a_record_over_the_ceiling_is_refused_before_anything_is_written(
    store: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        record_store, "split_record", partial(split_record, chunk_bytes=16 * 1024, max_chunks=4)
    )
    with pytest.raises(TooLargeError, match="ceiling"):
        write_record(store, NS, _record(5_000), lock=None)
    assert store.list(failovers_prefix(NS)) == []


def test_a_lost_lock_writes_no_chunk(store: MemoryCoordinator) -> None:
    lock = store.try_lock("lock", "me")
    assert lock is not None
    store.expire(lock.session)
    with pytest.raises(LockLostError):
        write_record(store, NS, _record(5_000), lock=lock)
    assert store.list(failovers_prefix(NS)) == []


class _RewrittenWhileRead(MemoryCoordinator):
    """Rewrites the record once (:attr:`rewrite`), between a reader's read of the head and its
    listing of the chunks the head names."""

    rewrite: FailoverRecord | None = None

    def list(self, prefix: str) -> list[Entry]:
        if self.rewrite is not None and prefix != failover_chunks_prefix(NS, ID):
            rewrite, self.rewrite = self.rewrite, None
            write_record(self, NS, rewrite, lock=None)
        return super().list(prefix)


def test_a_reader_that_meets_a_rewrite_reads_again() -> None:
    store = _RewrittenWhileRead(FakeClock())
    first, second = _record(5_000), _record(5_000, offset=5)
    write_record(store, NS, first, lock=None)
    store.rewrite = second
    assert read_record(store, NS, ID) == second
    assert store.rewrite is None


def test_a_damaged_record_is_refused_and_listings_skip_it(store: MemoryCoordinator) -> None:
    write_record(store, NS, _record(5_000), lock=None)
    other = "f-20260101T000001Z-5e6f7a8b"
    write_record(store, NS, _record(2, other), lock=None)
    first = _chunk_keys(store)[0]
    entry = store.get(first)
    assert entry is not None
    store.put(first, entry.value.replace("group-1", "group-9", 1))
    with pytest.raises(RecordFormatError, match="digest"):
        read_record(store, NS, ID)
    skipped: list[tuple[str, FormatError]] = []
    assert [
        r.plan.failover_id for r in read_records(store, NS, lambda k, e: skipped.append((k, e)))
    ] == [other]
    assert [k for k, _ in skipped] == [failover_record_key(NS, ID)]
