"""``drsvc migrate finish``: stop the migration's flow for good (its control document paused,
in the same transaction as the state ``finished``). Nothing is deleted, on either cluster."""

from __future__ import annotations

import time

from drsvc.adapters.coordination import Put
from drsvc.errors import ConflictError, RefusedError
from drsvc.runtime.migration.store import MigrationStore
from drsvc.runtime.replication.control import FlowControl
from drsvc.topology.models import Migration
from failover import naming
from failover.migration_state import AppPhase, MigrationState, finish_decision


def finish_migration(
    store: MigrationStore,
    namespace: str,
    migration: Migration,
    phases: dict[str, AppPhase],
    *,
    dry_run: bool = False,
) -> MigrationState:
    """Stop the flow and record the migration finished; refused (:class:`RefusedError`)
    while an application of it is not on the target. Finishing twice is fine."""
    stored = store.read(migration.name)
    decision = finish_decision(stored.state, phases)
    if not decision.allowed:
        raise RefusedError(f"migration {migration.name}: {decision.reason}")
    assert stored.state is not None
    if stored.state.state == "finished" or dry_run:
        return stored.state
    coordinator = store.coordinator
    key = naming.flow_control_key(namespace, migration.source, migration.target)
    entry = coordinator.get(key)
    control = FlowControl() if entry is None else FlowControl.from_json(entry.value, key)
    paused = FlowControl(
        paused=True,
        paused_topics=control.paused_topics,
        throttle_bytes_per_s=control.throttle_bytes_per_s,
        started_topics=control.started_topics,
        skip_below=control.skip_below,
    )
    state = MigrationState(
        "finished",
        stored.state.started_ms,
        int(time.time() * 1000),
        stored.state.created_topics,
        stored.state.takeover,
    )
    try:
        coordinator.write(
            [
                Put(store.key(migration.name), state.to_json(), stored.index),
                Put(key, paused.to_json(), 0 if entry is None else entry.index),
            ]
        )
    except ConflictError as err:
        raise ConflictError(
            err.key, f"migration {migration.name} changed while finishing; retry"
        ) from err
    return state
