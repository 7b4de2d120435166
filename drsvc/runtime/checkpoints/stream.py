"""One checkpoint stream (one flow): what a cycle reads, translates, counts and emits.

A cycle, driven by the faust timer of :mod:`~drsvc.runtime.checkpoints.faust_apps`:

1. :meth:`CheckpointStream.observe` (blocking, in a worker thread): the groups on the flow's source
   that the flow's group filter keeps (drsvc's own ``drsvc-*`` groups never), their committed
   offsets for every partition of the topics the stream can translate (one request per group),
   and the topic ids on both sides;
2. :meth:`CheckpointStream.translate` (on the event loop, where the offset indexes live): every
   committed partition through :func:`translate_partition`, the same decision ``drsvc translate``
   makes; the replicated position (the highest source position any replication pass reached) is
   noted now, *before* the end offsets are read, so that what a failover would lose is never
   counted too small;
3. the end offsets of the translated source partitions (blocking), then
   :meth:`CheckpointStream.numbers` (would lose, would re-read);
4. :meth:`CheckpointStream.candidates`: a checkpoint per partition, kept only when
   :func:`failover.checkpoints.decide` lets it replace the previous one of its key;
5. once the target acknowledged them, :meth:`CheckpointStream.record_emitted`.

The state (newest checkpoint per key) starts as what the checkpoints topic holds and only changes
through step 5, so monotonicity survives restarts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.admin import TopicInfo
from drsvc.runtime.checkpoints.group_reader import GroupCommit
from drsvc.runtime.checkpoints.metrics import PartitionNumbers
from drsvc.runtime.checkpoints.plan import StreamPlan
from drsvc.runtime.checkpoints.sync_follower import SyncFollower
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin
from drsvc.runtime.translation.cluster_view import CommittedOffset
from drsvc.runtime.translation.group_translation import (
    SYNC_CONFLICT,
    TOPIC_MISSING,
    FlowChoice,
    PartitionTranslation,
    Route,
    plan_routes,
    select_flows,
    translate_partition,
)
from drsvc.topology.models import Topology
from failover.checkpoints import (
    DOWNSTREAM,
    TOPIC_ID_BYTES,
    Checkpoint,
    CheckpointKey,
    Exposure,
    Verdict,
    decide,
    exposure,
)
from failover.naming import OWN_GROUP_PREFIX
from failover.offset_syncs import TopicPartition

__all__ = [
    "CheckpointStream",
    "ClusterReader",
    "Emission",
    "Observation",
    "PartitionView",
]

log = logging.getLogger(__name__)


class ClusterReader(Protocol):
    """What a stream reads from a cluster (:class:`~.group_reader.KafkaGroupReader` for real)."""

    alias: str

    def group_names(self) -> list[str]: ...

    def topic_names(self) -> list[str]: ...

    def describe(self, names: Collection[str]) -> dict[str, TopicInfo]: ...

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, GroupCommit]: ...

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]: ...

    def forget_groups_except(self, groups: Collection[str]) -> None: ...


@dataclass
class Observation:
    """What one poll of the flow's source (and the target's topic ids) found."""

    started: float
    """``time.monotonic()`` when the poll started."""
    read_at_ms: int
    """Epoch milliseconds when the poll started: the checkpoints' time."""
    group_topics: dict[str, TopicInfo] = field(default_factory=dict)
    destination_ids: dict[str, bytes] = field(default_factory=dict)
    commits: dict[str, dict[TopicPartition, GroupCommit]] = field(default_factory=dict)
    failed_groups: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionView:
    """One committed partition of a group, translated in one cycle."""

    group: str
    route: Route
    commit: GroupCommit
    translation: PartitionTranslation
    frontier: int | None
    """One past the highest source offset any replication pass copied (downstream only): the
    records before it are on the target."""
    source_topic_id: bytes | None = None
    """The id of the topic the group reads on the source, when it was described."""
    target_topic_id: bytes | None = None
    """The id of the topic it continues on, on the target, when it exists."""

    @property
    def key(self) -> CheckpointKey:
        return CheckpointKey(self.group, self.route.destination_topic, self.translation.partition)

    @property
    def group_partition(self) -> TopicPartition:
        """The partition as the group reads it, on the flow's source."""
        return TopicPartition(self.route.group_topic, self.translation.partition)


@dataclass(frozen=True)
class Emission:
    """A checkpoint to write, and why it replaces the previous one of its key."""

    key: CheckpointKey
    checkpoint: Checkpoint
    verdict: Verdict
    previous: Checkpoint | None


def _known_id(topic_id: bytes | None) -> bytes | None:
    """A topic id as a checkpoint holds it: None unless it is a real (16-byte, non-zero) id."""
    if topic_id is None or len(topic_id) != TOPIC_ID_BYTES or not any(topic_id):
        return None
    return topic_id


class CheckpointStream:
    """The decisions of one flow's checkpoint stream, and its state."""

    def __init__(
        self,
        topology: Topology,
        plan: StreamPlan,
        downstream: SyncFollower,
        upstream: SyncFollower | None,
        state: dict[CheckpointKey, Checkpoint] | None = None,
    ) -> None:
        self.topology = topology
        self.plan = plan
        self.flow = plan.flow
        self.downstream = downstream
        self.upstream = upstream
        self.state: dict[CheckpointKey, Checkpoint] = dict(state or {})
        self._reverse = (
            topology.flow(self.flow.target, self.flow.source) if upstream is not None else None
        )
        self._choices: dict[str, FlowChoice | None] = {}
        self._routes: dict[tuple[bool, bool, str], Route | None] = {}

    @property
    def flow_id(self) -> str:
        return self.flow.id

    # -- which groups and topics ------------------------------------------------------------------

    def wants_group(self, group: str) -> bool:
        """The flow's group filter keeps ``group``, and it is not one of drsvc's own."""
        return not group.startswith(OWN_GROUP_PREFIX) and self.flow.groups.to_filter().matches(
            group
        )

    def choice_for(self, group: str) -> FlowChoice | None:
        """The flows that translate ``group`` (the reverse one only if its filter keeps it)."""
        if group not in self._choices:
            try:
                choice = select_flows(self.topology, group, self.flow.source, self.flow.target)
            except ConfigError as err:
                log.debug("flow %s: group %s is not translated: %s", self.flow_id, group, err)
                choice = None
            if choice is not None and self.upstream is None:
                choice = FlowChoice(choice.downstream, None, choice.notes)
            self._choices[group] = choice
        return self._choices[group]

    def route(self, choice: FlowChoice, topic: str) -> Route | None:
        """How ``topic`` (on the source) is translated under ``choice``, if at all."""
        cache_key = (choice.downstream is not None, choice.upstream is not None, topic)
        if cache_key not in self._routes:
            routes, _ = plan_routes(self.topology, choice, [TopicPartition(topic, 0)])
            self._routes[cache_key] = routes.get(topic)
        return self._routes[cache_key]

    def routable(self, topic: str) -> bool:
        """Whether any group of the stream could have ``topic`` translated."""
        widest = FlowChoice(self.flow, self._reverse)
        return self.route(widest, topic) is not None

    # -- 1. observe (blocking) --------------------------------------------------------------------

    def observe(self, source: ClusterReader, target: ClusterReader) -> Observation:
        """Poll the source's groups and both clusters' topics (see the module docstring)."""
        observation = Observation(started=time.monotonic(), read_at_ms=int(time.time() * 1000))
        topics = source.describe([name for name in source.topic_names() if self.routable(name)])
        observation.group_topics = topics
        partitions = [
            TopicPartition(name, p) for name, info in topics.items() for p in range(info.partitions)
        ]
        groups = [g for g in source.group_names() if self.wants_group(g)]
        source.forget_groups_except(groups)
        for group in groups:
            try:
                committed = source.committed(group, partitions)
            except KafkaUnavailableError as err:
                observation.failed_groups[group] = str(err)
                continue
            if committed:
                observation.commits[group] = committed
        destinations: set[str] = set()
        widest = FlowChoice(self.flow, self._reverse)
        for name in topics:
            route = self.route(widest, name)
            if route is not None:
                destinations.add(route.destination_topic)
        observation.destination_ids = {
            name: info.topic_id for name, info in target.describe(destinations).items()
        }
        return observation

    # -- 2. translate (event loop) ----------------------------------------------------------------

    def translate(self, observation: Observation) -> list[PartitionView]:
        """Translate every committed partition of ``observation`` with the indexes as they are."""
        views: list[PartitionView] = []
        for group, commits in sorted(observation.commits.items()):
            choice = self.choice_for(group)
            if choice is None:
                continue
            for tp, commit in sorted(commits.items()):
                route = self.route(choice, tp.topic)
                if route is None:
                    continue
                follower = self.downstream if route.direction == DOWNSTREAM else self.upstream
                if follower is None or follower.broken is not None:
                    continue
                info = observation.group_topics.get(route.group_topic)
                translated = translate_partition(
                    route,
                    tp.partition,
                    CommittedOffset(commit.offset, commit.leader_epoch),
                    follower.read,
                    group_topic_id=None if info is None else info.topic_id,
                    destination_topic_id=observation.destination_ids.get(route.destination_topic),
                    source_end=None,
                    target_end=None,
                )
                frontier = None
                if route.direction == DOWNSTREAM and translated.reason not in (
                    TOPIC_MISSING,
                    SYNC_CONFLICT,
                ):
                    # Not the frontier: while a re-copy pass after a worker restart is behind,
                    # the records an earlier pass copied past it are on the target all the same.
                    frontier = follower.read.index.replicated_end(
                        TopicPartition(route.synced_topic, tp.partition)
                    )
                views.append(
                    PartitionView(
                        group,
                        route,
                        commit,
                        translated,
                        frontier,
                        source_topic_id=None if info is None else _known_id(info.topic_id),
                        target_topic_id=_known_id(
                            observation.destination_ids.get(route.destination_topic)
                        ),
                    )
                )
        return views

    # -- 3. count ---------------------------------------------------------------------------------

    @staticmethod
    def end_offsets_needed(views: Iterable[PartitionView]) -> list[TopicPartition]:
        """The source partitions whose end offsets the numbers need (downstream ones)."""
        return sorted({v.group_partition for v in views if v.route.direction == DOWNSTREAM})

    @staticmethod
    def numbers(
        views: Iterable[PartitionView], ends: dict[TopicPartition, int]
    ) -> list[PartitionNumbers]:
        """Would lose and would re-read, per partition, with the end offsets read after step 2."""
        rows = []
        for view in views:
            translated = view.translation
            cost: Exposure = exposure(
                view.route.direction,
                committed=view.commit.offset,
                reason=translated.reason,
                known=translated.target_offset is not None,
                pending=translated.pending,
                frontier=view.frontier,
                source_end=ends.get(view.group_partition),
            )
            rows.append(
                PartitionNumbers(
                    view.group, view.route.group_topic, translated.partition, cost, translated.exact
                )
            )
        return rows

    # -- 4. decide, 5. record ---------------------------------------------------------------------

    def candidates(self, views: Iterable[PartitionView], read_at_ms: int) -> list[Emission]:
        """The checkpoints that replace the previous ones of their keys."""
        emissions = []
        for view in views:
            translated = view.translation
            checkpoint = Checkpoint(
                source_topic=view.route.group_topic,
                source_offset=view.commit.offset,
                target_offset=translated.target_offset,
                reason=translated.reason,
                direction=view.route.direction,
                pending=translated.pending,
                metadata=view.commit.metadata,
                time_ms=read_at_ms,
                source_topic_id=view.source_topic_id,
                target_topic_id=view.target_topic_id,
            )
            previous = self.state.get(view.key)
            verdict = decide(previous, checkpoint)
            if verdict.emit:
                emissions.append(Emission(view.key, checkpoint, verdict, previous))
        return emissions

    def record_emitted(self, emissions: Iterable[Emission]) -> None:
        """The target acknowledged ``emissions``: they are now the newest of their keys."""
        for emission in emissions:
            self.state[emission.key] = emission.checkpoint

    def unknown_positions(self, group: str) -> dict[tuple[str, int], str]:
        """(topic, partition) on the target -> reason, for ``group``'s unknown checkpoints."""
        return {
            (key.topic, key.partition): checkpoint.reason
            for key, checkpoint in self.state.items()
            if key.group == group and checkpoint.target_offset is None
        }

    def origins(self, group: str) -> dict[tuple[str, int], SyncOrigin]:
        """(topic, partition) on the target -> the source position ``group``'s newest checkpoint
        of it was translated from (known or not), for the group offset sync to record and
        compare."""
        return {
            (key.topic, key.partition): SyncOrigin(
                flow=self.flow_id,
                source_topic=checkpoint.source_topic,
                source_offset=checkpoint.source_offset,
                source_topic_id=checkpoint.source_topic_id,
                target_topic_id=checkpoint.target_topic_id,
            )
            for key, checkpoint in self.state.items()
            if key.group == group
        }

    def groups(self) -> list[str]:
        """The groups the stream holds checkpoints of."""
        return sorted({key.group for key in self.state})

    def exact_positions(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) on the target -> offset, for ``group``'s exact checkpoints."""
        return {
            (key.topic, key.partition): checkpoint.target_offset
            for key, checkpoint in self.state.items()
            if key.group == group and checkpoint.exact and checkpoint.target_offset is not None
        }
