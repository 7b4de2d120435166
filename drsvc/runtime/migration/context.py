"""Everything a migration command works with, wired once: the topology with the migration's
flow, the migration, its clusters' addresses, the state store and the failover executor."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.runtime.failover.connect import connect_executor
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.migration.flow import migration_topology
from drsvc.runtime.migration.reading import MigrationReader
from drsvc.runtime.migration.store import MigrationStore
from drsvc.settings import Settings
from drsvc.topology.models import Flow, Migration, Topology
from failover.failover_plan import DEFAULT_CATCH_UP_TIMEOUT_S


@dataclass(frozen=True)
class MigrationContext:
    #: the topology as loaded (what ``plan`` reads)
    base: Topology
    #: the topology with the migration's identity flow
    topology: Topology
    migration: Migration
    bootstrap: Mapping[str, str]
    consul_address: str
    store: MigrationStore
    executor: FailoverExecutor

    @property
    def flow(self) -> Flow:
        return self.topology.flow(self.migration.source, self.migration.target)

    def reader(self, timeout_s: float = 10.0) -> MigrationReader:
        return MigrationReader(self.topology, self.flow, self.bootstrap, timeout_s)


def migration_context(
    base: Topology,
    name: str | None,
    bootstrap: Mapping[str, str],
    consul_address: str,
    settings: Settings,
    *,
    catch_up_timeout_s: float = DEFAULT_CATCH_UP_TIMEOUT_S,
    on_event: Callable[[str], None] | None = None,
) -> MigrationContext:
    migration = base.migration(name)
    topology = migration_topology(base, migration)
    executor = connect_executor(
        topology,
        bootstrap,
        consul_address,
        settings,
        catch_up_timeout_s=catch_up_timeout_s,
        on_event=on_event,
    )
    store = MigrationStore(ConsulCoordinator(consul_address), topology.namespace)
    return MigrationContext(base, topology, migration, bootstrap, consul_address, store, executor)
