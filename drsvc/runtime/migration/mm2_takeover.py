"""Reading MirrorMaker 2's progress and placing drsvc's flow after it (the I/O around
:mod:`failover.migration_mm2`).

From the target: Connect's offset storage topic of MirrorMaker's flow (its committed progress)
and the group of its workers (members: it still runs). From the source: its offset syncs. Then,
per source partition the migration copies, :func:`failover.migration_mm2.takeover_start` checks
where the copy ends by comparing the target's last record with the source record it would copy;
the positions found are committed as the drsvc flow's progress (its source group), so the flow's
workers start exactly there. Nothing is changed when any partition is refused.

Every read goes through the port's :class:`~drsvc.kafka.reader.TopicReader`, which gives up only
when the read stops moving: MirrorMaker's offset syncs of a long-running copy are a long history,
and a slow cluster is never taken for a record that is not there. MirrorMaker's two topics are
read ``read_uncommitted`` (what MirrorMaker wrote, whatever its producers' transactions), the
records compared to place the copy ``read_committed`` (what a consumer of the copy sees).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from drsvc.errors import ConfigError, RefusedError
from drsvc.kafka.admin import alter_group_offsets
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.errors import translated
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.reader import TopicReader
from drsvc.kafka.types import Message, TopicPartition
from failover import naming
from failover.errors import FormatError
from failover.migration_mm2 import (
    Mm2Progress,
    PartitionCopy,
    TakeoverDecision,
    decode_progress,
    decode_sync,
    latest_progress,
    mm2_offset_syncs_topic,
    mm2_offsets_topic,
    mm2_worker_group,
    naming_refusals,
    takeover_start,
)

Partition = tuple[str, int]


@dataclass(frozen=True)
class Mm2Clusters:
    source: str
    target: str
    source_config: Mapping[str, str]
    target_config: Mapping[str, str]
    offsets_topic: str
    syncs_topic: str
    worker_group: str
    #: the clients of both clusters, by alias
    clients: KafkaClients = field(compare=False, repr=False)


def mm2_clusters(
    source: str,
    target: str,
    source_config: Mapping[str, str],
    target_config: Mapping[str, str],
    *,
    clients: KafkaClients | None = None,
) -> Mm2Clusters:
    """MirrorMaker 2's flow ``source`` -> ``target``; ``clients`` builds the clients of both
    (by default a factory of the two clusters' resolved settings)."""
    if clients is None:
        clients = KafkaClients.for_configs({source: source_config, target: target_config})
    return Mm2Clusters(
        source,
        target,
        source_config,
        target_config,
        mm2_offsets_topic(source),
        mm2_offset_syncs_topic(target),
        mm2_worker_group(source),
        clients,
    )


def _reader(
    clients: KafkaClients,
    cluster: str,
    topic: str,
    what: str,
    timeout_s: float,
    *,
    committed: bool,
) -> TopicReader:
    """A reader of ``topic`` on ``cluster`` that gives up after ``timeout_s`` without
    movement (assigned only: never joined nor committed)."""
    return clients.reader(
        cluster,
        topic,
        what=what,
        group=naming.MM2_TAKEOVER_READER_GROUP,
        committed=committed,
        limits=ReadLimits(stall_s=timeout_s),
    )


def _read_topic(
    clients: KafkaClients, cluster: str, topic: str, what: str, timeout_s: float
) -> list[Message]:
    """Every committed record of ``topic`` up to its end when the read starts (empty when it
    does not exist). ``timeout_s`` is how long the read may stand still.

    Read committed, as before this read moved onto the port: MirrorMaker 2's offset syncs are
    written without transactions (committed and uncommitted reads see the same), and an
    exactly-once Connect (KIP-618) writes its offsets in transactions, whose aborted records are
    progress that never happened: starting from one would skip what its copies never wrote. The
    read still ends at a trailing transaction marker (the reader's end-of-partition rule)."""
    found: list[Message] = []
    with _reader(clients, cluster, topic, what, timeout_s, committed=True) as reader:
        for batch in reader.to_end():
            found.extend(batch)
    return found


def _same(a: Message | None, b: Message | None) -> bool:
    if a is None or b is None:
        return False
    return (a.key(), a.value(), a.timestamp()[1], list(a.headers() or [])) == (
        b.key(), b.value(), b.timestamp()[1], list(b.headers() or []),
    )  # fmt: skip


def _connect_members(clients: KafkaClients, cluster: str, group: str, timeout_s: float) -> int:
    """Members of a Connect workers' group (the consumer-group API refuses to describe one)."""
    admin = clients.admin(cluster)
    with translated(f"describing group {group}", cluster), warnings.catch_warnings():
        # the only admin call that describes non-consumer groups
        warnings.simplefilter("ignore", DeprecationWarning)
        groups = admin.list_groups(group, timeout=timeout_s)
    return sum(len(g.members) for g in groups if g.id == group)


def read_progress(clusters: Mm2Clusters, timeout_s: float) -> dict[Partition, int]:
    records: dict[Mm2Progress, int | None] = {}
    what = "MirrorMaker 2 offsets topic"
    for msg in _read_topic(
        clusters.clients, clusters.target, clusters.offsets_topic, what, timeout_s
    ):
        try:
            decoded = decode_progress(msg.key(), msg.value())
        except FormatError as err:
            raise ConfigError(f"{clusters.offsets_topic} on {clusters.target}: {err}") from err
        if decoded is not None:
            records[decoded[0]] = decoded[1]
    return latest_progress(records, clusters.source)


def read_last_syncs(clusters: Mm2Clusters, timeout_s: float) -> dict[Partition, tuple[int, int]]:
    last: dict[Partition, tuple[int, int]] = {}
    what = "MirrorMaker 2 offset-syncs topic"
    for msg in _read_topic(
        clusters.clients, clusters.source, clusters.syncs_topic, what, timeout_s
    ):
        key, value = msg.key(), msg.value()
        if key is None or value is None:
            continue
        try:
            sync = decode_sync(key, value)
        except FormatError as err:
            raise ConfigError(f"{clusters.syncs_topic} on {clusters.source}: {err}") from err
        last[(sync.topic, sync.partition)] = (sync.upstream, sync.downstream)
    return last


@dataclass(frozen=True)
class TakeoverPlan:
    decisions: tuple[TakeoverDecision, ...]

    @property
    def starts(self) -> dict[Partition, int]:
        return {(d.topic, d.partition): d.start for d in self.decisions if d.start is not None}

    @property
    def refusals(self) -> list[str]:
        return [d.reason for d in self.decisions if d.refused]

    def as_dict(self) -> dict[str, Any]:
        return {
            "starts": {f"{t}-{p}": o for (t, p), o in sorted(self.starts.items())},
            "decisions": [d.reason for d in self.decisions],
        }


def plan_takeover(
    clusters: Mm2Clusters,
    partitions: Mapping[str, int],
    target_topics: Collection[str],
    timeout_s: float = 30.0,
) -> TakeoverPlan:
    """Where drsvc's flow continues each partition of ``partitions`` (topic -> count); raises
    :class:`RefusedError` naming every reason when MirrorMaker still runs, copied under other
    names, or a partition's copy cannot be placed."""
    running = _connect_members(clusters.clients, clusters.target, clusters.worker_group, timeout_s)
    if running:
        raise RefusedError(
            f"MirrorMaker 2 still runs: its worker group {clusters.worker_group} has {running}"
            f" member(s) on {clusters.target}; stop it first (cleanly, so it commits its"
            " progress), then take over"
        )
    renamed = naming_refusals(partitions, target_topics, clusters.source)
    if renamed:
        raise RefusedError("; ".join(renamed))
    progress = read_progress(clusters, timeout_s)
    if not progress:
        raise RefusedError(
            f"no progress of MirrorMaker 2 from {clusters.source} in {clusters.offsets_topic} on"
            f" {clusters.target}: nothing to take over (start without taking over)"
        )
    syncs = read_last_syncs(clusters, timeout_s)
    decisions: list[TakeoverDecision] = []
    for topic, count in sorted(partitions.items()):
        decisions += _place_topic(
            clusters, topic, count, topic in target_topics, progress, syncs, timeout_s
        )
    plan = TakeoverPlan(tuple(decisions))
    if plan.refusals:
        raise RefusedError("cannot take over from MirrorMaker 2: " + "; ".join(plan.refusals))
    return plan


def _place_topic(
    clusters: Mm2Clusters,
    topic: str,
    count: int,
    on_target: bool,
    progress: Mapping[Partition, int],
    syncs: Mapping[Partition, tuple[int, int]],
    timeout_s: float,
) -> list[TakeoverDecision]:
    """Where drsvc continues each of the ``count`` partitions of ``topic``: the target's copy
    (read committed: what a consumer of the copy sees) is placed by comparing its last record
    with the source record MirrorMaker's progress names. A read that cannot finish raises: a
    slow cluster is never taken for a copy that does not match."""
    clients = clusters.clients
    decisions = []
    with (
        _reader(clients, clusters.target, topic, "copied topic", timeout_s, committed=True) as copy,
        _reader(clients, clusters.source, topic, "source topic", timeout_s, committed=True) as src,
    ):
        bounds = (copy.bounds() if on_target else None) or {}
        for p in range(count):
            # A partition the target lacks holds no copy: (0, 0), an empty partition.
            low, high = bounds.get(p, (0, 0))
            copy_of = PartitionCopy(topic, p, progress.get((topic, p)), syncs.get((topic, p)),
                                    low, high)  # fmt: skip

            def matches(offset: int, part: int = p, end: int = high) -> bool:
                return _same(copy.record_at(part, end - 1), src.record_at(part, offset))

            decisions.append(takeover_start(copy_of, matches))
    return decisions


def refuse_if_the_flow_copied(
    clusters: Mm2Clusters, plan: TakeoverPlan, timeout_s: float = 30.0
) -> None:
    """Refuse (:class:`RefusedError`) when drsvc's flow already has progress of its own on
    a partition to take over: it copied before, and taking over now would copy twice or skip."""
    group = naming.replicator_group(clusters.source, clusters.target)
    consumer = clusters.clients.consumer(
        clusters.source, {"group.id": group, "enable.auto.commit": False}
    )
    try:
        wanted = [TopicPartition(t, p) for t, p in plan.starts]
        with translated(f"reading the committed offsets of group {group}", clusters.source):
            answer = consumer.committed(wanted, timeout=timeout_s)
        existing = [tp for tp in answer if tp.offset >= 0]
    finally:
        consumer.close()
    if existing:
        raise RefusedError(
            f"drsvc's flow {clusters.source}->{clusters.target} already has progress"
            f" ({len(existing)} partition(s), e.g. {existing[0].topic}-{existing[0].partition}"
            f" at {existing[0].offset}): it copied already, taking over now would copy twice"
        )


def commit_takeover(clusters: Mm2Clusters, plan: TakeoverPlan, timeout_s: float = 30.0) -> None:
    """Commit the positions as the drsvc flow's progress; refused when the flow already has
    progress of its own (:func:`refuse_if_the_flow_copied`, checked again right before). A
    commit the cluster refuses for some partitions is a refusal too, raised after the others
    were committed."""
    refuse_if_the_flow_copied(clusters, plan, timeout_s)
    group = naming.replicator_group(clusters.source, clusters.target)
    admin = clusters.clients.admin(clusters.source)
    answers = alter_group_offsets(admin, group, plan.starts, timeout_s)
    failed = {tp: err for tp, err in answers.items() if err is not None}
    if failed:
        (t, p), err = next(iter(failed.items()))
        raise RefusedError(
            f"committing the takeover positions of group {group} failed for {len(failed)}"
            f" partition(s), e.g. {t}-{p}: {err}"
        )
