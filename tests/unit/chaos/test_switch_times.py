"""Failover records of an executor whose wall clock was stepped, back in real time."""

from __future__ import annotations

import pytest

from chaos.switch_times import ClockStep, real_times


def record(failover_id: str, times: list[int]) -> dict[str, object]:
    steps = ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
    return {
        "id": failover_id,
        "events": [
            {"step": s, "outcome": "ok", "at_ms": t} for s, t in zip(steps, times, strict=False)
        ],
    }


def test_events_after_a_forward_step_move_back_by_it() -> None:
    # stepped +5 s at real 1_000_500: wait-lease "ended" at 1_006_000 by the executor's clock
    stepped = record("f-1", [1_000_000, 1_006_000, 1_006_400, 1_006_500, 1_006_600])
    fixed = real_times(stepped, [ClockStep("f-1", 1_000_500, 5000)])
    assert [e["at_ms"] for e in fixed["events"]] == [  # type: ignore[index]
        1_000_000,
        1_001_000,
        1_001_400,
        1_001_500,
        1_001_600,
    ]
    assert stepped["events"][1]["at_ms"] == 1_006_000  # type: ignore[index]


def test_other_failovers_keep_their_times() -> None:
    other = record("f-2", [1_000_000, 1_006_000])
    assert real_times(other, [ClockStep("f-1", 1_000_500, 5000)]) == other


def test_only_forward_steps_are_told_apart() -> None:
    with pytest.raises(ValueError, match="forward"):
        ClockStep("f-1", 1, -5000)
