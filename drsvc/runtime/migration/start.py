"""``drsvc migrate start``, before any record is copied: plan, refuse or create the topics, and
record the migration as copying (in one conditional write, so two starts do not race)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from drsvc.errors import ConfigError, ConflictError, RefusedError
from drsvc.kafka.admin import create_topic, list_topic_names
from drsvc.kafka.clients import KafkaClients
from drsvc.runtime.migration.mm2_takeover import (
    TakeoverPlan,
    commit_takeover,
    mm2_clusters,
    plan_takeover,
    refuse_if_the_flow_copied,
)
from drsvc.runtime.migration.plan_reader import (
    MigrationPlanReport,
    migration_clients,
    read_migration_plan,
)
from drsvc.runtime.migration.store import MigrationStore
from drsvc.topology.models import Migration, Topology
from failover.migration_state import MigrationState, start_refusal, started


@dataclass(frozen=True)
class StartReport:
    plan: MigrationPlanReport
    created: tuple[str, ...]
    state: MigrationState
    takeover: TakeoverPlan | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "migration": self.plan.migration.name,
            "created": list(self.created),
            "matched": [t.topic for t in self.plan.plan.with_action("match")],
            "state": self.state.as_dict(),
            "takeover": None if self.takeover is None else self.takeover.as_dict(),
        }


def prepare_start(
    topology: Topology,
    migration: Migration,
    bootstrap: Mapping[str, str],
    store: MigrationStore,
    timeout_s: float = 10.0,
    *,
    take_over_mm2: bool = False,
    clients: KafkaClients | None = None,
) -> StartReport:
    """Plan the migration; refuse it (:class:`RefusedError`, the reason) when a topic
    conflicts or it was finished; else create every planned topic on the target and record the
    migration as copying. Nothing is created when the plan refuses.

    ``take_over_mm2``: continue a copy MirrorMaker 2 made (:mod:`.mm2_takeover`): where its
    progress says the copy ends, committed as the flow's progress before anything copies; refused
    (nothing created or committed) when a partition's copy cannot be placed.

    ``clients`` reaches the two clusters (by default a factory of the topology with the
    ``bootstrap`` servers that name them)."""
    if clients is None:
        clients = migration_clients(topology, migration, bootstrap)
    report = read_migration_plan(topology, migration, bootstrap, timeout_s, clients=clients)
    stored = store.read(migration.name)
    conflicts = [f"{t.topic}: {t.reason}" for t in report.plan.with_action("conflict")]
    refusal = start_refusal(stored.state, conflicts)
    if refusal is None and not [t for t in report.plan.topics if t.action in ("create", "match")]:
        refusal = "it selects no topic of the source (topics: include/exclude)"
    if refusal is not None:
        raise RefusedError(f"migration {migration.name}: {refusal}")
    admin = clients.admin(migration.target)
    takeover: TakeoverPlan | None = None
    clusters = None
    if take_over_mm2:
        if stored.state is not None:
            raise RefusedError(
                f"migration {migration.name} was started already: its own copy has progress,"
                " there is nothing of MirrorMaker's to take over"
            )
        clusters = mm2_clusters(
            migration.source,
            migration.target,
            clients.config(migration.source),
            clients.config(migration.target),
            clients=clients,
        )
        copied = {
            t.topic: t.partitions for t in report.plan.topics if t.action in ("create", "match")
        }
        takeover = plan_takeover(clusters, copied, list_topic_names(admin, timeout_s))
        # Before anything is created: a refusal must leave the target as it was.
        refuse_if_the_flow_copied(clusters, takeover)
    created: list[str] = []
    for topic in report.plan.with_action("create"):
        try:
            made = create_topic(
                admin,
                topic.topic,
                topic.partitions,
                topic.replication_factor,
                config=topic.configs,
                timeout_s=timeout_s,
            )
        except ConfigError as err:
            raise ConfigError(
                f"migration {migration.name}: the target refused topic {topic.topic}: {err}"
                + (f" (created before it: {', '.join(created)})" if created else "")
            ) from err
        if made:
            created.append(topic.topic)
    if takeover is not None and clusters is not None:
        commit_takeover(clusters, takeover)
    state = started(stored.state, clients.clock.time_ms(), created)
    if takeover is not None:
        starts: dict[str, dict[int, int]] = {}
        for (name, partition), offset in takeover.starts.items():
            starts.setdefault(name, {})[partition] = offset
        state = replace(state, takeover=starts)
    if not store.coordinator.put(store.key(migration.name), state.to_json(), index=stored.index):
        raise ConflictError(
            store.key(migration.name), f"migration {migration.name} changed while starting; retry"
        )
    return StartReport(report, tuple(created), state, takeover)
