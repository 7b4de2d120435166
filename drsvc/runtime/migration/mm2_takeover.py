"""Reading MirrorMaker 2's progress and placing drsvc's flow after it (the I/O around
:mod:`failover.migration_mm2`).

From the target: Connect's offset storage topic of MirrorMaker's flow (its committed progress)
and the group of its workers (members: it still runs). From the source: its offset syncs. Then,
per source partition the migration copies, :func:`failover.migration_mm2.takeover_start` checks
where the copy ends by comparing the target's last record with the source record it would copy;
the positions found are committed as the drsvc flow's progress (its source group), so the flow's
workers start exactly there. Nothing is changed when any partition is refused.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from drsvc.errors import ConfigError, KafkaUnavailableError, RefusedError
from drsvc.kafka.admin import admin_client, alter_group_offsets
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
QUIET = {"log_level": "2"}


@dataclass(frozen=True)
class Mm2Clusters:
    source: str
    target: str
    source_config: Mapping[str, str]
    target_config: Mapping[str, str]
    offsets_topic: str
    syncs_topic: str
    worker_group: str


def mm2_clusters(
    source: str,
    target: str,
    source_config: Mapping[str, str],
    target_config: Mapping[str, str],
) -> Mm2Clusters:
    return Mm2Clusters(
        source,
        target,
        source_config,
        target_config,
        mm2_offsets_topic(source),
        mm2_offset_syncs_topic(target),
        mm2_worker_group(source),
    )


def _reader(config: Mapping[str, str]) -> Consumer:
    return Consumer(
        {**config, **QUIET, "group.id": "drsvc-mm2-takeover", "enable.auto.commit": False,
         "enable.partition.eof": False}
    )  # fmt: skip


def _read_topic(config: Mapping[str, str], topic: str, timeout_s: float) -> list[Message]:
    """Every record of ``topic`` up to its current end (empty when it does not exist)."""
    consumer = _reader(config)
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                ends[p] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        found: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"reading {topic}: not read to its end in time")
            for msg in consumer.consume(5000, 0.5):
                if msg.error() is not None:
                    continue
                found.append(msg)
                p, offset = msg.partition(), msg.offset()
                if p in ends and offset is not None and offset + 1 >= ends[p]:
                    del ends[p]
        return found
    except KafkaException as err:
        raise KafkaUnavailableError(f"reading {topic}: {err}") from err
    finally:
        consumer.close()


def _record_at(config: Mapping[str, str], topic: str, partition: int, offset: int,
               timeout_s: float) -> Message | None:  # fmt: skip
    consumer = _reader(config)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in consumer.consume(1, 0.5):
                if msg.error() is None:
                    return msg if msg.offset() == offset else None
        return None
    finally:
        consumer.close()


def _same(a: Message | None, b: Message | None) -> bool:
    if a is None or b is None:
        return False
    return (a.key(), a.value(), a.timestamp()[1], list(a.headers() or [])) == (
        b.key(), b.value(), b.timestamp()[1], list(b.headers() or []),
    )  # fmt: skip


def _connect_members(admin: AdminClient, group: str, timeout_s: float) -> int:
    """Members of a Connect workers' group (the consumer-group API refuses to describe one)."""
    try:
        with warnings.catch_warnings():  # the only admin call that describes non-consumer groups
            warnings.simplefilter("ignore", DeprecationWarning)
            groups = admin.list_groups(group, timeout=timeout_s)
    except KafkaException as err:
        raise KafkaUnavailableError(f"describing group {group}: {err}") from err
    return sum(len(g.members) for g in groups if g.id == group)


def read_progress(clusters: Mm2Clusters, timeout_s: float) -> dict[Partition, int]:
    records: dict[Mm2Progress, int | None] = {}
    for msg in _read_topic(clusters.target_config, clusters.offsets_topic, timeout_s):
        try:
            decoded = decode_progress(msg.key(), msg.value())
        except FormatError as err:
            raise ConfigError(f"{clusters.offsets_topic} on {clusters.target}: {err}") from err
        if decoded is not None:
            records[decoded[0]] = decoded[1]
    return latest_progress(records, clusters.source)


def read_last_syncs(clusters: Mm2Clusters, timeout_s: float) -> dict[Partition, tuple[int, int]]:
    last: dict[Partition, tuple[int, int]] = {}
    for msg in _read_topic(clusters.source_config, clusters.syncs_topic, timeout_s):
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
    target_admin = admin_client(clusters.target_config["bootstrap.servers"],
                                {**clusters.target_config, **QUIET})  # fmt: skip
    running = _connect_members(target_admin, clusters.worker_group, timeout_s)
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
    consumer = _reader(clusters.target_config)
    try:
        decisions = []
        for topic, count in sorted(partitions.items()):
            for p in range(count):
                low, high = (0, 0)
                if topic in target_topics:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=timeout_s
                    )
                copy = PartitionCopy(topic, p, progress.get((topic, p)), syncs.get((topic, p)),
                                     low, high)  # fmt: skip

                def matches(offset: int, t: str = topic, part: int = p, end: int = high) -> bool:
                    last = _record_at(clusters.target_config, t, part, end - 1, timeout_s)
                    origin = _record_at(clusters.source_config, t, part, offset, timeout_s)
                    return _same(last, origin)

                decisions.append(takeover_start(copy, matches))
    finally:
        consumer.close()
    plan = TakeoverPlan(tuple(decisions))
    if plan.refusals:
        raise RefusedError("cannot take over from MirrorMaker 2: " + "; ".join(plan.refusals))
    return plan


def refuse_if_the_flow_copied(
    clusters: Mm2Clusters, plan: TakeoverPlan, timeout_s: float = 30.0
) -> None:
    """Refuse (:class:`RefusedError`) when drsvc's flow already has progress of its own on
    a partition to take over: it copied before, and taking over now would copy twice or skip."""
    group = naming.replicator_group(clusters.source, clusters.target)
    config = clusters.source_config
    consumer = Consumer({**config, **QUIET, "group.id": group, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(t, p) for t, p in plan.starts]
        existing = [tp for tp in consumer.committed(wanted, timeout=timeout_s) if tp.offset >= 0]
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
    config = clusters.source_config
    admin = admin_client(config["bootstrap.servers"], {**config, **QUIET})
    answers = alter_group_offsets(admin, group, plan.starts, timeout_s)
    failed = {tp: err for tp, err in answers.items() if err is not None}
    if failed:
        (t, p), err = next(iter(failed.items()))
        raise RefusedError(
            f"committing the takeover positions of group {group} failed for {len(failed)}"
            f" partition(s), e.g. {t}-{p}: {err}"
        )
