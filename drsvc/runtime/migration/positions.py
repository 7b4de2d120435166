"""What ``drsvc migrate verify`` compares, gathered from the clusters and the migration's state:
the committed positions of a migration's groups on both clusters (compared in Spark against where
the copies landed), its copied topics and its takeover."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drsvc.errors import ConfigError
from drsvc.runtime.migration.context import MigrationContext
from drsvc.runtime.migration.status import migration_apps
from drsvc.runtime.status.cluster_reader import KafkaClusterReader
from drsvc.topology.models import Migration, Topology
from failover.offset_syncs import TopicPartition

#: group, topic, partition, position on the source, position on the target (None: none)
Position = tuple[str, str, int, int | None, int | None]


def group_positions(
    topology: Topology,
    migration: Migration,
    bootstrap: Mapping[str, str],
    copied_topics: set[str],
    timeout_s: float = 10.0,
) -> list[Position]:
    """Every partition of the migrated topics of every group of the migration's applications
    that the group committed on the source or the target."""
    readers = {
        alias: KafkaClusterReader(
            alias, topology.cluster(alias).client_config(bootstrap.get(alias)), timeout_s
        )
        for alias in (migration.source, migration.target)
    }
    counts = readers[migration.source].partition_counts()
    found: list[Position] = []
    for app in migration_apps(topology, migration):
        parts = [
            TopicPartition(t, p)
            for t in app.topics
            if t in copied_topics
            for p in range(counts.get(t, 0))
        ]
        for group in app.groups:
            source = readers[migration.source].committed(group, parts)
            target = readers[migration.target].committed(group, parts)
            for tp in parts:
                if tp in source or tp in target:
                    s, t = source.get(tp), target.get(tp)
                    found.append(
                        (
                            group,
                            tp.topic,
                            tp.partition,
                            None if s is None else s.offset,
                            None if t is None else t.offset,
                        )
                    )
    return found


@dataclass(frozen=True)
class MigrationCheck:
    """What ``drsvc migrate verify`` (command and API alike) compares: the migration's copied
    topics on both clusters and its groups' positions on both, gathered once here and handed
    to the Spark job (:func:`drsvc.verify.migration_job.verify_migration`)."""

    migration: str
    source_alias: str
    source_bootstrap: str
    target_bootstrap: str
    topics: tuple[str, ...]
    positions: tuple[Position, ...]
    #: the migration state's ``takeover`` (topic -> partition -> the source offset drsvc took a
    #: MirrorMaker 2 copy over from); None when it did not take one over
    takeover: Mapping[str, Mapping[int, int]] | None


def migration_check(ctx: MigrationContext) -> MigrationCheck:
    """The topics the migration copies, its groups' positions and its takeover, read now.

    Raises :class:`ConfigError` when the migration selects no topic on the source: there is
    nothing to compare, and a verification that compared nothing must not pass."""
    name = ctx.migration.name
    topics = sorted(ctx.reader().copied_topics())
    if not topics:
        raise ConfigError(f"migration {name} selects no topic on the source")
    positions = group_positions(ctx.topology, ctx.migration, ctx.bootstrap, set(topics))
    stored = ctx.store.read(name)
    source, target = ctx.migration.source, ctx.migration.target
    return MigrationCheck(
        migration=name,
        source_alias=source,
        source_bootstrap=_bootstrap_servers(ctx, source),
        target_bootstrap=_bootstrap_servers(ctx, target),
        topics=tuple(topics),
        positions=tuple(positions),
        takeover=stored.state.takeover if stored.state else None,
    )


def _bootstrap_servers(ctx: MigrationContext, alias: str) -> str:
    """Where cluster ``alias`` is: the environment's address, else the topology's."""
    return str(
        ctx.topology.cluster(alias).client_config(ctx.bootstrap.get(alias))["bootstrap.servers"]
    )
