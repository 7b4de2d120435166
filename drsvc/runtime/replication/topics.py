"""Topic discovery for one flow, and the remote topics it writes to.

Discovery lists the source's topics through the Admin API and decides with the pure rules of
:mod:`failover.topic_rules` (include/exclude patterns, internal topics, loop rule). For every topic
that passes, the remote topic on the target is created with the source's partition count and the
filtered configs of :mod:`failover.topic_configs`, grown when the source grows, and its configs are
re-synced periodically.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import (
    TopicInfo,
    create_topic,
    describe_topic_configs,
    describe_topics,
    grow_partitions,
    list_topic_names,
    set_topic_configs,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock, SystemClock
from drsvc.kafka.types import AdminClient
from drsvc.runtime.replication.settings import WorkerSettings
from failover.replication_policy import ReplicationPolicy
from failover.topic_configs import config_drift, remote_topic_configs
from failover.topic_rules import (
    InternalTopicNames,
    NameFilter,
    is_heartbeats_topic,
    topic_verdict,
)

log = logging.getLogger(__name__)


class FlowTopicRules(Protocol):
    """What decides which of a source's topics a flow copies, and under which names (a
    :class:`~drsvc.runtime.replication.settings.WorkerSettings` or a :class:`TopicMirror`)."""

    @property
    def source_alias(self) -> str: ...

    @property
    def target_alias(self) -> str: ...

    @property
    def policy(self) -> ReplicationPolicy: ...

    @property
    def topics(self) -> NameFilter: ...

    @property
    def names(self) -> InternalTopicNames: ...

    @property
    def allow_multi_hop(self) -> bool: ...


@dataclass(frozen=True)
class TopicRoutes:
    """Where a flow copies some of its source's topics, and why it leaves the others."""

    #: source topic -> its remote name on the target
    copied: dict[str, str]
    #: source topic -> why the flow does not copy it
    skipped: dict[str, str]


def topic_routes(
    topic_names: Iterable[str], flow: FlowTopicRules, *, heartbeats: bool
) -> TopicRoutes:
    """The routes of ``flow`` for those of ``topic_names`` (on its source) that are heartbeats
    topics (``heartbeats=True``) or that are not: the two are copied apart, heartbeats on a
    lane of their own that never waits behind a data backlog. The loop and multi-hop rules
    apply to both; topic filters apply to data topics only (heartbeats are always copied)."""
    copied: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in sorted(topic_names):
        if is_heartbeats_topic(name, flow.policy, flow.names) != heartbeats:
            continue
        verdict = topic_verdict(
            name,
            flow.source_alias,
            flow.target_alias,
            flow.policy,
            topics=flow.topics,
            names=flow.names,
            allow_multi_hop=flow.allow_multi_hop,
        )
        if verdict.replicate and verdict.target_topic is not None:
            copied[name] = verdict.target_topic
        else:
            skipped[name] = verdict.reason
    return TopicRoutes(copied, skipped)


def flow_clients(settings: WorkerSettings, clock: Clock | None = None) -> KafkaClients:
    """A client factory for a worker's flow: its source and target, by alias, reached with the
    resolved settings the worker holds."""
    return KafkaClients.for_configs(
        {
            settings.source_alias: settings.source_client,
            settings.target_alias: settings.target_client,
        },
        clock=clock,
    )


@dataclass(frozen=True)
class MirroredTopic:
    """A source topic the flow copies, and where its copies go."""

    source: TopicInfo
    remote_name: str
    remote: TopicInfo
    #: the remote topic's configs as drsvc sets them (retention among them)
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TopicMirror:
    """Keeps the set of mirrored topics of one flow current."""

    source_alias: str
    target_alias: str
    policy: ReplicationPolicy
    topics: NameFilter
    names: InternalTopicNames
    allow_multi_hop: bool
    source_admin: AdminClient
    target_admin: AdminClient
    config_resync_s: float = 60.0
    clock: Clock = field(default_factory=SystemClock)
    mirrored: dict[str, MirroredTopic] = field(default_factory=dict)
    _desired_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    _last_config_sync: float = 0.0
    _skipped: dict[str, str] = field(default_factory=dict)

    def refresh(self) -> dict[str, MirroredTopic]:
        """Discover source topics, create or grow remote topics; return what is mirrored now.

        A topic whose id changed (deleted and recreated on the source) or that disappeared is
        reported loudly: its copies on the target stay, but old offset syncs no longer apply.
        """
        # heartbeats topics are copied on their own lane, never behind a data backlog
        routes = topic_routes(list_topic_names(self.source_admin), self, heartbeats=False)
        wanted = routes.copied
        for name, reason in routes.skipped.items():
            if self._skipped.get(name) != reason:
                self._skipped[name] = reason
                log.debug(
                    "flow %s->%s skips %s: %s", self.source_alias, self.target_alias, name, reason
                )
        sources = describe_topics(self.source_admin, sorted(wanted))
        for gone in sorted(set(self.mirrored) - set(sources)):
            log.warning(
                "source topic %s on %s was deleted; its copy %s on %s is kept",
                gone,
                self.source_alias,
                self.mirrored[gone].remote_name,
                self.target_alias,
            )
            del self.mirrored[gone]
        resync = self.clock.monotonic() - self._last_config_sync > self.config_resync_s
        # The remote topics are looked at on every refresh, not only at a config resync: one
        # deleted (and maybe recreated) on the target must be noticed within seconds, or copies
        # would go to a new topic under syncs that still name the old one's id.
        known = [m.remote_name for n, m in self.mirrored.items() if n in sources]
        remotes = describe_topics(self.target_admin, known) if known else {}
        for name, source in sources.items():
            previous = self.mirrored.get(name)
            if previous is not None and not resync:
                remote = remotes.get(previous.remote_name)
                if remote is None or remote.topic_id != previous.remote.topic_id:
                    log.error(
                        "remote topic %s on %s was deleted%s: offset syncs of the old topic no "
                        "longer apply; copying into the new one from the source's start",
                        previous.remote_name,
                        self.target_alias,
                        "" if remote is None else " and recreated (new topic id)",
                    )
                    previous = None
            if previous is not None and previous.source.topic_id != source.topic_id:
                log.error(
                    "source topic %s on %s was deleted and recreated (new topic id): offset "
                    "syncs of the old topic no longer apply; copying the new topic from its start",
                    name,
                    self.source_alias,
                )
            if source.offline_partitions:
                log.warning(
                    "source topic %s has offline partitions %s",
                    name,
                    list(source.offline_partitions),
                )
            self.mirrored[name] = self._ensure_remote(source, wanted[name], previous, resync)
        if resync:
            self._last_config_sync = self.clock.monotonic()
        return dict(self.mirrored)

    def _ensure_remote(
        self, source: TopicInfo, remote_name: str, previous: MirroredTopic | None, resync: bool
    ) -> MirroredTopic:
        if (
            previous is not None
            and previous.source == source
            and previous.remote.partitions >= source.partitions
            and not resync
        ):
            return previous
        configs = self._desired(source.name, refresh=resync or previous is None)
        remote = describe_topics(self.target_admin, [remote_name]).get(remote_name)
        if remote is None:
            created = create_topic(
                self.target_admin, remote_name, source.partitions, config=configs
            )
            if created:
                log.info(
                    "created %s on %s with %d partitions",
                    remote_name,
                    self.target_alias,
                    source.partitions,
                )
            remote = self._describe_remote(remote_name)
        elif resync:
            actual = describe_topic_configs(self.target_admin, remote_name).effective
            drift = config_drift(configs, actual)
            if drift:
                log.info(
                    "re-syncing configs of %s on %s: %s",
                    remote_name,
                    self.target_alias,
                    sorted(drift),
                )
                set_topic_configs(self.target_admin, remote_name, drift)
        if remote.partitions < source.partitions:
            log.info(
                "growing %s on %s from %d to %d partitions",
                remote_name,
                self.target_alias,
                remote.partitions,
                source.partitions,
            )
            grow_partitions(self.target_admin, remote_name, source.partitions)
            remote = self._describe_remote(remote_name)
        if remote.offline_partitions:
            log.warning(
                "remote topic %s on %s has offline partitions %s",
                remote_name,
                self.target_alias,
                list(remote.offline_partitions),
            )
        return MirroredTopic(
            source=source, remote_name=remote_name, remote=remote, configs=dict(configs)
        )

    def _describe_remote(self, remote_name: str) -> TopicInfo:
        # Topic creation is asynchronous on the brokers: wait briefly until metadata has it.
        deadline = self.clock.monotonic() + 15.0
        while True:
            found = describe_topics(self.target_admin, [remote_name]).get(remote_name)
            if found is not None:
                return found
            if self.clock.monotonic() > deadline:
                raise KafkaUnavailableError(f"{remote_name} on {self.target_alias} did not appear")
            self.clock.sleep(0.2)

    def _desired(self, source_name: str, refresh: bool) -> Mapping[str, str]:
        if refresh or source_name not in self._desired_configs:
            configs = describe_topic_configs(self.source_admin, source_name)
            limit = configs.effective.get("max.message.bytes")
            self._desired_configs[source_name] = remote_topic_configs(
                configs.explicit, int(limit) if limit is not None else None
            )
        return self._desired_configs[source_name]


SYNC_TOPIC_CONFIGS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
}


def mirror_for(settings: WorkerSettings, *, clients: KafkaClients | None = None) -> TopicMirror:
    """The topic mirror of a worker's flow, with the admin clients of its source and target
    from ``clients`` (default: :func:`flow_clients`), and its clock."""
    kafka = clients if clients is not None else flow_clients(settings)
    return TopicMirror(
        source_alias=settings.source_alias,
        target_alias=settings.target_alias,
        policy=settings.policy,
        topics=settings.topics,
        names=settings.names,
        allow_multi_hop=settings.allow_multi_hop,
        source_admin=kafka.admin(settings.source_alias),
        target_admin=kafka.admin(settings.target_alias),
        clock=kafka.clock,
    )


def ensure_sync_topic(mirror: TopicMirror, settings: WorkerSettings) -> None:
    """Create the flow's offset-sync topic on the target (one partition) if it is missing."""
    configs = dict(SYNC_TOPIC_CONFIGS)
    configs["retention.ms"] = str(settings.sync_retention_ms)
    create_topic(mirror.target_admin, settings.sync_topic, partitions=1, config=configs)
