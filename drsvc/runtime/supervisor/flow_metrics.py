"""Per-flow replication numbers from the workers' Prometheus endpoints.

Each replication worker serves ``drsvc_replication_*`` metrics labelled by flow, topic and
partition. The supervisor scrapes every worker, sums what belongs to a flow, and turns the
records counter into a rate. Anything missing (an endpoint that does not answer yet, a worker
without the metrics) is simply absent, and shown as ``-``.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

RECORDS_TOTAL = "drsvc_replication_records_total"
LAG_RECORDS = "drsvc_replication_lag_records"
LATENCY_MS = "drsvc_replication_latency_ms"


@dataclass(frozen=True)
class ReplicationSample:
    """One worker's numbers for one flow at one scrape; None where the metric is missing."""

    records_total: float | None = None
    lag_records: float | None = None
    latency_ms: float | None = None


def parse_replication_metrics(text: str) -> dict[str, ReplicationSample]:
    """Sum of copied records, sum of lag, and max latency per flow label in an exposition text.

    Raises :class:`ValueError` when the text is not the Prometheus text format.
    """
    records: dict[str, float] = {}
    lag: dict[str, float] = {}
    latency: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            flow = sample.labels.get("flow")
            if flow is None:
                continue
            if sample.name == RECORDS_TOTAL:
                records[flow] = records.get(flow, 0.0) + sample.value
            elif sample.name == LAG_RECORDS:
                lag[flow] = lag.get(flow, 0.0) + sample.value
            elif sample.name == LATENCY_MS:
                latency[flow] = max(latency.get(flow, sample.value), sample.value)
    return {
        flow: ReplicationSample(records.get(flow), lag.get(flow), latency.get(flow))
        for flow in records.keys() | lag.keys() | latency.keys()
    }


def scrape_replication(
    port: int, timeout_s: float = 0.5, host: str = "127.0.0.1"
) -> dict[str, ReplicationSample] | None:
    """The replication numbers a worker serves on ``port``, or None when it does not answer or
    serves something that is not Prometheus text."""
    url = f"http://{host}:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode("utf-8", errors="replace")
        return parse_replication_metrics(text)
    except (OSError, urllib.error.URLError, ValueError):
        return None


@dataclass(frozen=True)
class FlowNumbers:
    """What the operator sees for one flow; None means unknown (shown as ``-``)."""

    records_per_s: float | None = None
    records_copied: float | None = None
    """Copied since the supervisor started watching, over every worker process of the flow."""
    lag_records: float | None = None
    latency_ms: float | None = None


class FlowRateTracker:
    """Turns successive scrapes of the workers into per-flow numbers.

    Scrapes are keyed by worker *process* (the supervisor uses ``role:pid``), so a restarted
    worker, whose counter starts again from zero, is a new source rather than a counter reset.
    The rate of a flow is the sum of the counter increases of the sources also seen in the previous
    round, divided by the time between the two rounds; a source seen for the first time adds its
    whole counter to the flow's copied total but nothing to the rate.
    """

    def __init__(self, forget_after_s: float = 300.0) -> None:
        self._forget_after_s = forget_after_s
        self._last_at: float | None = None
        self._previous_round: set[tuple[str, str]] = set()
        self._known: dict[tuple[str, str], tuple[float, float]] = {}
        """(source, flow) -> (counter value, when last seen)."""
        self._copied: dict[str, float] = {}

    def observe(
        self, now: float, scrapes: Mapping[str, Mapping[str, ReplicationSample]]
    ) -> dict[str, FlowNumbers]:
        """``scrapes`` maps each source that answered to its samples by flow."""
        increase: dict[str, float] = {}
        measured: set[str] = set()
        lag: dict[str, float] = {}
        latency: dict[str, float] = {}
        this_round: set[tuple[str, str]] = set()
        for source, samples in scrapes.items():
            for flow, sample in samples.items():
                if sample.lag_records is not None:
                    lag[flow] = lag.get(flow, 0.0) + sample.lag_records
                if sample.latency_ms is not None:
                    latency[flow] = max(latency.get(flow, sample.latency_ms), sample.latency_ms)
                if sample.records_total is None:
                    continue
                key = (source, flow)
                this_round.add(key)
                known = self._known.get(key)
                grown = sample.records_total - known[0] if known is not None else None
                # A counter that went down was reset: all of its value is new.
                added = sample.records_total if grown is None or grown < 0 else grown
                self._copied[flow] = self._copied.get(flow, 0.0) + added
                self._known[key] = (sample.records_total, now)
                if known is not None and key in self._previous_round:
                    increase[flow] = increase.get(flow, 0.0) + added
                    measured.add(flow)
        elapsed = None if self._last_at is None else now - self._last_at
        self._last_at, self._previous_round = now, this_round
        self._known = {
            key: value
            for key, value in self._known.items()
            if now - value[1] <= self._forget_after_s
        }
        flows = {flow for _source, flow in this_round} | lag.keys() | latency.keys()
        return {
            flow: FlowNumbers(
                records_per_s=(
                    increase[flow] / elapsed
                    if flow in measured and elapsed is not None and elapsed > 0
                    else None
                ),
                records_copied=self._copied.get(flow),
                lag_records=lag.get(flow),
                latency_ms=latency.get(flow),
            )
            for flow in flows
        }
