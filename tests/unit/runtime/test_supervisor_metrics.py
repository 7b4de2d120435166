"""Per-flow numbers from the replication workers' Prometheus endpoints."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, start_http_server

from drsvc.ports import allocate_ports
from drsvc.runtime.supervisor.flow_metrics import (
    FlowRateTracker,
    ReplicationSample,
    parse_replication_metrics,
    scrape_replication,
)

LABELS = ("flow", "topic", "partition")


def worker_registry() -> tuple[CollectorRegistry, Counter, Gauge, Gauge]:
    """A registry shaped like a replication worker's."""
    registry = CollectorRegistry()
    records = Counter("drsvc_replication_records_total", "copied", LABELS, registry=registry)
    lag = Gauge("drsvc_replication_lag_records", "lag", LABELS, registry=registry)
    latency = Gauge("drsvc_replication_latency_ms", "latency", LABELS, registry=registry)
    Gauge("drsvc_unrelated", "other", ("flow",), registry=registry).labels("east->west").set(99)
    return registry, records, lag, latency


def test_parse_sums_records_and_lag_and_takes_the_max_latency_per_flow() -> None:
    registry, records, lag, latency = worker_registry()
    records.labels("east->west", "orders", "0").inc(100)
    records.labels("east->west", "orders", "1").inc(50)
    records.labels("west->east", "payments", "0").inc(7)
    lag.labels("east->west", "orders", "0").set(3)
    lag.labels("east->west", "orders", "1").set(4)
    latency.labels("east->west", "orders", "0").set(12)
    latency.labels("east->west", "orders", "1").set(40)
    text = generate_latest(registry).decode()

    samples = parse_replication_metrics(text)

    assert samples == {
        "east->west": ReplicationSample(records_total=150, lag_records=7, latency_ms=40),
        "west->east": ReplicationSample(records_total=7, lag_records=None, latency_ms=None),
    }


def test_parse_of_a_worker_without_replication_metrics_is_empty() -> None:
    registry = CollectorRegistry()
    Gauge("process_thing", "x", registry=registry).set(1)
    assert parse_replication_metrics(generate_latest(registry).decode()) == {}


def test_parse_refuses_text_that_is_not_prometheus() -> None:
    with pytest.raises(ValueError):
        parse_replication_metrics("<html>not metrics</html>\n")


def test_scrape_a_real_endpoint_and_a_missing_one() -> None:
    registry, records, _lag, _latency = worker_registry()
    records.labels("east->west", "orders", "0").inc(5)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        port = int(server.server_address[1])
        assert scrape_replication(port) == {
            "east->west": ReplicationSample(records_total=5, lag_records=None, latency_ms=None)
        }
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    (free,) = allocate_ports("127.0.0.1", 1)
    assert scrape_replication(free, timeout_s=0.5) is None


def sample(
    records: float | None, lag: float | None = None, latency: float | None = None
) -> ReplicationSample:
    return ReplicationSample(records, lag, latency)


def test_rates_from_successive_rounds() -> None:
    tracker = FlowRateTracker()
    first = tracker.observe(10.0, {"w1:100": {"e->w": sample(1000, 5, 20)}})
    assert first["e->w"].records_per_s is None  # nothing to compare with yet
    assert first["e->w"].records_copied == 1000
    assert first["e->w"].lag_records == 5 and first["e->w"].latency_ms == 20

    second = tracker.observe(
        12.0,
        {"w1:100": {"e->w": sample(1400, 1, 15)}, "w2:200": {"e->w": sample(300, 2, 30)}},
    )
    # w2 is new: its 300 count as copied but not in the rate of this round.
    assert second["e->w"].records_per_s == pytest.approx(200.0)
    assert second["e->w"].records_copied == 1700
    assert second["e->w"].lag_records == 3
    assert second["e->w"].latency_ms == 30

    third = tracker.observe(
        13.0, {"w1:100": {"e->w": sample(1500)}, "w2:200": {"e->w": sample(400)}}
    )
    assert third["e->w"].records_per_s == pytest.approx(200.0)
    assert third["e->w"].records_copied == 1900
    assert third["e->w"].lag_records is None


def test_a_restarted_worker_is_a_new_source_and_a_silent_round_shows_no_rate() -> None:
    tracker = FlowRateTracker()
    tracker.observe(0.0, {"w1:100": {"e->w": sample(500)}})
    # The worker crashed: no answer this round.
    assert tracker.observe(1.0, {}) == {}
    # Restarted with a new pid and a fresh counter.
    back = tracker.observe(2.0, {"w1:101": {"e->w": sample(40)}})
    assert back["e->w"].records_per_s is None
    assert back["e->w"].records_copied == 540
    later = tracker.observe(3.0, {"w1:101": {"e->w": sample(90)}})
    assert later["e->w"].records_per_s == pytest.approx(50.0)
    assert later["e->w"].records_copied == 590


def test_a_counter_that_goes_down_counts_as_reset() -> None:
    tracker = FlowRateTracker()
    tracker.observe(0.0, {"w": {"f": sample(100)}})
    numbers = tracker.observe(1.0, {"w": {"f": sample(30)}})
    assert numbers["f"].records_per_s == pytest.approx(30.0)
    assert numbers["f"].records_copied == 130
