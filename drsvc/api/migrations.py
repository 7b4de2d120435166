"""What the API's migration routes call (``/v1/migrations/...``): the same runtime functions as
``drsvc migrate``.

A copy started through the API runs on a thread of the API process until the migration is
finished (or the process stops; ``drsvc migrate start`` anywhere resumes it, sharing the
partitions). A cutover runs on a thread too, like failovers: the answer comes as soon as its
failover record is stored. Verify runs Spark in the API process and answers when it is done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from drsvc.api.problems import ApiProblem
from drsvc.components import load_components
from drsvc.errors import RefusedError
from drsvc.runtime.failover.views import plan_document, record_document
from drsvc.runtime.migration.context import MigrationContext, migration_context
from drsvc.runtime.migration.copier import MigrationCopier
from drsvc.runtime.migration.cutover import check_cutover
from drsvc.runtime.migration.finish import finish_migration
from drsvc.runtime.migration.plan_reader import read_migration_plan
from drsvc.runtime.migration.positions import migration_check
from drsvc.runtime.migration.start import prepare_start
from drsvc.runtime.migration.status import app_phases, migration_apps, read_migration_status
from drsvc.settings import Settings
from drsvc.topology.models import Topology
from drsvc.verify.migration_job import verify_migration
from failover.failover_plan import FailoverRecord, FailoverRequest
from failover.requester import UNKNOWN_REQUESTER, RequestedBy

__all__ = ["MigrationService"]

log = logging.getLogger(__name__)

#: starts a failover on a thread and answers with its record once stored (ApiService._start)
Starter = Callable[[Any, FailoverRequest], FailoverRecord]


class MigrationService:
    def __init__(
        self,
        topology: Topology,
        bootstraps: Mapping[str, str],
        consul_address: str,
        starter: Starter,
        settings: Settings | None = None,
    ) -> None:
        self.topology = topology
        self._bootstraps = dict(bootstraps)
        self._consul = consul_address
        self._starter = starter
        self._settings = settings or Settings.from_env()
        self._copiers: dict[str, tuple[MigrationCopier, threading.Thread]] = {}
        self._lock = threading.Lock()

    def _context(self, name: str) -> MigrationContext:
        if name not in {m.name for m in self.topology.migrations}:
            known = ", ".join(m.name for m in self.topology.migrations) or "none"
            raise ApiProblem(404, "not_found", f"no migration {name!r} (migrations: {known})")
        return migration_context(
            self.topology, name, self._bootstraps, self._consul, self._settings
        )

    def copying_here(self, name: str) -> bool:
        with self._lock:
            found = self._copiers.get(name)
            return found is not None and found[1].is_alive()

    def list(self) -> list[dict[str, Any]]:
        rows = []
        for migration in self.topology.migrations:
            ctx = self._context(migration.name)
            state = ctx.store.read(migration.name).state
            rows.append(
                {
                    "migration": migration.name,
                    "source": migration.source,
                    "target": migration.target,
                    "state": "not-started" if state is None else state.state,
                    "applications": [a.name for a in migration_apps(ctx.topology, migration)],
                    "copying_here": self.copying_here(migration.name),
                }
            )
        return rows

    def status(self, name: str) -> dict[str, Any]:
        ctx = self._context(name)
        found = read_migration_status(
            ctx.topology, ctx.migration, ctx.bootstrap, ctx.store, ctx.executor
        )
        return {**found.as_dict(), "copying_here": self.copying_here(name)}

    def plan(self, name: str) -> dict[str, Any]:
        ctx = self._context(name)
        return read_migration_plan(ctx.base, ctx.migration, ctx.bootstrap).as_dict()

    def start(self, name: str, take_over_mm2: bool, copy: bool) -> dict[str, Any]:
        ctx = self._context(name)
        report = prepare_start(
            ctx.base, ctx.migration, ctx.bootstrap, ctx.store, take_over_mm2=take_over_mm2
        )
        if copy and not self.copying_here(name):
            copier = MigrationCopier(
                ctx.topology, ctx.migration, ctx.bootstrap, ctx.store, ctx.consul_address
            )

            def run() -> None:
                try:
                    copier.run()
                except Exception:
                    log.exception("the copy of migration %s stopped", name)

            thread = threading.Thread(target=run, name=f"migration-{name}", daemon=True)
            with self._lock:
                self._copiers[name] = (copier, thread)
            thread.start()
        return {**report.as_dict(), "copying_here": self.copying_here(name)}

    def stop_copies(self) -> None:
        with self._lock:
            copiers = list(self._copiers.values())
        for copier, thread in copiers:
            copier.stop()
            thread.join(30)

    def cutover(
        self,
        name: str,
        app: str,
        dry_run: bool,
        wait_s: float,
        requested_by: RequestedBy = UNKNOWN_REQUESTER,
    ) -> tuple[int, dict[str, Any]]:
        ctx = self._context(name)
        if app not in {a.name for a in ctx.topology.applications}:
            raise ApiProblem(404, "not_found", f"no application {app!r}")
        check = check_cutover(ctx.executor, ctx.store, ctx.reader(), ctx.migration, app, wait_s)
        if check.refusals:
            raise RefusedError(
                f"cutover of {app} to {ctx.migration.target} refused: " + "; ".join(check.refusals)
            )
        request = FailoverRequest(app, ctx.migration.target, False, None, requested_by=requested_by)
        if dry_run:
            plan, targets, note = ctx.executor.preview(request)
            return 200, {**plan_document(plan, targets, note), "check": check.as_dict()}
        record = self._starter(ctx.executor, request)
        return 202, {**record_document(record), "check": check.as_dict()}

    def finish(self, name: str, dry_run: bool) -> dict[str, Any]:
        ctx = self._context(name)
        phases = app_phases(
            ctx.executor, ctx.migration, migration_apps(ctx.topology, ctx.migration)
        )
        state = finish_migration(
            ctx.store, ctx.topology.namespace, ctx.migration, phases, dry_run=dry_run
        )
        return {"migration": name, "dry_run": dry_run, **state.as_dict()}

    def verify(self, name: str) -> dict[str, Any]:
        check = migration_check(self._context(name))
        return verify_migration(
            check, jars=load_components(self._settings.cache_dir).spark_kafka.jars
        )
