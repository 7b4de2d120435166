"""A flow's status from its two clusters: which partitions it covers, how far each is copied,
how many records are left, and which worker copies it.

* **Partitions**: every partition of the source topics the flow copies, decided by the same
  rules as the worker's discovery (:meth:`Topology.topic_verdict`), whether or not a worker runs.
* **Progress** (see :class:`failover.slots.SlotNames`): an at-least-once flow commits the next
  source offset to copy in group ``drsvc-replicator.<src>-<tgt>`` on the source; an exactly-once
  flow commits in the same group on the target, keyed by the remote topic, with the next source
  offset in the commit's metadata (:class:`failover.slots.SlotProgress`). Progress without
  readable metadata is *unknown*, never guessed.
* **Owner**: at-least-once, the member of the source group assigned the partition; exactly-once,
  the member of the membership group on the target assigned the partition's slot.

Progress is read before end offsets, so that lag is never smaller than it was. Each flow is read
on its own thread; a flow whose clusters cannot be read gets an error entry, the others still
report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from drsvc.errors import DrsvcError
from drsvc.runtime.status.cluster_reader import ClusterReader, GroupMember, KafkaClusterReader
from drsvc.runtime.status.report import (
    FlowStatus,
    Owner,
    PartitionStatus,
    ProgressState,
    StatusReport,
    partition_lag,
)
from drsvc.topology.models import Flow, Topology
from failover.errors import PolicyError
from failover.offset_syncs import TopicPartition
from failover.slots import SlotNames, SlotProgress, slot_of
from failover.topic_rules import is_heartbeats_topic

#: flows read at once (each waits on its clusters, not on the CPU)
MAX_PARALLEL_FLOWS = 8

#: next source offset to copy per partition; None where the progress is unreadable, absent where
#: the flow never copied the partition
Progress = dict[TopicPartition, int | None]


def read_status(
    topology: Topology, flows: Sequence[Flow], bootstrap: Mapping[str, str], timeout_s: float
) -> StatusReport:
    """The status of ``flows`` from their real clusters (``bootstrap`` resolves clusters whose
    topology entry has no bootstrap servers)."""
    readers: dict[str, ClusterReader] = {}
    problems: dict[str, str] = {}
    for alias in sorted({alias for flow in flows for alias in (flow.source, flow.target)}):
        try:
            config = topology.cluster(alias).client_config(bootstrap.get(alias))
            readers[alias] = KafkaClusterReader(alias, config, timeout_s)
        except DrsvcError as err:
            problems[alias] = str(err)
    return status_of(topology, flows, readers, problems)


def status_of(
    topology: Topology,
    flows: Sequence[Flow],
    readers: Mapping[str, ClusterReader],
    problems: Mapping[str, str] | None = None,
) -> StatusReport:
    """The status of ``flows`` through ``readers`` (by alias); ``problems`` names clusters that
    could not even be set up for reading, and why."""
    known_problems = dict(problems or {})
    as_of = datetime.now(UTC)

    def one(flow: Flow) -> FlowStatus:
        failed = [known_problems[a] for a in (flow.source, flow.target) if a in known_problems]
        if failed:
            return replace(_blank(flow), error="; ".join(failed))
        return flow_status(topology, flow, readers[flow.source], readers[flow.target])

    if not flows:
        return StatusReport(as_of, ())
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_FLOWS, len(flows))) as pool:
        return StatusReport(as_of, tuple(pool.map(one, flows)))


def flow_status(
    topology: Topology, flow: Flow, source: ClusterReader, target: ClusterReader
) -> FlowStatus:
    """One flow's status; what cannot be read becomes the entry's error."""
    blank = _blank(flow)
    try:
        partitions = _partitions(topology, flow, source, target)
    except DrsvcError as err:
        return replace(blank, error=str(err))
    return replace(blank, partitions=partitions)


def covered_partitions(
    topology: Topology, flow: Flow, partition_counts: Mapping[str, int]
) -> list[tuple[TopicPartition, str]]:
    """Source partitions the flow copies, each with its remote topic, in name order. Heartbeats
    are left out: their own lane copies them without progress (their freshness is what counts,
    see ``drsvc heartbeats``)."""
    covered: list[tuple[TopicPartition, str]] = []
    policy, names = topology.policy_for(flow), topology.internal_names()
    for topic in sorted(partition_counts):
        if is_heartbeats_topic(topic, policy, names):
            continue
        verdict = topology.topic_verdict(flow, topic)
        if verdict.replicate and verdict.target_topic is not None:
            remote = verdict.target_topic
            covered += [(TopicPartition(topic, p), remote) for p in range(partition_counts[topic])]
    return covered


def next_source_offset(metadata: str | None) -> int | None:
    """The next source offset an exactly-once commit's metadata names; None if unreadable."""
    if not metadata:
        return None
    try:
        return SlotProgress.decode(metadata).next_source_offset
    except PolicyError:
        return None


# -- the parts of a flow's status ----------------------------------------------------------------


def _blank(flow: Flow) -> FlowStatus:
    exactly_once = flow.delivery == "exactly-once"
    return FlowStatus(
        flow=flow.id,
        source=flow.source,
        target=flow.target,
        delivery=flow.delivery,
        progress_group=SlotNames(flow.source, flow.target).progress_group,
        progress_cluster=flow.target if exactly_once else flow.source,
    )


def _partitions(
    topology: Topology, flow: Flow, source: ClusterReader, target: ClusterReader
) -> tuple[PartitionStatus, ...]:
    names = SlotNames(flow.source, flow.target)
    covered = covered_partitions(topology, flow, source.partition_counts())
    if flow.delivery == "exactly-once":
        progress = _exactly_once_progress(target, names.progress_group, covered)
        owners = _slot_owners(target, names, [tp for tp, _remote in covered])
    else:
        progress = _at_least_once_progress(source, names.progress_group, covered)
        owners = _assigned(source.group_members(names.progress_group))
    partitions = [tp for tp, _remote in covered]
    starts = source.log_starts(partitions)
    ends = source.log_ends(partitions)
    first_copies = _first_copies(
        flow, source, [tp for tp in partitions if tp not in progress], starts, ends
    )
    rows = []
    for tp, remote in covered:
        state: ProgressState
        if tp not in progress:
            state = "none"
        elif progress[tp] is None:
            state = "unknown"
        else:
            state = "committed"
        replicated = progress.get(tp)
        member = owners.get(tp)
        rows.append(
            PartitionStatus(
                topic=tp.topic,
                partition=tp.partition,
                remote_topic=remote,
                progress=state,
                replicated_offset=replicated,
                log_start_offset=starts.get(tp),
                source_end_offset=ends.get(tp),
                lag=partition_lag(
                    replicated, state, starts.get(tp), ends.get(tp), first_copies.get(tp)
                ),
                owner=None
                if member is None
                else Owner(member.member_id, member.client_id, member.host),
            )
        )
    return tuple(rows)


def _at_least_once_progress(
    source: ClusterReader, group: str, covered: list[tuple[TopicPartition, str]]
) -> Progress:
    commits = source.committed(group, [tp for tp, _remote in covered])
    return {tp: commit.offset for tp, commit in commits.items()}


def _exactly_once_progress(
    target: ClusterReader, group: str, covered: list[tuple[TopicPartition, str]]
) -> Progress:
    by_remote = {TopicPartition(remote, tp.partition): tp for tp, remote in covered}
    commits = target.committed(group, list(by_remote))
    return {
        by_remote[remote_tp]: next_source_offset(c.metadata) for remote_tp, c in commits.items()
    }


def _assigned(members: list[GroupMember]) -> dict[TopicPartition, GroupMember]:
    return {tp: member for member in members for tp in member.partitions}


def _slot_owners(
    target: ClusterReader, names: SlotNames, partitions: list[TopicPartition]
) -> dict[TopicPartition, GroupMember]:
    slots = target.partition_counts().get(names.slots_topic)
    if not slots:
        return {}  # the flow never ran: nobody owns anything
    by_slot = {
        tp.partition: member
        for tp, member in _assigned(target.group_members(names.membership_group)).items()
        if tp.topic == names.slots_topic
    }
    owners = {}
    for tp in partitions:
        member = by_slot.get(slot_of(tp.topic, tp.partition, slots))
        if member is not None:
            owners[tp] = member
    return owners


def _first_copies(
    flow: Flow,
    source: ClusterReader,
    never_copied: list[TopicPartition],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Where a worker would start the partitions the flow never copied (as it does: the log
    start, the log end, or the first record at the flow's start timestamp)."""
    if flow.start.kind == "latest":
        return {tp: ends[tp] for tp in never_copied if tp in ends}
    if flow.start.kind == "timestamp" and flow.start.timestamp_ms is not None:
        found = source.offsets_at(never_copied, flow.start.timestamp_ms) if never_copied else {}
        firsts: dict[TopicPartition, int] = {}
        for tp in never_copied:
            at = found.get(tp)
            end = ends.get(tp)
            if at is not None:
                firsts[tp] = at
            elif end is not None:
                firsts[tp] = end  # nothing that new yet: the worker starts at the end
        return firsts
    return {tp: starts[tp] for tp in never_copied if tp in starts}
