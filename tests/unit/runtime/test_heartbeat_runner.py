"""The heartbeats role: timing checks, transition logs, the ``--once --json`` report."""

from __future__ import annotations

import json
import logging

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.heartbeats.report import freshness_report
from drsvc.runtime.heartbeats.runner import FreshnessLog, check_timing
from failover.heartbeats import Freshness, FreshnessState

FRESH = Freshness(0.4, FreshnessState.FRESH, 12, 3)
STALE = Freshness(6.0, FreshnessState.STALE, 12, 3)
NEVER = Freshness(5.5, FreshnessState.STALE, None, 0)
UNKNOWN = Freshness(1.0, FreshnessState.UNKNOWN, None, 0)


def test_threshold_must_exceed_the_interval() -> None:
    check_timing(1.0, 5.0)
    with pytest.raises(ConfigError, match="--stale-after-s"):
        check_timing(1.0, 1.0)
    with pytest.raises(ConfigError, match="--interval-s"):
        check_timing(0.0, 5.0)


def test_transitions_are_logged_once_each(caplog: pytest.LogCaptureFixture) -> None:
    transitions = FreshnessLog(logger=logging.getLogger("test.heartbeats"))
    key = ("west", "east")
    with caplog.at_level(logging.INFO, logger="test.heartbeats"):
        transitions.update({key: UNKNOWN}, now=1.0)
        transitions.update({key: FRESH}, now=2.0)
        transitions.update({key: FRESH}, now=3.0)
        transitions.update({key: STALE}, now=10.0)
        transitions.update({key: STALE}, now=11.0)
        transitions.update({key: FRESH}, now=20.0)
        transitions.update({("east", "east"): NEVER}, now=20.0)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "heartbeats of east on west are fresh"),
        ("WARNING", "heartbeats of east on west are stale: not advancing for 6.0s"),
        ("INFO", "heartbeats of east on west are fresh again (had not advanced for 16.0s)"),
        ("WARNING", "east's own heartbeats are stale: not seen for 5.5s"),
    ]


def test_once_report_is_one_json_document() -> None:
    report = freshness_report(
        {("west", "east"): FRESH, ("west", "south"): UNKNOWN},
        [("west", "east")],
        stale_after_s=5.0,
        watched_s=6.0,
    )
    assert json.loads(json.dumps(report)) == {
        "stale_after_s": 5.0,
        "watched_s": 6.0,
        "freshness": [
            {
                "observer": "west",
                "source": "east",
                "state": "fresh",
                "freshness_s": 0.4,
                "last_offset": 12,
                "expected": True,
            },
            {
                "observer": "west",
                "source": "south",
                "state": "unknown",
                "freshness_s": 1.0,
                "last_offset": None,
                "expected": False,
            },
        ],
    }
