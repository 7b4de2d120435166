"""Fault schedules: bounded steps, events in time order, heal before start, seeded jitter."""

from __future__ import annotations

import pytest

from chaos.schedule import MAX_DURATION_S, FaultStep, events, span_s


def test_every_fault_is_bounded() -> None:
    with pytest.raises(ValueError, match="at most"):
        FaultStep(0, "kill-broker", MAX_DURATION_S + 1)
    with pytest.raises(ValueError, match="more than 0"):
        FaultStep(0, "kill-broker", 0)
    with pytest.raises(ValueError, match="at or after 0"):
        FaultStep(-1, "kill-broker", 5)


def test_events_start_and_stop_each_fault_in_time_order() -> None:
    steps = [FaultStep(10, "b", 2), FaultStep(0, "a", 5), FaultStep(5, "c", 1)]
    got = [(e.at_s, e.index, e.action) for e in events(steps, seed=1)]
    assert got == [
        (0, 1, "start"),
        (5, 1, "stop"),  # a heal comes before a start at the same moment
        (5, 2, "start"),
        (6, 2, "stop"),
        (10, 0, "start"),
        (12, 0, "stop"),
    ]


def test_jitter_is_seeded_and_keeps_durations() -> None:
    steps = [FaultStep(2, "a", 3), FaultStep(10, "b", 4)]
    one = events(steps, seed=7, jitter_s=1.0)
    assert one == events(steps, seed=7, jitter_s=1.0)
    assert one != events(steps, seed=8, jitter_s=1.0)
    by_index: dict[int, dict[str, float]] = {}
    for e in one:
        by_index.setdefault(e.index, {})[e.action] = e.at_s
    for index, step in enumerate(steps):
        start, stop = by_index[index]["start"], by_index[index]["stop"]
        assert step.at_s <= start <= step.at_s + 1.0
        assert stop - start == pytest.approx(step.duration_s, abs=0.002)


def test_span_is_the_latest_heal() -> None:
    assert span_s([FaultStep(2, "a", 3), FaultStep(10, "b", 4)], jitter_s=1) == 15
    assert span_s([]) == 0


def test_a_label_names_the_target() -> None:
    assert FaultStep(0, "kill-worker", 5, {"flow": "east->west"}).label == (
        "kill-worker(flow=east->west)"
    )
    assert FaultStep(0, "kill-controller", 5).label == "kill-controller"
