"""deploy/prometheus/drsvc-alerts.yaml: Prometheus rule groups whose expressions parse and read
only series drsvc exports."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from deploy_assets import DEPLOY, exported_series, metric_names_in

RULES_FILE = DEPLOY / "prometheus" / "drsvc-alerts.yaml"
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


RULES = _rules()


def test_rule_groups_have_the_prometheus_shape() -> None:
    document = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    assert set(document) == {"groups"}
    names = [group["name"] for group in document["groups"]]
    assert len(names) == len(set(names)), "group names must be unique"
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"}, group["name"]
        assert group["rules"], group["name"]
    alerts = [rule["alert"] for rule in RULES]
    assert len(alerts) == len(set(alerts)), "alert names must be unique"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule["alert"])
def test_alert_rule(rule: dict[str, Any]) -> None:
    assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
    assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", rule["alert"])
    if "for" in rule:
        assert DURATION.match(rule["for"]), rule["for"]
    assert rule["labels"]["severity"] in {"info", "warning", "critical"}
    assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    for text in rule["annotations"].values():
        assert text.count("{{") == text.count("}}"), text
    names = metric_names_in(rule["expr"])
    assert names, "an alert must read some series"
    unknown = names - exported_series()
    assert not unknown, f"not exported by drsvc: {sorted(unknown)}"


def test_the_issue_subjects_are_covered() -> None:
    read = set().union(*(metric_names_in(rule["expr"]) for rule in RULES))
    for subject in (
        "drsvc_replication_lag_records",
        "drsvc_heartbeat_freshness_seconds",
        "drsvc_checkpoint_latency_ms",
        "drsvc_group_would_lose_records",
        "drsvc_controller_leader",
    ):
        assert subject in read


def test_a_misspelt_metric_would_be_caught() -> None:
    assert "drsvc_replication_lag" not in exported_series()
    with pytest.raises(ValueError):
        metric_names_in('{__name__=~"drsvc_.*"} > 0')
    with pytest.raises(Exception):  # noqa: B017 - promql_parser raises its own error type
        metric_names_in("sum by (flow (drsvc_replication_lag_records)")
