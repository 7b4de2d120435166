"""What the client tests share: a topology, an active-cluster follower that runs no threads of
its own (tests call ``watch_once``/``notify_changes``), and confluent-kafka clients that record
what reached which cluster, on the fake clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.client.active_cluster import ActiveCluster
from drsvc.topology.loader import load_topology_text
from drsvc.topology.models import Topology
from failover.active import ActiveDocument
from failover.naming import app_active_key

KEY = app_active_key("shop", "orders")
SERVERS = {"127.0.0.1:9092": "east", "127.0.0.1:9093": "west"}


def topology(lease_s: float) -> Topology:
    return load_topology_text(f"""
name: shop
clusters:
  east: {{bootstrap_servers: "127.0.0.1:9092"}}
  west: {{bootstrap_servers: "127.0.0.1:9093"}}
flows:
  - {{source: east, target: west}}
  - {{source: west, target: east}}
applications:
  - {{name: orders, groups: [g], topics: [orders], preferred: east, lease_s: {lease_s}}}
""")


def write(
    store: MemoryCoordinator, cluster: str | None, epoch: int, lease_ms: int = 15_000
) -> None:
    """What the executor writes (a versioned document)."""
    store.put(KEY, ActiveDocument(cluster, epoch, f"f-{epoch}", 0, lease_ms=lease_ms).encode())


class Unstarted(ActiveCluster):
    """Runs no threads: the test takes each step."""

    def start(self) -> Unstarted:
        return self


def follower(store: MemoryCoordinator, clock: FakeClock, lease_s: float = 15.0) -> Unstarted:
    return Unstarted("orders", topology(lease_s), coordinator=store, clock=clock.monotonic)


@dataclass
class Traffic:
    """What reached each cluster, and when (fake clock)."""

    clock: FakeClock
    #: (cluster, topic, value, headers as produced)
    produced: list[tuple[str, str, Any, Any]] = field(default_factory=list)
    #: (cluster, from, to): a flush that kept delivering to the cluster over that time
    flushing: list[tuple[str, float, float]] = field(default_factory=list)
    #: (cluster, what, when): commits, closes and other consumer calls
    calls: list[tuple[str, str, float]] = field(default_factory=list)

    def producer_class(self) -> Callable[[Mapping[str, Any]], Any]:
        traffic = self

        class FakeProducer:
            """A producer whose cluster accepts nothing: a flush lasts its whole timeout."""

            def __init__(self, config: Mapping[str, Any]) -> None:
                self.cluster = SERVERS[config["bootstrap.servers"]]
                self.queued = 0

            def produce(self, topic: str, value: Any = None, key: Any = None, *args: Any,
                        **kwargs: Any) -> None:  # fmt: skip
                headers = kwargs.get("headers", args[4] if len(args) > 4 else None)
                traffic.produced.append((self.cluster, topic, value, headers))
                self.queued += 1

            def flush(self, timeout: float = -1) -> int:
                if self.queued and timeout > 0:
                    start = traffic.clock.monotonic()
                    traffic.clock.advance(timeout)
                    traffic.flushing.append((self.cluster, start, traffic.clock.monotonic()))
                return self.queued

            def poll(self, timeout: float = 0) -> int:
                return 0

            def purge(self, **_: Any) -> None:
                self.queued = 0

            def __len__(self) -> int:
                return self.queued

        return FakeProducer

    def delivering_until(self, cluster: str) -> float:
        """When the last flush to ``cluster`` ended (0: none)."""
        return max((end for c, _, end in self.flushing if c == cluster), default=0.0)
