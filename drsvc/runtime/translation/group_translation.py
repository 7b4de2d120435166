"""Translating a consumer group's committed offsets from one cluster to another.

``translate_group(topology, group, "east", "west", views)`` answers: if the group moved from east
to west right now, where on west should each of its partitions start so that it neither skips nor
re-reads a record, and how much would it miss or re-read if that cannot be exact?

Which flow, which direction. For every topic the group has committed offsets for on *from*:

* **downstream** (failover) when the flow ``from->to`` copies it: ``orders`` on east is read on
  west as ``east.orders``; the committed source offset is translated through the syncs of
  ``from->to`` (on ``to``) to the position right after the newest copy of what it consumed;
* **upstream** (failback) when the topic is the copy that the flow ``to->from`` makes of a topic on
  ``to``: ``east.orders`` on west is read on east as ``orders``; the committed offset on the copy is
  translated through the syncs of ``to->from`` (on ``from``) to the running maximum of the source
  offsets it has read.

With flows both ways (active/active) a group may read both kinds, and each partition goes its own
way. Topics neither flow copies are listed with the reason, never guessed at. Clusters that only a
chain of flows joins (``a->b->c``) are refused: one hop's syncs cannot map ``a``'s offsets to
``c``'s, and composing two translations is not exact in general.

Each partition also says what failing the group over right now would cost it: ``would_lose`` and
``would_reread`` (:func:`failover.checkpoints.exposure`), as of the moment the end offsets were read
(``GroupTranslation.as_of_ms``).

The decisions (:func:`select_flows`, :func:`plan_routes`, :func:`translate_partition`) are pure;
:func:`translate_group` reads what they need through :class:`ClusterView` objects, syncs first and
end offsets afterwards, so that the count of records not yet replicated is never too small.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from drsvc.errors import ConfigError
from drsvc.runtime.translation.cluster_view import ClusterView, CommittedOffset
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from drsvc.topology.models import Flow, Topology
from failover.checkpoints import exposure
from failover.errors import PolicyError
from failover.offset_syncs import TopicPartition
from failover.translation import PERMANENT_REASONS, Reason, Translation, never_written

__all__ = [
    "SYNC_CONFLICT",
    "TOPIC_MISSING",
    "Direction",
    "FlowChoice",
    "GroupTranslation",
    "PartitionTranslation",
    "Route",
    "Unrouted",
    "identity_fallbacks",
    "iso_time",
    "plan_routes",
    "reason_waits_can_fix",
    "select_flows",
    "translate_group",
    "translate_groups",
    "translate_partition",
]

Direction = Literal["downstream", "upstream"]

#: Reasons only the service can see, next to those of :class:`failover.translation.Reason`.
TOPIC_MISSING = "topic-missing"
"""The topic to translate to does not exist on the destination cluster (yet)."""
SYNC_CONFLICT = "sync-conflict"
"""The partition's syncs contradict each other (two writers, out of order): nothing is trusted."""

_PERMANENT = frozenset({*map(str, PERMANENT_REASONS), SYNC_CONFLICT})


def reason_waits_can_fix(reason: str) -> bool:
    """Whether waiting for replication, with the group standing still, can make a partition
    translated for ``reason`` exact (see :data:`failover.translation.PERMANENT_REASONS`).

    Of the service's own reasons, ``topic-missing`` can be fixed (the flow creates the topic when
    it discovers it) and ``sync-conflict`` cannot (contradicting syncs stay in the sync topic).
    A topic no flow copies (:class:`Unrouted`) is never fixed by waiting either.
    """
    return reason not in _PERMANENT


@dataclass(frozen=True)
class FlowChoice:
    """The flows a translation between two clusters can use, and why others were left out."""

    downstream: Flow | None
    upstream: Flow | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Route:
    """How one topic the group reads on *from* maps to a topic on *to*."""

    direction: Direction
    flow: Flow
    group_topic: str
    """The topic on *from*, where the group committed."""
    destination_topic: str
    """The topic on *to*, where the group is to continue."""

    @property
    def synced_topic(self) -> str:
        """The topic on the flow's source: the name the flow's syncs are keyed by."""
        return self.group_topic if self.direction == "downstream" else self.destination_topic


@dataclass(frozen=True)
class Unrouted:
    """A topic the group committed on *from* that no flow between the clusters copies (waiting
    cannot change that: only a change of the topology can)."""

    topic: str
    partitions: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class PartitionTranslation:
    """One partition of the group, translated (``target_offset`` None when unknown).

    ``source_*`` are on *from* (where the group committed), ``target_*`` on *to*. ``pending``
    counts offsets the syncs do not cover: for ``ahead-of-syncs`` what the group consumed that is
    not replicated yet (read again once it is), for ``replication-gap`` what replication skipped.
    ``not_replicated`` (downstream only) counts offsets on *from* past the syncs: what a failover
    right now would not find on *to*. Offsets count transaction markers too, so both are upper
    bounds on records.
    """

    direction: Direction
    flow: str
    source_topic: str
    partition: int
    source_offset: int
    topic: str
    target_offset: int | None
    reason: str
    pending: int = 0
    leader_epoch: int | None = None
    source_end: int | None = None
    target_end: int | None = None
    not_replicated: int | None = None
    would_lose: int | None = None
    """Records a failover right now would lose (see :func:`failover.checkpoints.exposure`)."""
    would_reread: int | None = None
    """Records a failover right now would read twice (see :func:`failover.checkpoints.exposure`)."""

    @property
    def exact(self) -> bool:
        """Zero skipped, zero re-read."""
        return self.reason == Reason.EXACT

    @property
    def waits_can_fix(self) -> bool:
        """False when no wait for replication makes this partition exact: a planned failover
        that needs it exact is then refused at once (see :func:`reason_waits_can_fix`)."""
        return reason_waits_can_fix(self.reason)

    @property
    def source_lag(self) -> int | None:
        """Offsets the group has not consumed on *from* (Kafka's consumer-group LAG)."""
        return None if self.source_end is None else max(0, self.source_end - self.source_offset)

    @property
    def target_lag(self) -> int | None:
        """Offsets a consumer starting at ``target_offset`` has ahead of it on *to*."""
        if self.target_end is None or self.target_offset is None:
            return None
        return max(0, self.target_end - self.target_offset)

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source_topic": self.source_topic,
            "source_offset": self.source_offset,
            "target_offset": self.target_offset,
            "exact": self.exact,
            "reason": self.reason,
            "direction": self.direction,
            "flow": self.flow,
            "pending": self.pending,
            "leader_epoch": self.leader_epoch,
            "source_end": self.source_end,
            "source_lag": self.source_lag,
            "target_end": self.target_end,
            "target_lag": self.target_lag,
            "not_replicated": self.not_replicated,
            "would_lose": self.would_lose,
            "would_reread": self.would_reread,
        }


@dataclass(frozen=True)
class GroupTranslation:
    """Every committed partition of a group, translated from one cluster to another."""

    group: str
    from_alias: str
    to_alias: str
    partitions: tuple[PartitionTranslation, ...]
    unrouted: tuple[Unrouted, ...] = ()
    notes: tuple[str, ...] = ()
    application: str | None = None
    as_of_ms: int | None = None
    """When the end offsets behind ``would_lose`` were read (epoch milliseconds)."""

    @property
    def exact(self) -> bool:
        """Every committed partition translates exactly (and there is at least one)."""
        return bool(self.partitions) and not self.unrouted and all(p.exact for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "from": self.from_alias,
            "to": self.to_alias,
            "application": self.application,
            "exact": self.exact,
            "partitions": [p.as_dict() for p in self.partitions],
            "not_translated": [
                {"topic": u.topic, "partitions": list(u.partitions), "reason": u.reason}
                for u in self.unrouted
            ],
            "notes": list(self.notes),
            "as_of": None if self.as_of_ms is None else iso_time(self.as_of_ms),
            "as_of_ms": self.as_of_ms,
        }


def iso_time(epoch_ms: int) -> str:
    """``epoch_ms`` as an ISO-8601 UTC time with milliseconds."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- decisions (pure) -----------------------------------------------------------------------------


def select_flows(topology: Topology, group: str, from_alias: str, to_alias: str) -> FlowChoice:
    """The flows that translate ``group`` from ``from_alias`` to ``to_alias``.

    Raises :class:`ConfigError` for an unknown cluster, the same cluster twice, clusters no flow
    joins directly (naming the chain when one exists), and a group every joining flow excludes.
    """
    topology.cluster(from_alias)
    topology.cluster(to_alias)
    if from_alias == to_alias:
        raise ConfigError(f"--from and --to are both '{from_alias}'; name two different clusters")
    found = {(f.source, f.target): f for f in topology.flows}
    downstream = found.get((from_alias, to_alias))
    upstream = found.get((to_alias, from_alias))
    if downstream is None and upstream is None:
        path = _path(topology, from_alias, to_alias) or _path(topology, to_alias, from_alias)
        if path is not None:
            raise ConfigError(
                "translation across more than one hop is not supported; "
                f"'{from_alias}' and '{to_alias}' are joined only through {' -> '.join(path)}. "
                "Translate between two clusters that one flow joins directly"
            )
        known = ", ".join(f.id for f in topology.flows) or "none"
        raise ConfigError(
            f"topology '{topology.name}' has no flow between '{from_alias}' and '{to_alias}' "
            f"(flows: {known})"
        )
    notes: list[str] = []
    kept: list[Flow | None] = []
    for flow in (downstream, upstream):
        if flow is not None and not flow.groups.to_filter().matches(group):
            notes.append(f"flow {flow.id} does not translate group '{group}' (its groups filter)")
            kept.append(None)
        else:
            kept.append(flow)
    if kept == [None, None]:
        raise ConfigError(
            f"group '{group}' is excluded by the groups filter of every flow between "
            f"'{from_alias}' and '{to_alias}' ({'; '.join(notes)})"
        )
    return FlowChoice(kept[0], kept[1], tuple(notes))


def _path(topology: Topology, start: str, goal: str) -> list[str] | None:
    """The shortest chain of flows from ``start`` to ``goal``, as aliases, or None."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        alias = queue.popleft()
        if alias == goal:
            path = [alias]
            while (before := previous[path[-1]]) is not None:
                path.append(before)
            return path[::-1]
        for flow in topology.flows_from(alias):
            if flow.target not in previous:
                previous[flow.target] = alias
                queue.append(flow.target)
    return None


def plan_routes(
    topology: Topology, choice: FlowChoice, committed: Iterable[TopicPartition]
) -> tuple[dict[str, Route], tuple[Unrouted, ...]]:
    """Route each topic of ``committed`` (partitions on *from*) downstream, upstream or nowhere.

    Downstream wins when the forward flow copies the topic; a topic that came from *to* is never
    copied back, so no topic qualifies both ways.
    """
    partitions: dict[str, list[int]] = {}
    for tp in committed:
        partitions.setdefault(tp.topic, []).append(tp.partition)
    routes: dict[str, Route] = {}
    unrouted: list[Unrouted] = []
    for topic in sorted(partitions):
        reasons: list[str] = []
        if choice.downstream is not None:
            verdict = topology.topic_verdict(choice.downstream, topic)
            if verdict.replicate and verdict.target_topic is not None:
                routes[topic] = Route("downstream", choice.downstream, topic, verdict.target_topic)
                continue
            reasons.append(f"{choice.downstream.id} does not copy it ({verdict.reason})")
        if choice.upstream is not None:
            origin, why = _origin(topology, choice.upstream, topic)
            if origin is not None:
                routes[topic] = Route("upstream", choice.upstream, topic, origin)
                continue
            reasons.append(why)
        unrouted.append(Unrouted(topic, tuple(sorted(partitions[topic])), "; ".join(reasons)))
    return routes, tuple(unrouted)


#: downstream verdicts after which an identity pair's upstream route is tried: the committed
#: position lies before anything the way back has copied
_TRY_THE_WAY_BACK = frozenset({str(Reason.BEFORE_SYNCS), str(Reason.UNKNOWN_PARTITION)})


def identity_fallbacks(
    topology: Topology, choice: FlowChoice, routes: Mapping[str, Route]
) -> dict[str, Route]:
    """Upstream routes for topics routed downstream through one flow of an identity pair
    (active/passive with a ``standby`` way back). There ``orders`` is the same topic both ways:
    after a failover east -> west and back, positions on west before the failover point are
    copies the flow east -> west made (translated upstream), later ones are records the way
    back copies (downstream). Only an exact upstream answer replaces the downstream one."""
    upstream = choice.upstream
    if upstream is None or upstream.policy != "identity":
        return {}
    found = {}
    for topic, route in routes.items():
        if route.direction != "downstream" or route.flow.policy != "identity":
            continue
        origin, _why = _origin(topology, upstream, topic)
        if origin is not None:
            found[topic] = Route("upstream", upstream, topic, origin)
    return found


def _origin(topology: Topology, flow: Flow, topic: str) -> tuple[str | None, str]:
    """The topic on ``flow.source`` whose copy on ``flow.target`` is ``topic``, or why none is."""
    policy = topology.policy_for(flow)
    candidate: str | None = None
    if policy.topic_source(topic) == flow.source:
        candidate = policy.upstream_topic(topic)
    else:
        try:
            if policy.format_remote_topic(flow.source, topic) == topic:
                candidate = topic  # identity naming: the copy has the original's name
        except PolicyError:
            candidate = None
    if candidate is None:
        return None, f"it is not a copy that {flow.id} makes (its name does not say so)"
    verdict = topology.topic_verdict(flow, candidate)
    if not verdict.replicate or verdict.target_topic != topic:
        return None, f"{flow.id} does not copy {candidate} ({verdict.reason})"
    return candidate, ""


def _sealed_copy_ends(
    source: ClusterView,
    choice: FlowChoice,
    routes: Sequence[Route],
    committed: Mapping[TopicPartition, CommittedOffset],
) -> dict[TopicPartition, int]:
    """Last stable offsets, read before the syncs, of the partitions the group reads upstream
    over an exactly-once flow.

    Such a flow commits its copies, their offset syncs and its progress in one transaction, so
    every copy below an offset read before the syncs has its sync among those read afterwards. A
    group that read everything sits past the copies' trailing transaction marker, one beyond
    the last copy the syncs describe: with this end it translates exactly instead of
    ahead-of-syncs. Only for prefixed copies, which nothing but the flow writes (under identity
    names the application writes the same partitions, past the copies); at least once, copies and
    syncs are written apart, and nothing is sealed.
    """
    flow = choice.upstream
    if flow is None or flow.delivery != "exactly-once" or flow.policy == "identity":
        return {}
    topics = {r.group_topic for r in routes if r.direction == "upstream" and r.flow == flow}
    partitions = [tp for tp in committed if tp.topic in topics]
    return source.end_offsets(partitions) if partitions else {}


def translate_partition(
    route: Route,
    partition: int,
    committed: CommittedOffset,
    syncs: SyncTopicRead,
    *,
    group_topic_id: bytes | None,
    destination_topic_id: bytes | None,
    source_end: int | None,
    target_end: int | None,
    sealed_end: int | None = None,
) -> PartitionTranslation:
    """Translate one committed partition along ``route`` with the index in ``syncs``.

    The topic ids are those the topics have now (None: the topic does not exist); syncs of an older
    incarnation of either topic are never used. ``sealed_end`` (upstream only): an offset of the
    group's partition below which every copy is known to be in ``syncs`` (see
    :func:`_sealed_copy_ends`).
    """
    synced = TopicPartition(route.synced_topic, partition)
    index = syncs.index
    translation: Translation | None = None
    not_replicated: int | None = None
    frontier: int | None = None
    if destination_topic_id is None:
        reason = TOPIC_MISSING
    elif synced in syncs.conflicts:
        reason = SYNC_CONFLICT
    elif route.direction == "downstream":
        translation = index.translate_downstream(
            synced,
            committed.offset,
            source_topic_id=group_topic_id,
            target_topic_id=destination_topic_id,
            leader_epoch=committed.leader_epoch,
        )
        reason = translation.reason
        # Records up to the highest position any pass copied are on the target, also while a
        # re-copy pass after a restart is behind (its answers then start in the earlier pass).
        frontier = index.replicated_end(synced)
        if translation.known and frontier is not None and source_end is not None:
            not_replicated = max(0, source_end - frontier)
    else:
        translation = index.translate_upstream(
            synced,
            committed.offset,
            source_topic_id=destination_topic_id,
            target_topic_id=group_topic_id,
            target_end=sealed_end,
        )
        reason = translation.reason
    if (
        translation is not None
        and translation.reason is Reason.UNKNOWN_PARTITION
        and never_written(committed.offset, source_end, target_end)
    ):
        translation = Translation(0, Reason.EXACT)
        reason = translation.reason
        not_replicated = 0
    # With the destination topic missing or the syncs in conflict, nothing on the target counts
    # as replicated (frontier None): what a failover would lose is then an upper bound.
    cost = exposure(
        route.direction,
        committed=committed.offset,
        reason=str(reason),
        known=translation is not None and translation.known,
        pending=0 if translation is None else translation.pending,
        frontier=frontier,
        source_end=source_end,
    )
    return PartitionTranslation(
        direction=route.direction,
        flow=route.flow.id,
        source_topic=route.group_topic,
        partition=partition,
        source_offset=committed.offset,
        topic=route.destination_topic,
        target_offset=None if translation is None else translation.offset,
        reason=str(reason),
        pending=0 if translation is None else translation.pending,
        leader_epoch=committed.leader_epoch,
        source_end=source_end,
        target_end=target_end,
        not_replicated=not_replicated,
        would_lose=cost.would_lose,
        would_reread=cost.would_reread,
    )


# -- the service ----------------------------------------------------------------------------------


def translate_group(
    topology: Topology,
    group: str,
    from_alias: str,
    to_alias: str,
    views: Mapping[str, ClusterView],
) -> GroupTranslation:
    """Translate every committed partition of ``group`` on ``from_alias`` to ``to_alias``.

    ``views`` holds a :class:`ClusterView` for both aliases. Raises :class:`ConfigError` for an
    unknown cluster, clusters no single flow joins, a group the flows exclude, and a group with no
    committed offsets on ``from_alias``.
    """
    found = translate_groups(topology, [group], from_alias, to_alias, views)[group]
    if found is None:
        raise ConfigError(
            f"consumer group '{group}' has no committed offsets on cluster '{from_alias}' "
            "(it does not exist there, or has never committed)"
        )
    return found


@dataclass(frozen=True)
class _Prepared:
    """What one group's translation reads before the syncs."""

    group: str
    choice: FlowChoice
    committed: Mapping[TopicPartition, CommittedOffset]
    routes: dict[str, Route]
    unrouted: tuple[Unrouted, ...]
    fallbacks: dict[str, Route]
    sealed: dict[TopicPartition, int]

    def synced_topics(self, direction: Direction) -> set[str]:
        chosen = [*self.routes.values(), *self.fallbacks.values()]
        return {r.synced_topic for r in chosen if r.direction == direction}


def translate_groups(
    topology: Topology,
    groups: Sequence[str],
    from_alias: str,
    to_alias: str,
    views: Mapping[str, ClusterView],
) -> dict[str, GroupTranslation | None]:
    """:func:`translate_group` for several groups, with one read of each sync topic for all of
    them (a planned failover asks for every group of an application once a second). A group
    with no committed offsets on ``from_alias`` maps to None.

    The order of the reads is each group's: committed offsets and sealed ends of every group,
    then the syncs, then every group's topic ids and end offsets, so that the syncs are read
    after what must precede them and before what must follow them, for every group.
    """
    prepared = [_prepare(topology, g, from_alias, to_alias, views[from_alias]) for g in groups]
    reads = _read_syncs(topology, [p for p in prepared if p is not None], views)
    return {
        group: None if p is None else _finish(topology, p, from_alias, to_alias, views, reads)
        for group, p in zip(groups, prepared, strict=True)
    }


def _prepare(
    topology: Topology, group: str, from_alias: str, to_alias: str, source: ClusterView
) -> _Prepared | None:
    choice = select_flows(topology, group, from_alias, to_alias)
    committed = source.committed(group)
    if not committed:
        return None
    routes, unrouted = plan_routes(topology, choice, committed)
    fallbacks = identity_fallbacks(topology, choice, routes)
    # Before the syncs: where the exactly-once copies the group reads upstream are sealed.
    sealed = _sealed_copy_ends(source, choice, [*routes.values(), *fallbacks.values()], committed)
    return _Prepared(group, choice, committed, routes, unrouted, fallbacks, sealed)


_Reads = dict[tuple[Direction, str], SyncTopicRead]
"""Sync reads by direction and flow id."""


def _read_syncs(
    topology: Topology, prepared: Sequence[_Prepared], views: Mapping[str, ClusterView]
) -> _Reads:
    """One read per flow and direction, of the synced topics of every group that uses it."""
    names = topology.internal_names()
    wanted: dict[tuple[Direction, str], tuple[Flow, set[str]]] = {}
    for p in prepared:
        ways: tuple[tuple[Direction, Flow | None], ...] = (
            ("downstream", p.choice.downstream),
            ("upstream", p.choice.upstream),
        )
        for direction, flow in ways:
            topics = p.synced_topics(direction)
            if flow is not None and topics:
                wanted.setdefault((direction, flow.id), (flow, set()))[1].update(topics)
    return {
        key: views[flow.target].read_syncs(names.offset_syncs_topic(flow.source), topics)
        for key, (flow, topics) in wanted.items()
    }


def _finish(
    topology: Topology,
    prepared: _Prepared,
    from_alias: str,
    to_alias: str,
    views: Mapping[str, ClusterView],
    all_reads: _Reads,
) -> GroupTranslation:
    source, destination = views[from_alias], views[to_alias]
    choice, committed, routes = prepared.choice, prepared.committed, prepared.routes
    fallbacks, sealed = prepared.fallbacks, prepared.sealed
    notes = list(choice.notes)
    reads: dict[Direction, SyncTopicRead] = {}
    candidates: tuple[tuple[Direction, Flow | None], ...] = (
        ("downstream", choice.downstream),
        ("upstream", choice.upstream),
    )
    for direction, flow in candidates:
        topics = prepared.synced_topics(direction)
        if flow is None or not topics:
            continue
        read = all_reads[direction, flow.id]
        reads[direction] = read
        if not read.exists:
            notes.append(
                f"offset-sync topic {read.topic} does not exist on '{read.cluster}': flow "
                f"{flow.id} has never copied anything, so nothing of it can be translated"
            )
        # As a read of this group's topics alone reports them (the read may serve others).
        notes.extend(
            f"offset syncs of {tp.topic}-{tp.partition} contradict each other: {message}"
            for tp, message in sorted(read.conflicts.items())
            if tp.topic in topics
        )

    group_ids = source.topic_ids({r.group_topic for r in routes.values()})
    destination_ids = destination.topic_ids({r.destination_topic for r in routes.values()})
    routed = sorted(tp for tp in committed if tp.topic in routes)
    source_ends = source.end_offsets(routed)
    as_of_ms = int(time.time() * 1000)
    destination_ends = destination.end_offsets(
        [TopicPartition(routes[tp.topic].destination_topic, tp.partition) for tp in routed]
    )
    partitions = []
    for tp in routed:
        translated = None
        for route in (routes[tp.topic], fallbacks.get(tp.topic)):
            if route is None or route.direction not in reads:
                continue
            attempt = translate_partition(
                route,
                tp.partition,
                committed[tp],
                reads[route.direction],
                group_topic_id=group_ids.get(route.group_topic),
                destination_topic_id=destination_ids.get(route.destination_topic),
                source_end=source_ends.get(tp),
                target_end=destination_ends.get(
                    TopicPartition(route.destination_topic, tp.partition)
                ),
                sealed_end=sealed.get(tp) if route.direction == "upstream" else None,
            )
            if translated is None:
                translated = attempt
            elif attempt.exact:
                translated = attempt  # an identity pair: the position predates the way back
            if attempt.reason not in _TRY_THE_WAY_BACK:
                break
        assert translated is not None
        partitions.append(translated)
    group = prepared.group
    application = next((a.name for a in topology.applications if group in a.groups), None)
    return GroupTranslation(
        group=group,
        from_alias=from_alias,
        to_alias=to_alias,
        partitions=tuple(partitions),
        unrouted=prepared.unrouted,
        notes=tuple(notes),
        application=application,
        as_of_ms=as_of_ms,
    )
