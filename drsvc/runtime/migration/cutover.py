"""``drsvc migrate cutover``: one application from the migration's source to its target, as a
planned failover through the failover executor, once nothing of its topics lags.

The check comes first and changes nothing: the migration must be copying, the application must
be one of it and on the source, and every partition of its topics must be copied up to what the
source held when the check began (:func:`failover.migration_cutover.cutover_refusals`). Only then
does the executor run its steps (deactivate, wait out the lease, wait until every group
translates exactly, set the groups' offsets on the target, activate the target): its producers
stop on the source and, after the switch, write to the target; its consumers resume on the
target exactly where they stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drsvc.errors import RefusedError
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.failover.views import plan_document, record_document
from drsvc.runtime.migration.reading import MigrationReader
from drsvc.runtime.migration.status import app_phases, migration_apps
from drsvc.runtime.migration.store import MigrationStore
from drsvc.topology.models import Migration
from failover.failover_plan import FailoverRecord, FailoverRequest
from failover.migration_cutover import PartitionCatchUp, cutover_refusals
from failover.requester import UNKNOWN_REQUESTER, RequestedBy


@dataclass(frozen=True)
class CutoverCheck:
    app: str
    refusals: tuple[str, ...]
    partitions: tuple[PartitionCatchUp, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "app": self.app,
            "refusals": list(self.refusals),
            "lag": sum(p.lag for p in self.partitions),
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "source_end": p.source_end,
                    "replicated": p.replicated,
                    "lag": p.lag,
                }
                for p in self.partitions
            ],
        }


def check_cutover(
    executor: FailoverExecutor,
    store: MigrationStore,
    reader: MigrationReader,
    migration: Migration,
    app_name: str,
    wait_s: float,
) -> CutoverCheck:
    """Why the cutover of ``app_name`` must not start now (reads only)."""
    app = executor.application(app_name)
    state = store.read(migration.name).state
    phase = app_phases(executor, migration, [app])[app.name]
    copied = reader.copied_topics()
    partitions = reader.catch_up([t for t in app.topics if t in copied], wait_s)
    refusals = cutover_refusals(
        app=app.name,
        app_topics=app.topics,
        migration_apps=[a.name for a in migration_apps(executor.topology, migration)],
        migrated_topics=copied,
        state=state,
        phase=phase,
        partitions=partitions,
    )
    return CutoverCheck(app.name, tuple(refusals), tuple(partitions))


def cutover(
    executor: FailoverExecutor,
    store: MigrationStore,
    reader: MigrationReader,
    migration: Migration,
    app_name: str,
    *,
    wait_s: float = 10.0,
    dry_run: bool = False,
    requested_by: RequestedBy = UNKNOWN_REQUESTER,
) -> tuple[CutoverCheck, dict[str, Any]]:
    """Check, then run (or, ``dry_run``, only plan) the planned failover of ``app_name`` to the
    target. Returns the check and the failover's record (or plan) as a document; raises
    :class:`RefusedError` naming every reason when it must not start."""
    check = check_cutover(executor, store, reader, migration, app_name, wait_s)
    if check.refusals:
        raise RefusedError(
            f"cutover of {app_name} to {migration.target} refused: " + "; ".join(check.refusals)
        )
    request = FailoverRequest(app_name, migration.target, False, None, requested_by=requested_by)
    if dry_run:
        plan, targets, note = executor.preview(request)
        return check, plan_document(plan, targets, note)
    record: FailoverRecord = executor.start(request)
    return check, record_document(record)
