"""``drsvc flow``: an edit of a flow's control document never undoes what another writer (a
failover's transaction) wrote between its read and its write (an in-memory coordinator)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters.coordination import Entry
from drsvc.cli import flow as flow_cli
from drsvc.errors import ConflictError
from drsvc.runtime.replication.control import FlowControl

KEY = "drsvc/shop/flows/east/west/control"


class RacingStore(MemoryCoordinator):
    """Runs ``between`` after each of the first ``races`` reads of the key: another writer
    that gets in between the edit's read and its write."""

    def __init__(self, races: int, between: Callable[[MemoryCoordinator], None]) -> None:
        super().__init__(FakeClock())
        self.races = races
        self.between = between

    def get(self, key: str) -> Entry | None:
        entry = super().get(key)
        if self.races > 0:
            self.races -= 1
            self.between(self)
        return entry


def _start_topic(store: MemoryCoordinator) -> None:
    """Another writer's change: one more paused topic each time."""
    current = MemoryCoordinator.get(store, KEY)
    control = FlowControl() if current is None else FlowControl.from_json(current.value, KEY)
    changed = replace(
        control, paused_topics=control.paused_topics | {f"payments-{len(control.paused_topics)}"}
    )
    store.put(KEY, changed.to_json())


def _pause(control: FlowControl) -> FlowControl:
    return replace(control, paused=True)


def test_an_edit_made_again_keeps_the_other_writers_change(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RacingStore(races=1, between=_start_topic)
    monkeypatch.setattr(flow_cli, "_target", lambda *_args: (store, KEY))
    flow_cli._update(Path("topology.yaml"), "east->west", None, None, _pause)
    entry = store.get(KEY)
    assert entry is not None
    written = FlowControl.from_json(entry.value, KEY)
    assert written.paused
    assert written.paused_topics == {"payments-0"}
    assert '"paused": true' in capsys.readouterr().out


def test_an_edit_that_always_loses_the_race_writes_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = RacingStore(races=100, between=_start_topic)
    monkeypatch.setattr(flow_cli, "_target", lambda *_args: (store, KEY))
    with pytest.raises(ConflictError, match="nothing was written"):
        flow_cli._update(Path("topology.yaml"), "east->west", None, None, _pause)
    entry = store.get(KEY)
    assert entry is not None
    assert not FlowControl.from_json(entry.value, KEY).paused
