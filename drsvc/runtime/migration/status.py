"""``drsvc migrate status``: the migration's state, its copy per partition in the shape of
``kafka-consumer-groups --describe`` (the flow's progress group on the source), and where each of
its applications stands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.migration.store import MigrationStore
from drsvc.runtime.status.flow_status import read_status
from drsvc.runtime.status.report import FlowStatus
from drsvc.topology.models import Application, Migration, Topology
from failover.migration_state import AppPhase, MigrationState, app_phase


def migration_apps(topology: Topology, migration: Migration) -> list[Application]:
    """The applications a migration cuts over: those it lists, else every application whose
    topics it all selects."""
    if migration.applications:
        return [topology.application(name) for name in migration.applications]
    selected = migration.topics.to_filter()
    return [a for a in topology.applications if all(selected.matches(t) for t in a.topics)]


def app_phases(
    executor: FailoverExecutor, migration: Migration, apps: list[Application]
) -> dict[str, AppPhase]:
    return {
        a.name: app_phase(executor.active(a).cluster, migration.source, migration.target)
        for a in apps
    }


@dataclass(frozen=True)
class MigrationStatus:
    migration: Migration
    state: MigrationState | None
    flow: FlowStatus
    apps: tuple[dict[str, object], ...]

    @property
    def lag(self) -> int | None:
        return self.flow.lag

    def as_dict(self) -> dict[str, object]:
        return {
            "migration": self.migration.name,
            "source": self.migration.source,
            "target": self.migration.target,
            "state": "not-started" if self.state is None else self.state.state,
            "started_ms": None if self.state is None else self.state.started_ms,
            "finished_ms": None if self.state is None else self.state.finished_ms,
            "created_topics": [] if self.state is None else list(self.state.created_topics),
            "takeover": None if self.state is None else self.state.as_dict()["takeover"],
            "group": self.flow.progress_group,
            "lag": self.lag,
            "partitions": [p.as_dict() for p in self.flow.partitions],
            "error": self.flow.error,
            "applications": list(self.apps),
        }


def read_migration_status(
    topology: Topology,
    migration: Migration,
    bootstrap: Mapping[str, str],
    store: MigrationStore,
    executor: FailoverExecutor,
    timeout_s: float = 10.0,
) -> MigrationStatus:
    """``topology`` includes the migration's flow (:func:`.flow.migration_topology`)."""
    flow = topology.flow(migration.source, migration.target)
    report = read_status(topology, [flow], bootstrap, timeout_s)
    state = store.read(migration.name).state
    apps = migration_apps(topology, migration)
    phases = app_phases(executor, migration, apps)
    rows: list[dict[str, object]] = []
    for app in apps:
        active = executor.active(app)
        rows.append(
            {
                "app": app.name,
                "phase": phases[app.name],
                "active": active.cluster,
                "epoch": active.epoch,
                "running": executor.running(app),
                "groups": list(app.groups),
                "topics": list(app.topics),
            }
        )
    return MigrationStatus(migration, state, report.flows[0], tuple(rows))
