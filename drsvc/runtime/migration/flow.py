"""A migration's flow: the one-way identity flow ``source -> target`` over the migration's topics.

A migration needs no flow in the topology file: :func:`migration_topology` is the topology with
that flow added, which is what the replication engine, status and the failover executor are given
for the migration's commands. Names stay the same on the target (identity policy); every copy
carries the provenance header, so loops are impossible even though names do not show the origin.
A topology that already has a flow between the two clusters is refused: two flows would write
the same target partitions.
"""

from __future__ import annotations

from drsvc.errors import ConfigError
from drsvc.topology.models import Flow, Migration, Topology, TopologyProblems


def migration_flow(migration: Migration) -> Flow:
    """The identity flow that copies ``migration``'s topics, at least once, from the start."""
    return Flow.model_validate(
        {
            "source": migration.source,
            "target": migration.target,
            "topics": migration.topics,
            "policy": "identity",
            "delivery": "at-least-once",
            "start": "earliest",
            "linger_ms": migration.linger_ms,
        }
    )


def migration_topology(topology: Topology, migration: Migration) -> Topology:
    """``topology`` with the migration's flow as its only flow between the two clusters."""
    clash = [
        f.id for f in topology.flows if {f.source, f.target} == {migration.source, migration.target}
    ]
    if clash:
        raise ConfigError(
            f"migration {migration.name}: the topology already has flow(s) {', '.join(clash)}"
            f" between {migration.source} and {migration.target}; a migration runs its own"
            " identity flow, which would write the same partitions: remove them from the"
            " topology used for the migration"
        )
    try:
        return Topology.model_validate(
            {
                "name": topology.name,
                "namespace": topology.namespace,
                "clusters": dict(topology.clusters),
                "flows": (*topology.flows, migration_flow(migration)),
                "applications": topology.applications,
                "migrations": topology.migrations,
                "internal_topics": topology.internal_topics,
                "controller": topology.controller,
            }
        )
    except (TopologyProblems, ValueError) as err:
        raise ConfigError(
            f"migration {migration.name}: its flow {migration.source}->{migration.target}"
            f" does not fit the topology: {err}"
        ) from err
