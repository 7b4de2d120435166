"""Replication metrics: the collector's exposition and the latency window.

The collector tests scrape a registry of their own and parse the text with prometheus_client's
parser, as Prometheus would read it. How the engine credits its counters per partition is tested
with the whole loop on fake clients (``test_engine_loop.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from drsvc.runtime.replication.metrics import (
    LatencyWindow,
    PartitionCounters,
    PartitionReport,
    WorkerStats,
    install_replication_metrics,
    remove_replication_metrics,
)

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
