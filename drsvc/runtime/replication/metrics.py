"""Replication metrics: what a flow's worker reports per partition, as Prometheus metrics.

A worker (at-least-once or exactly-once) is a :class:`ReplicationReporter`: it names its flow,
keeps :class:`WorkerStats`, and answers
:meth:`~ReplicationReporter.partition_reports` with one :class:`PartitionReport` per source
partition it copies right now. :func:`install_replication_metrics` registers a collector that turns
those answers into metric families when Prometheus scrapes, in the spirit of MirrorMaker 2's
per-partition metrics (see ``docs/observability.md`` for the names and their MM2 counterparts).

Scrapes run on the HTTP server's thread while the worker copies. So the worker keeps what they
read in plain ints and floats (:class:`PartitionCounters`, updated once per batch and per sampled
delivery, never per record), and ``partition_reports`` only reads them: it never calls into a
Kafka client.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

log = logging.getLogger(__name__)


@dataclass
class WorkerStats:
    """Counters a benchmark or status report reads (monotonic, never reset)."""

    records_read: int = 0
    records_copied: int = 0
    bytes_copied: int = 0
    delivery_failures: int = 0
    rewinds: int = 0
    syncs_written: int = 0
    skipped_loops: int = 0
    records_lost_to_retention: int = 0
    log_truncations: int = 0
    stalled_partitions: int = 0
    keepalive_syncs_written: int = 0
    transactions_committed: int = 0
    transactions_failed: int = 0
    transactions_timed_out: int = 0
    stale_epoch_records: int = 0


#: Seconds per latency window: MirrorMaker 2 keeps two samples of 30 s (metrics.sample.window.ms).
LATENCY_WINDOW_S = 30.0

PARTITION_LABELS = ("flow", "topic", "partition")

#: WorkerStats counters exposed as ``drsvc_replication_<name>_total{flow}``, with their help text.
WORKER_COUNTERS: tuple[tuple[str, str], ...] = (
    ("rewinds", "Times a partition was rewound to copy again from its first failed record."),
    ("delivery_failures", "Copies the target did not acknowledge (each is copied again)."),
    ("syncs_written", "Offset syncs written to the target."),
    (
        "records_lost_to_retention",
        "Source records deleted by retention before they were copied.",
    ),
    ("skipped_loops", "Records not copied because they had already visited the target."),
    (
        "stalled_partitions",
        "Times a partition stopped advancing while its log had more (an open transaction).",
    ),
    (
        "keepalive_syncs_written",
        "Keepalive offset syncs written for idle partitions.",
    ),
    (
        "log_truncations",
        "Times a source partition was found truncated below the copied position (unclean "
        "leader election; at-least-once workers).",
    ),
    (
        "stale_epoch_records",
        "Records written on the source under an epoch older than the switch that moved their "
        "application away (a client that had not heard of the failover).",
    ),
)


@dataclass
class LatencyWindow:
    """The largest replication latency seen recently.

    Time is cut into aligned windows of ``window_s`` seconds; :meth:`value` is the maximum of the
    current and the previous window, so a sample stays visible for one to two windows and the
    value disappears (None) once two windows pass without one. :meth:`add` runs on the worker's
    thread; :meth:`value` may run on a scrape thread and only reads.
    """

    window_s: float = LATENCY_WINDOW_S
    current_max: float = -math.inf
    previous_max: float = -math.inf
    current_start: float = -math.inf

    def add(self, latency_ms: float, now: float) -> None:
        elapsed = now - self.current_start
        if elapsed >= 2 * self.window_s:
            self.previous_max = -math.inf
            self.current_max = -math.inf
            self.current_start = now
        elif elapsed >= self.window_s:
            self.previous_max = self.current_max
            self.current_max = -math.inf
            self.current_start += self.window_s
        self.current_max = max(latency_ms, self.current_max)

    def value(self, now: float) -> float | None:
        elapsed = now - self.current_start
        if elapsed >= 2 * self.window_s:
            return None
        # Past one window the "current" one has become the previous: the older one is dropped.
        recent = (
            self.current_max
            if elapsed >= self.window_s
            else max(self.current_max, self.previous_max)
        )
        return None if recent == -math.inf else recent


@dataclass
class PartitionCounters:
    """What a worker counts for one source partition, kept across re-assignments so counters
    never go backwards while the process lives. Written by the worker's thread only."""

    records_copied: int = 0
    bytes_copied: int = 0
    #: timestamp (epoch ms) of the last record handed to the producer
    last_timestamp_ms: int | None = None
    #: the source log end as the consumer last saw it (refreshed by the worker loop)
    source_end_offset: int | None = None
    latency: LatencyWindow = field(default_factory=LatencyWindow)

    def add_batch(self, records: int, size: int, last_timestamp_ms: int) -> None:
        """Count ``records`` copies of ``size`` bytes (keys and values) from one batch."""
        self.records_copied += records
        self.bytes_copied += size
        if last_timestamp_ms > 0:
            self.last_timestamp_ms = last_timestamp_ms


@dataclass(frozen=True)
class PartitionReport:
    """One source partition a worker copies, as metrics and status show it."""

    flow: str
    topic: str
    partition: int
    remote_topic: str
    records_copied: int
    bytes_copied: int
    #: next source offset whose copy is safely persisted (what a restart continues from)
    replicated_offset: int
    source_end_offset: int | None
    #: recent maximum of target acknowledgement time minus record timestamp
    latency_ms: float | None
    #: now minus the timestamp of the last record copied
    record_age_ms: float | None

    @property
    def lag(self) -> int | None:
        """Records on the source not yet safely copied, when the log end is known."""
        if self.source_end_offset is None:
            return None
        return max(0, self.source_end_offset - self.replicated_offset)


class ReplicationReporter(Protocol):
    """What a replication worker shows to metrics (see the module docstring)."""

    flow_id: str
    stats: WorkerStats

    def partition_reports(self) -> list[PartitionReport]:
        """One report per source partition copied now; safe to call from another thread."""
        ...


class ReplicationCollector:
    """A prometheus_client collector over the reporters of one process (one per flow)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reporters: dict[str, ReplicationReporter] = {}

    def add(self, reporter: ReplicationReporter) -> None:
        """Report ``reporter``'s flow; a reporter of the same flow added before is replaced
        (two reporters of one flow would give the same series twice)."""
        with self._lock:
            self._reporters[reporter.flow_id] = reporter

    def remove(self, reporter: ReplicationReporter) -> None:
        with self._lock:
            if self._reporters.get(reporter.flow_id) is reporter:
                del self._reporters[reporter.flow_id]

    def describe(self) -> Iterable[Metric]:
        """The metric names, without calling any reporter (used when registering)."""
        return _Families().all()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            reporters = list(self._reporters.values())
        families = _Families()
        for reporter in reporters:
            families.add_worker(reporter)
            try:
                reports = reporter.partition_reports()
            except Exception:
                # One broken reporter must not take the other flows' metrics down with it.
                log.exception("reporting partitions of %s for metrics failed", reporter.flow_id)
                continue
            for report in reports:
                families.add_partition(report)
        return families.all()


class _Families:
    """The metric families of one scrape."""

    def __init__(self) -> None:
        labels = PARTITION_LABELS
        self.records = CounterMetricFamily(
            "drsvc_replication_records",
            "Records copied to the target (MM2: record-count).",
            labels=labels,
        )
        self.bytes = CounterMetricFamily(
            "drsvc_replication_bytes",
            "Bytes of keys and values copied to the target (MM2: byte-count).",
            labels=labels,
        )
        self.latency = GaugeMetricFamily(
            "drsvc_replication_latency_ms",
            "Target acknowledgement time minus record timestamp, maximum over the last 30-60 s "
            "(MM2: replication-latency-ms-max).",
            labels=labels,
        )
        self.record_age = GaugeMetricFamily(
            "drsvc_replication_record_age_ms",
            "Now minus the timestamp of the last record copied (MM2: record-age-ms).",
            labels=labels,
        )
        self.lag = GaugeMetricFamily(
            "drsvc_replication_lag_records",
            "Source log end minus the replicated offset: records not yet safely copied.",
            labels=labels,
        )
        self.replicated = GaugeMetricFamily(
            "drsvc_replication_replicated_offset",
            "Next source offset whose copy is safely persisted (where a restart continues).",
            labels=labels,
        )
        self.end = GaugeMetricFamily(
            "drsvc_replication_source_end_offset",
            "Source log end offset as the worker's consumer last saw it.",
            labels=labels,
        )
        self.worker = {
            name: CounterMetricFamily(f"drsvc_replication_{name}", text, labels=("flow",))
            for name, text in WORKER_COUNTERS
        }

    def add_worker(self, reporter: ReplicationReporter) -> None:
        for name, family in self.worker.items():
            family.add_metric([reporter.flow_id], getattr(reporter.stats, name))

    def add_partition(self, report: PartitionReport) -> None:
        labels = [report.flow, report.topic, str(report.partition)]
        self.records.add_metric(labels, report.records_copied)
        self.bytes.add_metric(labels, report.bytes_copied)
        self.replicated.add_metric(labels, report.replicated_offset)
        if report.latency_ms is not None:
            self.latency.add_metric(labels, report.latency_ms)
        if report.record_age_ms is not None:
            self.record_age.add_metric(labels, report.record_age_ms)
        if report.source_end_offset is not None:
            self.end.add_metric(labels, report.source_end_offset)
        lag = report.lag
        if lag is not None:
            self.lag.add_metric(labels, lag)

    def all(self) -> list[Metric]:
        return [*self._partition_families(), *self.worker.values()]

    def _partition_families(self) -> Iterator[Metric]:
        yield self.records
        yield self.bytes
        yield self.latency
        yield self.record_age
        yield self.lag
        yield self.replicated
        yield self.end


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, ReplicationCollector] = (
    weakref.WeakKeyDictionary()
)
_collectors_lock = threading.Lock()


def install_replication_metrics(
    reporter: ReplicationReporter, registry: CollectorRegistry | None = None
) -> None:
    """Expose ``reporter``'s metrics in ``registry`` (default: the process's, which
    :func:`drsvc.runtime.metrics_server.serve_metrics` serves). Several flows in one process
    share one collector; installing a flow again replaces its previous reporter."""
    target = REGISTRY if registry is None else registry
    with _collectors_lock:
        collector = _collectors.get(target)
        if collector is None:
            collector = ReplicationCollector()
            target.register(collector)
            _collectors[target] = collector
    collector.add(reporter)


def remove_replication_metrics(
    reporter: ReplicationReporter, registry: CollectorRegistry | None = None
) -> None:
    """Stop exposing ``reporter`` (a worker that stopped inside a longer-lived process)."""
    with _collectors_lock:
        collector = _collectors.get(REGISTRY if registry is None else registry)
    if collector is not None:
        collector.remove(reporter)
