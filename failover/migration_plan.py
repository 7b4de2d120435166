"""What a migration creates on its target, topic by topic, and what it cannot match (pure).

Given the source cluster's topics (partitions, replication factor, the configs they set
explicitly, whether they are compacted) and what the target already holds, :func:`plan_migration`
decides for each topic the migration selects:

* **create**: not on the target yet; created with the source's partition count, a replication
  factor of the source's (or the migration's override) but never more than the target's brokers,
  and the source's explicit configs except those that only mean something on the source cluster;
* **match**: already on the target with the same partition count (and cleanup policy);
* **conflict**: cannot be matched; the reason says why: the target's topic has another partition
  count or cleanup policy, the name collides with a target topic in Kafka's metric names
  (``a.b`` and ``a_b``), or the target would refuse or mis-serve a config (one it does not know,
  a cleanup policy it has no such value for, ``min.insync.replicas`` above the replication factor);
* **skip**: internal topics (Kafka's, drsvc's, Connect's, MirrorMaker 2's ...) and heartbeats,
  which every cluster keeps for itself; a migration never copies them.

Nothing here does I/O; ``drsvc.runtime.migration`` reads the clusters and calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from failover.topic_rules import InternalTopicNames, NameFilter, internal_topic_reason

Action = Literal["create", "match", "conflict", "skip"]
ACTIONS: tuple[Action, ...] = ("create", "match", "conflict", "skip")

#: Topic configs that belong to the source cluster, not to the topic's data: replica throttles
#: name the source's brokers and are set and cleared by reassignment tools; placement constraints
#: name its racks. They are never copied.
SOURCE_LOCAL_CONFIGS: Mapping[str, str] = {
    "leader.replication.throttled.replicas": "broker-managed replica throttle of the source",
    "follower.replication.throttled.replicas": "broker-managed replica throttle of the source",
    "confluent.placement.constraints": "names the source cluster's racks",
}

CLEANUP_POLICIES = frozenset({"compact", "delete"})


@dataclass(frozen=True)
class SourceTopic:
    """A topic on the migration's source; ``configs`` holds only those it sets explicitly."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    compacted: bool = False


@dataclass(frozen=True)
class TargetTopic:
    """A topic that already exists on the target."""

    name: str
    partitions: int
    compacted: bool = False


@dataclass(frozen=True)
class TargetCluster:
    """What the target holds: its broker count, its topics and, when known, every topic config
    name it accepts (None: unknown, configs are not checked against it)."""

    brokers: int
    topics: Mapping[str, TargetTopic] = field(default_factory=dict)
    known_configs: frozenset[str] | None = None


@dataclass(frozen=True)
class TopicPlan:
    """The decision for one source topic, with the reason for it."""

    topic: str
    action: Action
    reason: str
    partitions: int
    replication_factor: int
    """On the target: what is created (create), else the source's."""
    compacted: bool
    configs: Mapping[str, str] = field(default_factory=dict)
    """Configs the created topic gets (create only)."""
    skipped_configs: Mapping[str, str] = field(default_factory=dict)
    """Source configs that are not copied, each with why."""

    def as_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "action": self.action,
            "reason": self.reason,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "compacted": self.compacted,
            "configs": dict(sorted(self.configs.items())),
            "skipped_configs": dict(sorted(self.skipped_configs.items())),
        }


@dataclass(frozen=True)
class MigrationPlan:
    """Every selected source topic's decision, in name order."""

    topics: tuple[TopicPlan, ...]

    def with_action(self, action: Action) -> tuple[TopicPlan, ...]:
        return tuple(plan for plan in self.topics if plan.action == action)

    @property
    def has_conflicts(self) -> bool:
        return any(plan.action == "conflict" for plan in self.topics)


def plan_migration(
    source_topics: Iterable[SourceTopic],
    target: TargetCluster,
    *,
    topics: NameFilter | None = None,
    names: InternalTopicNames | None = None,
    replication_factor: int | None = None,
) -> MigrationPlan:
    """Decide, for every source topic ``topics`` selects, whether it is created, already matches,
    conflicts or is skipped (see the module's docstring). ``replication_factor`` is the
    migration's override of the source topics' own."""
    if target.brokers < 1:
        raise ValueError(f"the target has {target.brokers} brokers; it needs at least one")
    if replication_factor is not None and replication_factor < 1:
        raise ValueError(f"replication factor must be at least 1 (got {replication_factor})")
    selected = topics if topics is not None else NameFilter()
    own = names if names is not None else InternalTopicNames()
    plans = [
        _plan_topic(topic, target, own, replication_factor)
        for topic in sorted(source_topics, key=lambda t: t.name)
        if selected.matches(topic.name)
    ]
    return MigrationPlan(tuple(plans))


def _plan_topic(
    topic: SourceTopic, target: TargetCluster, names: InternalTopicNames, override: int | None
) -> TopicPlan:
    def decided(
        action: Action,
        reason: str,
        rf: int | None = None,
        configs: Mapping[str, str] | None = None,
        skipped: Mapping[str, str] | None = None,
    ) -> TopicPlan:
        return TopicPlan(
            topic=topic.name,
            action=action,
            reason=reason,
            partitions=topic.partitions,
            replication_factor=topic.replication_factor if rf is None else rf,
            compacted=topic.compacted,
            configs=dict(configs or {}),
            skipped_configs=dict(skipped or {}),
        )

    internal = internal_topic_reason(topic.name, names)
    if internal is not None:
        return decided("skip", f"internal topic ({internal}); a migration never copies it")
    if topic.name == names.heartbeats or topic.name.endswith("." + names.heartbeats):
        return decided("skip", "drsvc heartbeats; every cluster keeps its own")

    existing = target.topics.get(topic.name)
    if existing is not None:
        if existing.partitions != topic.partitions:
            return decided(
                "conflict",
                f"exists on the target with {existing.partitions} partitions, the source has"
                f" {topic.partitions}; records would land in other partitions",
            )
        if existing.compacted != topic.compacted:
            return decided(
                "conflict",
                f"exists on the target {_compaction(existing.compacted)}, the source topic is"
                f" {_compaction(topic.compacted)}",
            )
        return decided("match", f"exists on the target with {topic.partitions} partitions")

    clash = _colliding_topic(topic.name, target.topics)
    if clash is not None:
        kind = "internal topic" if internal_topic_reason(clash, names) else "topic"
        return decided(
            "conflict",
            f"name collides with the target's {kind} {clash!r} ('.' and '_' are the same in"
            " Kafka's metric names); the target refuses to create it",
        )

    wanted = override if override is not None else topic.replication_factor
    rf = min(wanted, target.brokers)
    configs = {k: v for k, v in topic.configs.items() if k not in SOURCE_LOCAL_CONFIGS}
    skipped = {k: SOURCE_LOCAL_CONFIGS[k] for k in topic.configs if k in SOURCE_LOCAL_CONFIGS}
    refused = _refused_configs(configs, rf, target.known_configs)
    if refused:
        return decided("conflict", "; ".join(refused), rf=rf, configs=configs, skipped=skipped)
    reason = f"create with {topic.partitions} partitions, replication factor {rf}"
    if rf < wanted:
        reason += f" (the target has only {target.brokers} brokers, {wanted} asked)"
    return decided("create", reason, rf=rf, configs=configs, skipped=skipped)


def _refused_configs(
    configs: Mapping[str, str], rf: int, known: frozenset[str] | None
) -> list[str]:
    problems: list[str] = []
    for key in sorted(configs):
        value = configs[key]
        if known is not None and key not in known:
            problems.append(f"config {key}={value}: the target does not know it and would refuse")
        elif key == "cleanup.policy":
            values = {part.strip() for part in value.split(",")}
            if not values <= CLEANUP_POLICIES:
                problems.append(
                    f"config cleanup.policy={value}: the target accepts only compact, delete"
                )
        elif key == "min.insync.replicas" and value.isdigit() and int(value) > rf:
            problems.append(
                f"config min.insync.replicas={value} is above the replication factor {rf}:"
                " producers with acks=all would be refused"
            )
    return problems


def _colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """The existing topic whose name differs from ``name`` only in '.' versus '_', if any."""
    folded = name.replace(".", "_")
    for other in sorted(existing):
        if other != name and other.replace(".", "_") == folded:
            return other
    return None


def _compaction(compacted: bool) -> str:
    return "compacted" if compacted else "not compacted"
