"""The migration's copy: the replication engine on the migration's identity flow, in this
process, until it is stopped (a signal) or the migration is finished (``drsvc migrate finish``).

A second thread looks at the flow every ``progress_every_s`` seconds and reports per topic the
records copied, the lag and the estimated time to catch up (:mod:`failover.migration_progress`),
and watches the migration's state: once it is finished the engine is stopped, after it committed
what it copied. Several processes running ``start`` for one migration share its partitions (one
consumer group), as workers of any flow do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from drsvc.errors import ConfigError, DrsvcError
from drsvc.runtime.migration.flow import migration_flow
from drsvc.runtime.migration.reading import MigrationReader
from drsvc.runtime.migration.store import MigrationStore
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.settings import worker_settings
from drsvc.topology.models import Migration, Topology
from failover.migration_progress import Look, TopicProgress, topic_progress

log = logging.getLogger(__name__)

ProgressCallback = Callable[[list[TopicProgress]], None]


class MigrationCopier:
    def __init__(
        self,
        topology: Topology,
        migration: Migration,
        bootstrap: Mapping[str, str],
        store: MigrationStore,
        consul_http_addr: str,
        *,
        progress_every_s: float = 5.0,
        on_progress: ProgressCallback | None = None,
        **worker_overrides: object,
    ) -> None:
        flow = topology.flow(migration.source, migration.target)
        if flow != migration_flow(migration):
            raise ConfigError(
                f"migration {migration.name}: the flow {flow.id} is not the migration's own"
                " (pass the topology from migration_topology())"
            )
        self._migration = migration
        self._store = store
        self._reader = MigrationReader(topology, flow, bootstrap)
        self._every_s = progress_every_s
        self._on_progress = on_progress or (lambda _rows: None)
        settings = worker_settings(
            topology, flow, bootstrap, consul_http_addr=consul_http_addr, **worker_overrides
        )
        self.engine = ReplicationEngine(settings)
        self._done = threading.Event()
        self.finished = False
        self.last: list[TopicProgress] = []

    def stop(self) -> None:
        self.engine.stop()

    def run(self) -> None:
        watcher = threading.Thread(target=self._watch, name="migration-progress", daemon=True)
        watcher.start()
        try:
            self.engine.run()
        finally:
            self._done.set()
            watcher.join(10)

    def _watch(self) -> None:
        before: Look | None = None
        while not self._done.wait(self._every_s):
            try:
                stored = self._store.read(self._migration.name)
                if stored.state is not None and stored.state.state == "finished":
                    log.info("migration %s finished: stopping the copy", self._migration.name)
                    self.finished = True
                    self.engine.stop()
                    return
                now = self._reader.look()
                self.last = topic_progress(before, now)
                before = now
                self._on_progress(self.last)
            except DrsvcError as err:
                log.warning("progress of migration %s unknown: %s", self._migration.name, err)
