"""The scanner that finds the metric names drsvc exports, which the other deploy tests trust."""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_assets import (
    MetricDefinition,
    UnresolvedMetricName,
    exported_series,
    metric_definitions,
)


def test_finds_every_role_and_applies_the_exposition_suffixes() -> None:
    series = exported_series()
    # one metric of each role, as a check that the scan sees every module (not a list to trust)
    for name in (
        "drsvc_replication_records_total",  # CounterMetricFamily("drsvc_replication_records")
        "drsvc_replication_rewinds_total",  # f-string name over WORKER_COUNTERS
        "drsvc_heartbeat_freshness_seconds",
        "drsvc_checkpoints_emitted_total",  # defined with _total already
        "drsvc_group_would_lose_records",
        "drsvc_controller_leader",
        "drsvc_controller_decisions_total",
        "drsvc_api_requests_total",
    ):
        assert name in series
    assert "drsvc_checkpoints_emitted_total_total" not in series
    assert "drsvc_controller_decisions" not in series  # a counter is exposed with _total only


def test_histograms_and_summaries_expose_their_parts() -> None:
    assert MetricDefinition("x_seconds", "histogram", "-").series_names() >= {
        "x_seconds_bucket",
        "x_seconds_sum",
        "x_seconds_count",
    }
    assert "x_seconds" not in MetricDefinition("x_seconds", "histogram", "-").series_names()
    assert MetricDefinition("x", "summary", "-").series_names() >= {"x", "x_sum", "x_count"}


def test_collections_counter_is_not_a_metric(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(
        "from collections import Counter\n"
        "from prometheus_client import Gauge\n"
        "c = Counter('abc')\n"
        "g = Gauge('pkg_gauge', 'help')\n"
    )
    assert [d.name for d in metric_definitions(package)] == ["pkg_gauge"]


def test_a_name_it_cannot_work_out_fails_loudly(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(
        "from prometheus_client import Gauge\ndef make(n):\n    return Gauge(f'pkg_{n}', 'help')\n"
    )
    with pytest.raises(UnresolvedMetricName, match=r"mod.py:3"):
        metric_definitions(package)
