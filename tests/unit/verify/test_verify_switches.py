"""A failover record becomes one ``switches`` row: step times and the epochs it wrote."""

from __future__ import annotations

from pathlib import Path

from drsvc.verify import histories
from drsvc.verify.switches import switch_row


def record(events: list[dict[str, object]], kind: str = "planned") -> dict[str, object]:
    return {"id": "f1", "app": "orders", "from": "east", "to": "west", "kind": kind,
            "events": events}  # fmt: skip


def event(step: str, at_ms: int, detail: str = "", outcome: str = "ok") -> dict[str, object]:
    return {"step": step, "outcome": outcome, "at_ms": at_ms, "detail": detail}


def test_a_completed_failover_gives_its_step_times_and_epochs() -> None:
    row = switch_row(
        record(
            [
                event("deactivate", 100, "active: none (epoch 8)"),
                event("wait-lease", 200),
                event("wait-caught-up", 300),
                event("set-offsets", 400, "2 partition(s) of 1 group(s) set"),
                event("activate", 500, "active: west (epoch 9)"),
            ]
        )
    )
    assert row == histories.Switch("f1", "orders", "east", "west", True, 100, 400, 500, 8, 9)


def test_a_rolled_back_failover_has_no_activation() -> None:
    row = switch_row(
        record(
            [
                event("deactivate", 100, "active: none (epoch 8)"),
                event("wait-caught-up", 300, "timed out", outcome="failed"),
                event("reactivate", 400, "active: east (epoch 9)"),
            ],
            kind="unplanned",
        )
    )
    assert (row.planned, row.set_offsets_ms, row.activate_ms, row.to_epoch) == (
        False, None, None, None)  # fmt: skip
    assert row.none_epoch == 8


def test_a_resumed_step_counts_its_last_success_and_the_epoch_it_names() -> None:
    row = switch_row(
        record(
            [
                event("deactivate", 100, "active: none (epoch 8)"),
                event("activate", 500, "active: west (epoch 9)"),
                event("activate", 650, "west is active already (epoch 9)"),
            ]
        )
    )
    assert (row.activate_ms, row.to_epoch) == (650, 9)


def test_the_table_round_trips_through_parquet(tmp_path: Path) -> None:
    row = histories.Switch("f1", "orders", "east", "west", True, 100, None, None, 8, None)
    histories.write_rows(tmp_path, histories.SWITCHES, [row])
    assert histories.read_rows(tmp_path, histories.SWITCHES) == [row._asdict()]
