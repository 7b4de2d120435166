"""deploy/grafana/drsvc-dashboard.json: a Grafana dashboard whose queries parse and read only
series drsvc exports."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from deploy_assets import DEPLOY, exported_series, metric_names_in

DASHBOARD = json.loads((DEPLOY / "grafana" / "drsvc-dashboard.json").read_text(encoding="utf-8"))
PANELS = [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]
#: Grafana's variables, replaced by values of the same kind before parsing
VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", "$flow": ".*"}


def _expand(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown variable in {expr!r}"
    return expr


def test_dashboard_shape() -> None:
    assert DASHBOARD["uid"] and DASHBOARD["title"]
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area


@pytest.mark.parametrize("panel", PANELS, ids=lambda panel: panel["title"])
def test_panel_queries(panel: dict[str, Any]) -> None:
    assert panel["targets"]
    assert panel["datasource"]["uid"] == "${datasource}"
    for target in panel["targets"]:
        names = metric_names_in(_expand(target["expr"]))
        unknown = names - exported_series()
        assert not unknown, f"not exported by drsvc: {sorted(unknown)}"


def test_variables_query_exported_series() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    query = variables["flow"]["query"]["query"]
    match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
    assert match, query
    assert match.group(1) in exported_series()
    assert match.group(2) == "flow"
