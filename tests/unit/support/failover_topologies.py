"""What the failover tests share: the two-cluster east/west topology (each application's fields
overridable), a fake clock with a wall time, fake clusters on which the applications' groups are
caught up, and the executor on them (the ``clock`` and ``store`` fixtures: failover_fixtures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import FakeClock

from drsvc.adapters.coordination import Coordinator
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.topology.models import Topology

#: the wall time (ms) at the fake clock's monotonic zero
WALL_ORIGIN_MS = 1_800_000_000_000


class Clock(FakeClock):
    """The fake clock with a wall time for records and the lease: the monotonic time plus
    ``wall_offset_ms``, which a test may step (NTP)."""

    def __init__(self, start: float = 1000.0) -> None:
        super().__init__(start)
        self.wall_offset_ms = 0

    def time_ms(self) -> int:
        return WALL_ORIGIN_MS + int(self.monotonic() * 1000) + self.wall_offset_ms


def application(
    name: str = "app",
    groups: tuple[str, ...] = ("g1",),
    topics: tuple[str, ...] = ("orders",),
    preferred: str = "east",
    **overrides: Any,
) -> dict[str, Any]:
    """One application of the topology document; ``overrides`` adds or replaces its fields
    (lease_s, transactional_ids, on_unknown_translation, on_recovery ...)."""
    return {
        "name": name,
        "groups": list(groups),
        "topics": list(topics),
        "preferred": preferred,
        **overrides,
    }


def east_west_document(name: str, *applications: Mapping[str, Any]) -> dict[str, Any]:
    """A topology document: clusters east and west, a flow each way copying every topic of the
    applications (one ``application()`` if none is given)."""
    apps = [dict(a) for a in applications] or [application()]
    topics = list(dict.fromkeys(t for a in apps for t in a["topics"]))
    return {
        "name": name,
        "clusters": {
            "east": {"bootstrap_servers": "e:9092"},
            "west": {"bootstrap_servers": "w:9092"},
        },
        "flows": [
            {"source": "east", "target": "west", "topics": {"include": topics}},
            {"source": "west", "target": "east", "topics": {"include": topics}},
        ],
        "applications": apps,
    }


def east_west(name: str, *applications: Mapping[str, Any]) -> Topology:
    """:func:`east_west_document`, validated."""
    return Topology.model_validate(east_west_document(name, *applications))


def orders_and_payments(**overrides: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two applications: orders (group g1, topic orders) and payments (g2, pay), both
    preferring east; ``overrides`` applies to both."""
    return (
        application("orders", ("g1",), ("orders",), **overrides),
        application("payments", ("g2",), ("pay",), **overrides),
    )


def caught_up(groups: Mapping[str, str] | None = None) -> FakeFailoverClusters:
    """Fake clusters where each group (name -> its topic, default g1 on orders) committed
    offset 10 of partition 0 on east, which is offset 110 of the copy on west, and the copy
    ends at 150."""
    fake = FakeFailoverClusters()
    for group, topic in (groups or {"g1": "orders"}).items():
        fake.translations[(group, "east", "west")] = [exact(topic, 0, 10, f"east.{topic}", 110)]
        fake.ends.setdefault("west", {})[(f"east.{topic}", 0)] = 150
    return fake


def executor_on(
    topology: Topology,
    store: Coordinator,
    clusters: FakeFailoverClusters,
    clock: Any,
    lock_timing: LockTiming | None = None,
    **options: Any,
) -> FailoverExecutor:
    """The failover executor (a 10 s lock TTL and a 5 s lock delay unless told otherwise)."""
    return FailoverExecutor(
        topology,
        store,
        clusters,
        clock=clock,
        lock_timing=lock_timing or LockTiming(ttl_s=10, lock_delay_s=5),
        **options,
    )
