"""Read a migration's two clusters and plan it: the I/O around :func:`plan_migration`.

From the source: every topic's partitions and replication factor (cluster metadata) and, for the
topics the migration selects, the configs they set explicitly and whether they are compacted.
From the target: its brokers, its topics and, for those the source also has, whether they are
compacted, and the topic config names it knows (read from one of its topics). Nothing is
created or changed on either cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.admin import describe_topic_configs
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import refused_by_acl, translated
from drsvc.kafka.types import AdminClient, ClusterMetadata
from drsvc.topology.models import Migration, Topology
from failover.migration_plan import (
    MigrationPlan,
    SourceTopic,
    TargetCluster,
    TargetTopic,
    plan_migration,
)
from failover.topic_rules import internal_topic_reason


@dataclass(frozen=True)
class MigrationPlanReport:
    """A migration's plan with what it was made from."""

    migration: Migration
    source_brokers: int
    target_brokers: int
    plan: MigrationPlan

    def as_dict(self) -> dict[str, object]:
        plan = self.plan
        return {
            "migration": self.migration.name,
            "source": self.migration.source,
            "target": self.migration.target,
            "source_brokers": self.source_brokers,
            "target_brokers": self.target_brokers,
            "conflicts": len(plan.with_action("conflict")),
            "topics": [topic.as_dict() for topic in plan.topics],
        }


def read_migration_plan(
    topology: Topology,
    migration: Migration,
    bootstrap: Mapping[str, str],
    timeout_s: float = 10.0,
    *,
    clients: KafkaClients | None = None,
) -> MigrationPlanReport:
    """Plan ``migration`` against its clusters as they are now (read only). ``bootstrap`` maps
    aliases to bootstrap servers that win over the topology's; ``clients`` is the factory to
    reach the clusters with instead (:func:`migration_clients` of the same)."""
    if clients is None:
        clients = migration_clients(topology, migration, bootstrap)
    source_admin = clients.admin(migration.source)
    target_admin = clients.admin(migration.target)
    source_meta = _metadata(source_admin, migration.source, timeout_s)
    target_meta = _metadata(target_admin, migration.target, timeout_s)
    names = topology.internal_names()
    selected = migration.topics.to_filter()

    sources: list[SourceTopic] = []
    for name, topic in source_meta.topics.items():
        partitions = topic.partitions
        rf = max((len(p.replicas) for p in partitions.values()), default=0)
        if not selected.matches(name) or internal_topic_reason(name, names) is not None:
            sources.append(SourceTopic(name, len(partitions), rf))
            continue
        configs = describe_topic_configs(source_admin, name, timeout_s)
        sources.append(
            SourceTopic(
                name,
                partitions=len(partitions),
                replication_factor=rf,
                configs=configs.explicit,
                compacted=_compacted(configs.effective),
            )
        )

    source_names = {topic.name for topic in sources}
    target_topics: dict[str, TargetTopic] = {}
    known_configs: frozenset[str] | None = None
    for name, topic in sorted(target_meta.topics.items()):
        compacted = False
        if name in source_names and selected.matches(name):
            effective = describe_topic_configs(target_admin, name, timeout_s).effective
            compacted = _compacted(effective)
            known_configs = known_configs or frozenset(effective)
        target_topics[name] = TargetTopic(name, len(topic.partitions), compacted)
    if known_configs is None:
        known_configs = _known_configs(target_admin, sorted(target_meta.topics), timeout_s)

    target = TargetCluster(
        brokers=len(target_meta.brokers), topics=target_topics, known_configs=known_configs
    )
    plan = plan_migration(
        sources,
        target,
        topics=selected,
        names=names,
        replication_factor=migration.overrides.replication_factor,
    )
    return MigrationPlanReport(
        migration=migration,
        source_brokers=len(source_meta.brokers),
        target_brokers=len(target_meta.brokers),
        plan=plan,
    )


def migration_clients(
    topology: Topology, migration: Migration, bootstrap: Mapping[str, str]
) -> KafkaClients:
    """The client factory of a migration's two clusters, with the bootstrap servers of
    ``bootstrap`` that name them (the others are another topology's business)."""
    wanted = {migration.source, migration.target}
    return KafkaClients(
        topology, {alias: servers for alias, servers in bootstrap.items() if alias in wanted}
    )


def _metadata(admin: AdminClient, alias: str, timeout_s: float) -> ClusterMetadata:
    with translated("reading the cluster metadata", alias):
        metadata: ClusterMetadata = admin.list_topics(timeout=timeout_s)
    if not metadata.brokers:
        raise KafkaUnavailableError(f"cluster '{alias}': no broker answered in {timeout_s:.0f}s")
    return metadata


def _compacted(effective: Mapping[str, str]) -> bool:
    policy = effective.get("cleanup.policy", "delete")
    return "compact" in {part.strip() for part in policy.split(",")}


def _known_configs(
    admin: AdminClient, topics: list[str], timeout_s: float
) -> frozenset[str] | None:
    """The topic config names the target knows, read from the first of ``topics`` whose configs
    the principal may describe. On a secured cluster the migrator sees other topics than its
    own (metadata needs only DESCRIBE) but may describe the configs of its own alone, so a
    refusal moves on to the next; None when none can be read: the plan then leaves config
    names unchecked and the target refuses an unknown one when the topic is created."""
    for name in topics:
        try:
            return frozenset(describe_topic_configs(admin, name, timeout_s).effective)
        except ConfigError as err:
            if not refused_by_acl(err):
                raise
    return None
