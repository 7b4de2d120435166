"""The HTML report on tiny data: self-contained, every part present, lag gaps kept."""

from __future__ import annotations

import json
import re

from chaos.report import svg
from chaos.report.html import build_index, build_report, intervals, lag_series

DOCUMENT = {
    "scenario": "tiny",
    "seed": 1,
    "passed": False,
    "checks": {"lost": 1, "duplicates": 2},
    "rpo_records": 3,
    "rpo_reported_records": 3,
    "rto_seconds": 9.5,
    "report": "tiny/report.html",
}
FAULTS = [
    {"name": "kill-broker", "target": "east/kafka-1", "start_ms": 2_000, "end_ms": 6_000,
     "detail": "kill -9 <broker>"},
    {"name": "failover", "target": "east->west", "start_ms": 7_000, "end_ms": None,
     "detail": "f-1"},
]  # fmt: skip
LAG = [
    {"at_ms": 1_000, "flow": "east->west", "lag": 0},
    {"at_ms": 3_000, "flow": "east->west", "lag": 50},
    {"at_ms": 4_000, "flow": "*", "lag": None},
    {"at_ms": 5_000, "flow": "east->west", "lag": None},
    {"at_ms": 7_000, "flow": "east->west", "lag": 0},
]
PARTITIONS = [
    {"cluster": "west", "topic": "east.orders", "partition": 0, "records": 10, "lost": 1,
     "duplicates": 2},
]  # fmt: skip


def test_lag_series_keeps_gaps_where_nothing_could_be_read() -> None:
    series = lag_series(LAG, origin_ms=1_000)
    assert series == {"east->west": [(0.0, 0.0), (2.0, 50.0), (3.0, None), (4.0, None), (6.0, 0.0)]}


def test_intervals_are_relative_and_open_ones_stay_open() -> None:
    assert intervals(FAULTS, 1_000) == [
        ("kill-broker east/kafka-1", 1.0, 5.0, "kill -9 <broker>"),
        ("failover east->west", 6.0, None, "f-1"),
    ]


def test_the_report_is_one_self_contained_file_with_every_part() -> None:
    page = build_report(DOCUMENT, {"reasons": ["lost: 1"]}, FAULTS, LAG, PARTITIONS)
    assert "FAILED" in page and "lost: 1" in page
    assert page.count("<svg") == 3  # lag, timeline, per-partition bars
    assert "&lt;broker&gt;" in page  # details are escaped
    assert not re.search(r"(src|href)=\"(http|/)", page)  # nothing loaded from elsewhere
    shown = re.search(r"<h2>Verdict \(JSON\)</h2>\n<pre>(.*?)</pre>", page, re.S)
    assert shown is not None
    assert json.loads(shown.group(1).replace("&quot;", '"')) == DOCUMENT


def test_no_bar_chart_when_no_partition_lost_or_duplicated() -> None:
    clean = [PARTITIONS[0] | {"lost": 0, "duplicates": 0}]
    page = build_report(DOCUMENT, {}, FAULTS, LAG, clean)
    assert page.count("<svg") == 2 and "No partition lost or duplicated" in page


def test_line_chart_breaks_lines_at_gaps() -> None:
    chart = svg.line_chart({"f": [(0, 1), (1, None), (2, 3), (3, 4)]})
    assert chart.count("<polyline") == 2


def test_index_links_each_report() -> None:
    page = build_index([DOCUMENT | {"report_link": "tiny/report.html"}], "suite")
    assert 'href="tiny/report.html"' in page and "FAILED" in page
