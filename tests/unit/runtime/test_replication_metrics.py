"""Replication metrics: the collector's exposition, the latency window, and the worker's counting.

The collector tests scrape a registry of their own and parse the text with prometheus_client's
parser, as Prometheus would read it. The worker test drives the real hot loop (``_copy``) with
fake messages and a fake producer, so the per-partition crediting and latency sampling are checked
on interleaved partitions without a broker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka import TopicPartition as KafkaPartition
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from drsvc.runtime.replication.lane import Lane, WorkerStats
from drsvc.runtime.replication.metrics import (
    LatencyWindow,
    PartitionCounters,
    PartitionReport,
    install_replication_metrics,
    remove_replication_metrics,
)
from drsvc.runtime.replication.settings import worker_settings
from drsvc.runtime.replication.worker import FlowWorker
from drsvc.topology import load_topology_text
from failover import offset_syncs
from failover.copy_progress import PartitionProgress

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def report(
    flow: str = "east->west",
    topic: str = "orders",
    partition: int = 0,
    *,
    replicated: int = 90,
    end: int | None = 100,
    latency: float | None = 250.0,
    age: float | None = 1_500.0,
) -> PartitionReport:
    return PartitionReport(
        flow=flow,
        topic=topic,
        partition=partition,
        remote_topic=f"east.{topic}",
        records_copied=1234,
        bytes_copied=56_789,
        replicated_offset=replicated,
        source_end_offset=end,
        latency_ms=latency,
        record_age_ms=age,
    )


@dataclass
class FakeReporter:
    flow_id: str
    reports: list[PartitionReport]
    stats: WorkerStats = field(default_factory=WorkerStats)
    calls: int = 0
    broken: bool = False

    def partition_reports(self) -> list[PartitionReport]:
        self.calls += 1
        if self.broken:
            raise RuntimeError("lanes in a bad state")
        return list(self.reports)


def scrape(registry: CollectorRegistry) -> Samples:
    text = generate_latest(registry).decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = sample.value
    return samples


def labels(flow: str = "east->west", topic: str = "orders", partition: int = 0) -> Any:
    return (("flow", flow), ("partition", str(partition)), ("topic", topic))


def test_partition_reports_become_the_shared_metric_names() -> None:
    registry = CollectorRegistry()
    reporter = FakeReporter("east->west", [report(), report(partition=1, end=None, latency=None)])
    reporter.stats.rewinds = 3
    reporter.stats.delivery_failures = 7
    reporter.stats.syncs_written = 42
    reporter.stats.records_lost_to_retention = 5
    reporter.stats.skipped_loops = 2
    install_replication_metrics(reporter, registry)

    samples = scrape(registry)

    p0, p1 = labels(), labels(partition=1)
    assert samples[("drsvc_replication_records_total", p0)] == 1234
    assert samples[("drsvc_replication_bytes_total", p0)] == 56_789
    assert samples[("drsvc_replication_latency_ms", p0)] == 250.0
    assert samples[("drsvc_replication_record_age_ms", p0)] == 1_500.0
    assert samples[("drsvc_replication_replicated_offset", p0)] == 90
    assert samples[("drsvc_replication_source_end_offset", p0)] == 100
    assert samples[("drsvc_replication_lag_records", p0)] == 10
    # What is not known is left out rather than shown as zero.
    assert ("drsvc_replication_latency_ms", p1) not in samples
    assert ("drsvc_replication_source_end_offset", p1) not in samples
    assert ("drsvc_replication_lag_records", p1) not in samples
    assert samples[("drsvc_replication_replicated_offset", p1)] == 90
    flow = (("flow", "east->west"),)
    assert samples[("drsvc_replication_rewinds_total", flow)] == 3
    assert samples[("drsvc_replication_delivery_failures_total", flow)] == 7
    assert samples[("drsvc_replication_syncs_written_total", flow)] == 42
    assert samples[("drsvc_replication_records_lost_to_retention_total", flow)] == 5
    assert samples[("drsvc_replication_skipped_loops_total", flow)] == 2
    assert samples[("drsvc_replication_stalled_partitions_total", flow)] == 0


def test_registering_does_not_ask_the_worker_and_every_scrape_does() -> None:
    registry = CollectorRegistry(auto_describe=True)
    reporter = FakeReporter("east->west", [report()])
    install_replication_metrics(reporter, registry)
    assert reporter.calls == 0
    scrape(registry)
    scrape(registry)
    assert reporter.calls == 2


def test_flows_of_one_process_share_the_registry_and_reinstalling_replaces() -> None:
    registry = CollectorRegistry()
    east = FakeReporter("east->west", [report()])
    west = FakeReporter("west->east", [report("west->east", "payments")])
    install_replication_metrics(east, registry)
    install_replication_metrics(west, registry)
    samples = scrape(registry)
    assert ("drsvc_replication_records_total", labels()) in samples
    assert ("drsvc_replication_records_total", labels("west->east", "payments")) in samples

    restarted = FakeReporter("east->west", [report(replicated=100)])
    install_replication_metrics(restarted, registry)
    assert scrape(registry)[("drsvc_replication_lag_records", labels())] == 0

    remove_replication_metrics(east, registry)  # not the installed one any more: no effect
    assert ("drsvc_replication_records_total", labels()) in scrape(registry)
    remove_replication_metrics(restarted, registry)
    samples = scrape(registry)
    assert ("drsvc_replication_records_total", labels()) not in samples
    assert ("drsvc_replication_records_total", labels("west->east", "payments")) in samples


def test_a_failing_reporter_does_not_hide_the_other_flows() -> None:
    registry = CollectorRegistry()
    broken = FakeReporter("east->west", [report()], broken=True)
    fine = FakeReporter("west->east", [report("west->east")])
    install_replication_metrics(broken, registry)
    install_replication_metrics(fine, registry)
    samples = scrape(registry)
    assert ("drsvc_replication_records_total", labels("west->east")) in samples
    assert ("drsvc_replication_rewinds_total", (("flow", "east->west"),)) in samples
    assert ("drsvc_replication_records_total", labels()) not in samples


def test_lag_never_goes_below_zero() -> None:
    assert report(replicated=90, end=100).lag == 10
    assert report(replicated=100, end=100).lag == 0
    # The cached end can trail the replicated position for a moment.
    assert report(replicated=105, end=100).lag == 0
    assert report(end=None).lag is None


def test_latency_window_keeps_the_recent_maximum_for_one_to_two_windows() -> None:
    window = LatencyWindow(window_s=10.0)
    assert window.value(0.0) is None
    window.add(300.0, now=100.0)
    window.add(120.0, now=101.0)
    assert window.value(101.0) == 300.0
    window.add(80.0, now=111.0)  # a new window: the last one's maximum still counts
    assert window.value(111.0) == 300.0
    assert window.value(119.9) == 300.0
    assert window.value(120.0) == 80.0  # the 300 ms window is two windows old now
    assert window.value(129.9) == 80.0
    assert window.value(130.0) is None  # nothing for two windows
    window.add(50.0, now=200.0)
    assert window.value(200.0) == 50.0


def test_counters_keep_the_last_timestamp_when_a_batch_has_none() -> None:
    counters = PartitionCounters()
    counters.add_batch(10, 100, last_timestamp_ms=1_700_000_000_000)
    counters.add_batch(5, 50, last_timestamp_ms=0)
    assert (counters.records_copied, counters.bytes_copied) == (15, 150)
    assert counters.last_timestamp_ms == 1_700_000_000_000


# -- the worker's own counting -------------------------------------------------------------------

TOPOLOGY = """
name: metrics
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""


@dataclass
class FakeMessage:
    _topic: str
    _partition: int
    _offset: int
    _timestamp: int
    _value: bytes = b"value"
    _key: bytes | None = b"key"

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, self._timestamp

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def leader_epoch(self) -> int:
        return 0


@dataclass
class Delivered:
    _offset: int

    def offset(self) -> int:
        return self._offset


@dataclass
class FakeProducer:
    """Accepts every record and acknowledges them all when told to."""

    pending: list[Any] = field(default_factory=list)
    next_offset: int = 0

    def produce(self, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        self.pending.append(kwargs["on_delivery"])

    def acknowledge_all(self) -> None:
        for on_delivery in self.pending:
            on_delivery(None, Delivered(self.next_offset))
            self.next_offset += 1
        self.pending.clear()


def lane(topic: str, partition: int) -> Lane:
    progress = PartitionProgress(
        offset_syncs.TopicPartition(topic, partition),
        source_topic_id=b"S" * 16,
        target_topic_id=b"T" * 16,
        start=0,
    )
    return Lane(
        source=KafkaPartition(topic, partition),
        remote_topic=f"east.{topic}",
        progress=progress,
        prefix=b"",
        committed=0,
    )


@pytest.fixture
def worker() -> FlowWorker:
    topology = load_topology_text(TOPOLOGY)
    return FlowWorker(worker_settings(topology, topology.flows[0], {}))


def test_worker_counts_per_partition_and_samples_latency_per_stretch(worker: FlowWorker) -> None:
    producer = FakeProducer()
    worker._producer = producer  # type: ignore[assignment]
    worker._lanes = {("orders", 0): lane("orders", 0), ("orders", 1): lane("orders", 1)}
    created = int(time.time() * 1000) - 2_000
    # Interleaved partitions, and a record of a partition this worker does not own.
    batch = [
        FakeMessage("orders", 0, 0, created),
        FakeMessage("orders", 0, 1, created + 1, _value=b"longer value"),
        FakeMessage("orders", 1, 0, created + 2),
        FakeMessage("orders", 2, 0, created + 3),
        FakeMessage("orders", 0, 2, created + 4, _key=None),
    ]
    worker._copy(batch)  # type: ignore[arg-type]
    producer.acknowledge_all()

    reports = {(r.topic, r.partition): r for r in worker.partition_reports()}
    assert set(reports) == {("orders", 0), ("orders", 1)}
    p0, p1 = reports[("orders", 0)], reports[("orders", 1)]
    assert p0.records_copied == 3
    assert p0.bytes_copied == (5 + 3) + (12 + 3) + 5
    assert p1.records_copied == 1
    assert p1.bytes_copied == 5 + 3
    assert worker.stats.records_copied == 4
    assert p0.record_age_ms is not None and 1_900 <= p0.record_age_ms < 60_000
    # One sampled copy per stretch of a partition: ack time minus its timestamp.
    assert p0.latency_ms is not None and 2_000 <= p0.latency_ms < 60_000
    assert p1.latency_ms is not None and 1_990 <= p1.latency_ms < 60_000
    assert p0.remote_topic == "east.orders"
    assert p0.replicated_offset == 0  # nothing sealed and synced yet
    assert p0.source_end_offset is None  # the loop has not cached an end yet
