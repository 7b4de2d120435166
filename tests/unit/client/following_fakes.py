"""What the client tests share: a topology, an active-cluster follower that runs no threads of
its own (tests call ``watch_once``/``notify_changes``), and confluent-kafka clients that record
what reached which cluster, on the fake clock, handed out by the port's own client factory
(:class:`RecordingClients`) that the tests give the client."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.client.active_cluster import ActiveCluster
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import Consumer, Producer
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
    store: MemoryCoordinator,
    cluster: str | None,
    epoch: int,
    lease_ms: int = 15_000,
    *,
    by_failover: bool = True,
) -> None:
    """What the executor writes (a versioned document); ``by_failover`` False: a document that
    names no failover (so a consumer reads no failover record's cut-offs)."""
    failover_id = f"f-{epoch}" if by_failover else None
    store.put(KEY, ActiveDocument(cluster, epoch, failover_id, 0, lease_ms=lease_ms).encode())


class Unstarted(ActiveCluster):
    """Runs no threads: the test takes each step."""

    def start(self) -> Unstarted:
        return self


def follower(store: MemoryCoordinator, clock: FakeClock, lease_s: float = 15.0) -> Unstarted:
    return Unstarted("orders", topology(lease_s), coordinator=store, clock=clock.monotonic)


ClientClass = Callable[[Mapping[str, Any]], Any]


class RecordingClients(KafkaClients):
    """The port's client factory with recording clients: their settings are merged by the real
    factory (the topology's servers and security settings, the port's defaults, the overlay),
    then given to ``consumer_class`` or ``producer_class`` instead of confluent-kafka's."""

    def __init__(
        self,
        topology: Topology,
        *,
        consumer_class: ClientClass | None = None,
        producer_class: ClientClass | None = None,
    ) -> None:
        super().__init__(topology)
        self.consumer_class = consumer_class
        self.producer_class = producer_class

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        assert self.consumer_class is not None, "this test makes no consumer"
        return cast(Consumer, self.consumer_class(self.config(alias, overlay)))

    def producer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Producer:
        assert self.producer_class is not None, "this test makes no producer"
        return cast(Producer, self.producer_class(self.config(alias, overlay)))


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
    #: the configuration of every producer made, in order
    configs: list[dict[str, Any]] = field(default_factory=list)
    #: what the client under test builds its clients with (set by the test's fixtures)
    clients: KafkaClients | None = None

    def producer_class(self) -> Callable[[Mapping[str, Any]], Any]:
        traffic = self

        class FakeProducer:
            """A producer whose cluster accepts nothing: a flush lasts its whole timeout."""

            def __init__(self, config: Mapping[str, Any]) -> None:
                self.cluster = SERVERS[config["bootstrap.servers"]]
                self.queued = 0
                traffic.configs.append(dict(config))

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


@dataclass
class FakeMessage:
    """A record as confluent-kafka's consumer returns it."""

    _topic: str
    _partition: int
    _offset: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None

    def headers(self) -> None:
        return None


def consumer_class(
    traffic: Traffic, records: dict[str, list[FakeMessage]]
) -> Callable[[Mapping[str, Any]], Any]:
    """A consumer per cluster that hands out ``records[cluster]`` in order, and records every
    call that reaches the cluster (commits with what they commit) in ``traffic.calls``."""

    class FakeConsumer:
        instances: list[FakeConsumer] = []  # noqa: RUF012 (the test reads them)

        def __init__(self, config: Mapping[str, Any]) -> None:
            self.cluster = SERVERS[config["bootstrap.servers"]]
            self.config = dict(config)
            self.stored: dict[tuple[str, int], int] = {}
            self.committed: dict[tuple[str, int], int] = {}
            self.closed = False
            FakeConsumer.instances.append(self)

        def _call(self, what: str) -> None:
            if self.closed:
                raise RuntimeError(f"{what} on a closed consumer of {self.cluster}")
            traffic.calls.append((self.cluster, what, traffic.clock.monotonic()))

        def subscribe(self, topics: list[str], **_: Any) -> None:
            self._call("subscribe")

        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
            self._call("consume")
            queue = records.get(self.cluster, [])
            batch, queue[:] = queue[:num_messages], queue[num_messages:]
            return batch

        def store_offsets(self, message: Any = None, offsets: Any = None) -> None:
            self._call("store")
            for tp in offsets or []:
                self.stored[(tp.topic, tp.partition)] = tp.offset

        def commit(
            self, message: Any = None, offsets: Any = None, asynchronous: bool = True
        ) -> None:
            self._call(
                "commit " + ",".join(f"{t}-{p}@{o}" for (t, p), o in sorted(self.stored.items()))
            )
            self.committed.update(self.stored)

        def assignment(self) -> list[Any]:
            return []

        def unsubscribe(self) -> None:
            self._call("unsubscribe")

        def close(self) -> None:
            self._call("close")
            self.closed = True

    return FakeConsumer
