"""The committed positions of a migration's groups on both clusters, for ``drsvc migrate
verify`` (which compares them in Spark against where the copies landed)."""

from __future__ import annotations

from collections.abc import Mapping

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
