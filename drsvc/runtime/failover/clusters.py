"""What the failover executor reads and changes on the Kafka clusters, as one interface.

:class:`FailoverClusters` is the whole of the executor's Kafka I/O, so the executor's logic is
unit-tested on a fake and runs against real clusters through :class:`KafkaFailoverClusters`.
Every read goes through code that already exists: translation (``drsvc translate``), the
checkpoint topic reader and the admin helpers; nothing is translated twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from drsvc.errors import (
    ConfigError,
    CredentialsRefusedError,
    DrsvcError,
    KafkaUnavailableError,
    TemporaryError,
)
from drsvc.kafka.admin import (
    PartitionError,
    alter_group_offsets,
    describe_group,
    describe_topics,
    list_offsets,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import kafka_error, translated
from drsvc.kafka.types import AdminClient, ClusterMetadata, KafkaError
from drsvc.runtime.checkpoints.checkpoint_topic import read_checkpoints
from drsvc.runtime.failover.fencing import FencingReport, fence_transactional_ids
from drsvc.runtime.failover.replay import ReplaySource, ReplayTarget, replay
from drsvc.runtime.replication.repair import unsynced_copies
from drsvc.runtime.translation.cluster_view import KafkaClusterView
from drsvc.runtime.translation.group_translation import GroupTranslation, translate_groups
from drsvc.runtime.translation.kept_syncs import KeptSyncs
from drsvc.topology.models import Topology
from failover.checkpoints import Checkpoint, CheckpointKey
from failover.site_recovery import DivergentRange, PartitionOffset, crossed_end

__all__ = ["PROBE_TRIES", "FailoverClusters", "GroupMember", "KafkaFailoverClusters", "Partition"]

Partition = tuple[str, int]

#: how many metadata requests a cluster gets before it counts as not answering: one slow answer
#: (a broker's GC pause, a WAN hiccup) must not turn a planned failover into a refusal
PROBE_TRIES = 3


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group, as its cluster describes it (who to go and stop)."""

    member_id: str
    client_id: str
    host: str

    def __str__(self) -> str:
        return f"{self.member_id} (client id {self.client_id}, host {self.host})"


class FailoverClusters(Protocol):
    """The Kafka side of a failover. Unreachable clusters raise
    :class:`drsvc.errors.KafkaUnavailableError`."""

    def reachable(
        self, alias: str, timeout_s: float | None = None, *, tries: int = PROBE_TRIES
    ) -> bool:
        """Does the cluster answer a metadata request within ``timeout_s`` (default: the probe
        timeout) in one of ``tries`` attempts? Raises :class:`CredentialsRefusedError` when it
        refused the credentials: that is no answer about its health."""
        ...

    def translate(self, group: str, from_alias: str, to_alias: str) -> GroupTranslation | None:
        """The group's committed offsets on ``from_alias`` translated to ``to_alias`` (None:
        the group has never committed there)."""
        ...

    def translate_groups(
        self, groups: Sequence[str], from_alias: str, to_alias: str
    ) -> dict[str, GroupTranslation | None]:
        """:meth:`translate` for each of ``groups``, reading each offset-sync topic once for
        all of them."""
        ...

    def checkpoints(self, from_alias: str, to_alias: str) -> dict[CheckpointKey, Checkpoint]:
        """The newest checkpoint per key that the flow ``from_alias -> to_alias`` wrote on
        ``to_alias`` (readable while ``from_alias`` is gone)."""
        ...

    def replicated(
        self, from_alias: str, to_alias: str, topics: Collection[str]
    ) -> dict[Partition, int]:
        """Per source partition of ``topics``, the next source offset whose copy is on
        ``to_alias`` (from the flow's offset syncs there)."""
        ...

    def crossed(
        self, from_alias: str, to_alias: str, copies: Mapping[str, str]
    ) -> dict[Partition, int]:
        """Like :meth:`replicated`, but exact: per source partition of ``copies`` (source
        topic -> its copy on ``to_alias``), the next source offset past its last copy on
        ``to_alias``, also when that copy has no sync yet."""
        ...

    def partition_ends(self, alias: str, topics: Collection[str]) -> dict[Partition, int]:
        """The end (last stable offset) of every partition of those ``topics`` that exist."""
        ...

    def earliest(self, alias: str, partitions: Collection[Partition]) -> dict[Partition, int]: ...

    def live_members(self, alias: str, group: str) -> int:
        """How many members the group has on the cluster right now (0: none, or no group)."""
        ...

    def group_members(self, alias: str, group: str) -> list[GroupMember]:
        """The group's members on the cluster right now, with their client ids and hosts
        (empty: none, or no such group)."""
        ...

    def set_offsets(
        self, alias: str, group: str, offsets: Mapping[Partition, int]
    ) -> dict[Partition, PartitionError | None]:
        """Commit ``offsets`` for ``group`` as an outsider; per partition None or the broker's
        refusal (a group with live members is refused)."""
        ...

    def fence(
        self, alias: str, transactional_ids: Sequence[str], timeout_s: float
    ) -> FencingReport:
        """Fence the transactional producers ``transactional_ids`` on the cluster (see
        :mod:`.fencing`); never raises for one id, the report says what was fenced."""
        ...

    def replay(
        self,
        from_alias: str,
        into_alias: str,
        ranges: Collection[DivergentRange],
        failover_id: str,
        replay_from: Collection[PartitionOffset],
    ) -> int:
        """Copy the records of ``ranges`` on ``from_alias`` to the same topics on
        ``into_alias``, marked as replayed (:mod:`.replay`); copies of an earlier attempt past
        ``replay_from`` are not made again. Returns how many are copied in all."""
        ...


class KafkaFailoverClusters:
    """:class:`FailoverClusters` over the topology's real clusters.

    Its admin clients and producers come from one :class:`~drsvc.kafka.clients.KafkaClients`
    (``clients``, default: one over ``topology`` and ``bootstraps``), which keeps one admin
    client per cluster for the life of this object. The translation view, the checkpoint,
    repair and replay readers are handed the cluster's resolved settings
    (:meth:`client_config`), as they take them.

    Offset-sync topics are read into the indexes of ``kept`` (one of its own when None), which
    the translation views keep and extend: the first translation reads a sync topic whole, later
    ones only the syncs written since. A failover's executor holds one of these objects for the
    whole failover, so its steps share the indexes; objects made per request (the API's) share
    them through one ``kept`` passed to each.
    """

    def __init__(
        self,
        topology: Topology,
        bootstraps: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 30.0,
        probe_timeout_s: float = 5.0,
        clients: KafkaClients | None = None,
        kept: KeptSyncs | None = None,
    ) -> None:
        self._topology = topology
        self._bootstraps = dict(bootstraps or {})
        self._timeout_s = timeout_s
        self._probe_timeout_s = probe_timeout_s
        self._clients = clients if clients is not None else KafkaClients(topology, bootstraps)
        self._views: dict[str, KafkaClusterView] = {}
        self._kept = kept if kept is not None else KeptSyncs()

    def client_config(self, alias: str) -> dict[str, str]:
        """Where cluster ``alias`` is and how to authenticate to it, secrets read now."""
        return self._topology.cluster(alias).client_config(self._bootstraps.get(alias))

    def _view(self, alias: str) -> KafkaClusterView:
        if alias not in self._views:
            # The view shares this factory: one admin client per cluster, not one each.
            self._views[alias] = KafkaClusterView(
                alias,
                self.client_config(alias),
                self._timeout_s,
                clients=self._clients,
                kept=self._kept,
            )
        return self._views[alias]

    def _admin(self, alias: str) -> AdminClient:
        return self._clients.admin(alias)

    def _metadata(self, alias: str, timeout_s: float | None) -> ClusterMetadata | None:
        """The cluster's metadata, or None when it does not answer (with brokers) in time.
        Asked through the cluster's one admin client, whose connections outlive a probe: a new
        client per probe spends the probe's time on connecting (and TLS, SASL) first."""
        admin = self._admin(alias)
        try:
            metadata = admin.list_topics(
                timeout=self._probe_timeout_s if timeout_s is None else timeout_s
            )
        except Exception:
            refusal = self._clients.credentials_refused(alias)
            if refusal is not None:
                # Without this a wrong password or an untrusted certificate would read as an
                # outage: a planned failover would turn unplanned, a probe would vote "down".
                raise _refused(alias, refusal) from None
            return None
        return metadata if metadata.brokers else None

    def reachable(
        self, alias: str, timeout_s: float | None = None, *, tries: int = PROBE_TRIES
    ) -> bool:
        return any(self._metadata(alias, timeout_s) is not None for _ in range(max(1, tries)))

    def serves(self, alias: str, topics: Collection[str], timeout_s: float | None = None) -> bool:
        """Does the cluster answer a metadata request, and has every partition of those of
        ``topics`` it holds a leader? Raises :class:`KafkaUnavailableError` naming the
        partitions without one: the cluster answers, but cannot serve them."""
        metadata = self._metadata(alias, timeout_s)
        if metadata is None:
            return False
        leaderless = sorted(
            f"{name}-{p.id}"
            for name in topics
            if (topic := metadata.topics.get(name)) is not None and topic.error is None
            for p in topic.partitions.values()
            if p.leader < 0
        )
        if leaderless:
            shown = ", ".join(leaderless[:5]) + (" ..." if len(leaderless) > 5 else "")
            raise KafkaUnavailableError(
                f"{alias} answers but {len(leaderless)} partition(s) have no leader: {shown}"
            )
        return True

    def translate(self, group: str, from_alias: str, to_alias: str) -> GroupTranslation | None:
        return self.translate_groups([group], from_alias, to_alias)[group]

    def translate_groups(
        self, groups: Sequence[str], from_alias: str, to_alias: str
    ) -> dict[str, GroupTranslation | None]:
        views = {alias: self._view(alias) for alias in (from_alias, to_alias)}
        return translate_groups(self._topology, groups, from_alias, to_alias, views)

    def checkpoints(self, from_alias: str, to_alias: str) -> dict[CheckpointKey, Checkpoint]:
        topic = self._topology.internal_names().checkpoints_topic(from_alias)
        read = read_checkpoints(
            self.client_config(to_alias),
            topic,
            cluster=to_alias,
            timeout_s=self._timeout_s,
            clients=self._clients,
        )
        return dict(read.checkpoints)

    def replicated(
        self, from_alias: str, to_alias: str, topics: Collection[str]
    ) -> dict[Partition, int]:
        sync_topic = self._topology.internal_names().offset_syncs_topic(from_alias)
        read = self._view(to_alias).read_syncs(sync_topic, topics)
        found: dict[Partition, int] = {}
        wanted = set(topics)
        for tp in read.index.partitions() if read.exists else ():
            end = read.index.replicated_end(tp)
            if tp.topic in wanted and end is not None:
                found[(tp.topic, tp.partition)] = end
        return found

    def crossed(
        self, from_alias: str, to_alias: str, copies: Mapping[str, str]
    ) -> dict[Partition, int]:
        # An at-least-once worker writes a run's syncs a moment after its copies land; one that
        # lost its partitions (its source cluster went away and its group session with it) or
        # died in that moment leaves copies no sync maps until the next owner rebuilds them. The
        # target's tail past the syncs says what crossed. Exactly once, a copy is committed in
        # the transaction that carries its sync, so the syncs alone are exact (and the tail may
        # hold aborted copies, which never crossed).
        synced = self.replicated(from_alias, to_alias, copies)
        if not copies or self._topology.flow(from_alias, to_alias).delivery == "exactly-once":
            return synced
        target = self.client_config(to_alias)
        found = dict(synced)
        for topic, partition in sorted(self.partition_ends(from_alias, copies)):
            start = synced.get((topic, partition), 0)
            tail = unsynced_copies(
                target, copies[topic], partition, from_alias, topic, start, self._timeout_s
            )
            found[(topic, partition)] = crossed_end(start, (source for source, _ in tail))
        return found

    @contextmanager
    def _refusal_named(self, alias: str) -> Iterator[None]:
        """A request of the block that found no answer because ``alias`` refused the admin
        client's credentials says so (:class:`CredentialsRefusedError`) instead of reading as an
        outage."""
        try:
            yield
        except TemporaryError:
            refusal = self._clients.credentials_refused(alias)
            if refusal is None:
                raise
            raise _refused(alias, refusal) from None

    def partition_ends(self, alias: str, topics: Collection[str]) -> dict[Partition, int]:
        admin = self._admin(alias)
        with self._refusal_named(alias):
            described = describe_topics(admin, sorted(set(topics)), self._timeout_s)
            partitions = [
                (name, p) for name, info in described.items() for p in range(info.partitions)
            ]
            return list_offsets(admin, partitions, "latest", self._timeout_s)

    def earliest(self, alias: str, partitions: Collection[Partition]) -> dict[Partition, int]:
        with self._refusal_named(alias):
            return list_offsets(self._admin(alias), partitions, "earliest", self._timeout_s)

    def live_members(self, alias: str, group: str) -> int:
        with self._refusal_named(alias):
            return describe_group(self._admin(alias), group, self._timeout_s).members

    def group_members(self, alias: str, group: str) -> list[GroupMember]:
        admin = self._admin(alias)
        try:
            with (
                self._refusal_named(alias),
                translated(f"describing consumer group '{group}'", alias),
            ):
                future = admin.describe_consumer_groups([group], request_timeout=self._timeout_s)
                description = future[group].result(timeout=self._timeout_s)
        except DrsvcError as err:
            error = None if err.__cause__ is None else kafka_error(err.__cause__)
            if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return []
            raise
        return [
            GroupMember(str(m.member_id), str(m.client_id), str(m.host))
            for m in description.members
        ]

    def set_offsets(
        self, alias: str, group: str, offsets: Mapping[Partition, int]
    ) -> dict[Partition, PartitionError | None]:
        if any(offset < 0 for offset in offsets.values()):
            raise ConfigError(f"negative offset for group '{group}' on '{alias}': {offsets}")
        with self._refusal_named(alias):
            return alter_group_offsets(self._admin(alias), group, offsets, self._timeout_s)

    def fence(
        self, alias: str, transactional_ids: Sequence[str], timeout_s: float
    ) -> FencingReport:
        return fence_transactional_ids(alias, self._clients, transactional_ids, timeout_s=timeout_s)

    def replay(
        self,
        from_alias: str,
        into_alias: str,
        ranges: Collection[DivergentRange],
        failover_id: str,
        replay_from: Collection[PartitionOffset],
    ) -> int:
        return replay(
            ReplaySource(from_alias, self.client_config(from_alias)),
            ReplayTarget(into_alias, self.client_config(into_alias), replay_from),
            ranges,
            failover_id,
            self._timeout_s,
        )


def _refused(alias: str, refusal: str) -> CredentialsRefusedError:
    return CredentialsRefusedError(
        f"cluster '{alias}' refused drsvc's credentials ({refusal}): check the cluster's"
        " security settings and secrets in the topology"
    )
