"""The active documents drsvc creates from the topology when it starts."""

from __future__ import annotations

from failover_topologies import Clock
from test_failover_documents import KEY, NS, Store, fail_over, topology

from drsvc.adapters.coordination import Delete
from drsvc.runtime.failover.bootstrap import ensure_active_documents
from failover.active import ActiveDocument, decode_active
from failover.naming import app_active_key


def test_drsvc_creates_each_missing_document_at_its_preferred_cluster_and_lease() -> None:
    clock = Clock()
    store = Store(clock)
    two_apps = topology(2, apps=("app", "other"))
    existing = ActiveDocument("west", 9, "f-9", 5, lease_ms=15_000).encode()
    assert store.put(app_active_key(NS, "other"), existing)
    assert ensure_active_documents(two_apps, store, now_ms=123) == ["app"]
    entry = store.get(KEY)
    assert entry is not None
    assert decode_active(entry.value, "east") == ActiveDocument("east", 1, None, 123, 2_000)
    other = store.get(app_active_key(NS, "other"))
    assert other is not None and other.value == existing  # never overwritten
    assert ensure_active_documents(two_apps, store) == []


def test_a_document_created_after_its_key_was_deleted_keeps_the_epoch_growing() -> None:
    clock = Clock()
    store = Store(clock)
    fail_over(store, clock, 2, "west")
    store.write([Delete(KEY)])
    assert ensure_active_documents(topology(2), store, now_ms=1) == ["app"]
    entry = store.get(KEY)
    assert entry is not None
    created = decode_active(entry.value, "east")
    assert (created.cluster, created.epoch) == ("east", 3)
