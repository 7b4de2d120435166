"""An in-memory :class:`~drsvc.runtime.failover.clusters.FailoverClusters` for executor tests.

It answers what the executor asks with values a test sets: per group and direction a translation
(exact or not, with what is left to replicate), checkpoints, ends, live members, and records every
offset commit, so a test can check that no group was ever moved backwards.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import PartitionError
from drsvc.runtime.failover.clusters import GroupMember
from drsvc.runtime.failover.fencing import FenceFailure, FencingReport
from drsvc.runtime.translation.group_translation import GroupTranslation, PartitionTranslation
from failover.checkpoints import Checkpoint, CheckpointKey
from failover.site_recovery import DivergentRange, PartitionOffset

Partition = tuple[str, int]


@dataclass
class FakeFailoverClusters:
    down: set[str] = field(default_factory=set)
    #: (group, from, to) -> partitions of the translation
    translations: dict[tuple[str, str, str], list[PartitionTranslation]] = field(
        default_factory=dict
    )
    checkpoint_map: dict[tuple[str, str], dict[CheckpointKey, Checkpoint]] = field(
        default_factory=dict
    )
    ends: dict[str, dict[Partition, int]] = field(default_factory=dict)
    replicated_map: dict[tuple[str, str], dict[Partition, int]] = field(default_factory=dict)
    #: (from, to) -> per source partition, one past the last copy on the target that no sync
    #: maps yet (a worker lost the partition before writing its sync)
    unsynced_map: dict[tuple[str, str], dict[Partition, int]] = field(default_factory=dict)
    members: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (cluster, group) -> its members by name (a group here counts them as live members too)
    member_list: dict[tuple[str, str], list[GroupMember]] = field(default_factory=dict)
    #: every reachability probe: (cluster, tries)
    probes: list[tuple[str, int]] = field(default_factory=list)
    #: (cluster, group) -> committed offsets, as the executor left them
    committed: dict[tuple[str, str], dict[Partition, int]] = field(default_factory=dict)
    #: every commit in order: (cluster, group, partition, offset)
    commits: list[tuple[str, str, Partition, int]] = field(default_factory=list)
    #: translate() calls before a translation turns exact (catching up)
    lagging_rounds: int = 0
    #: records replayed: (from, into, failover id, topic, partition, source offset)
    replayed: list[tuple[str, str, str, str, int, int]] = field(default_factory=list)
    #: replay() calls that fail half-way (after copying the first record) before one works
    failing_replays: int = 0
    #: every fencing: (cluster, transactional ids); ids in unfenceable fail with a reason
    fencings: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    unfenceable: set[str] = field(default_factory=set)
    #: every translate_groups() call: (groups, from, to); a real one reads each sync topic once
    group_batches: list[tuple[tuple[str, ...], str, str]] = field(default_factory=list)

    def _up(self, alias: str) -> None:
        if alias in self.down:
            raise KafkaUnavailableError(f"cluster '{alias}' is down")

    def fence(
        self, alias: str, transactional_ids: Sequence[str], timeout_s: float
    ) -> FencingReport:
        self.fencings.append((alias, tuple(transactional_ids)))
        failed = tuple(
            FenceFailure(t, "coordinator not available")
            for t in transactional_ids
            if alias in self.down or t in self.unfenceable
        )
        missing = {f.transactional_id for f in failed}
        return FencingReport(
            alias,
            fenced=tuple(t for t in transactional_ids if t not in missing),
            failed=failed,
            asked=tuple(transactional_ids),
        )

    def reachable(self, alias: str, timeout_s: float | None = None, *, tries: int = 3) -> bool:
        self.probes.append((alias, tries))
        return alias not in self.down

    def translate(self, group: str, from_alias: str, to_alias: str) -> GroupTranslation | None:
        self._up(from_alias)
        self._up(to_alias)
        parts = self.translations.get((group, from_alias, to_alias))
        if parts is None:
            return None
        if self.lagging_rounds > 0:
            self.lagging_rounds -= 1
            parts = [replace(p, not_replicated=5) for p in parts]
        return GroupTranslation(group, from_alias, to_alias, tuple(parts))

    def translate_groups(
        self, groups: Sequence[str], from_alias: str, to_alias: str
    ) -> dict[str, GroupTranslation | None]:
        self.group_batches.append((tuple(groups), from_alias, to_alias))
        return {group: self.translate(group, from_alias, to_alias) for group in groups}

    def checkpoints(self, from_alias: str, to_alias: str) -> dict[CheckpointKey, Checkpoint]:
        self._up(to_alias)
        return dict(self.checkpoint_map.get((from_alias, to_alias), {}))

    def replicated(
        self, from_alias: str, to_alias: str, topics: Collection[str]
    ) -> dict[Partition, int]:
        self._up(to_alias)
        found = self.replicated_map.get((from_alias, to_alias), {})
        return {tp: end for tp, end in found.items() if tp[0] in topics}

    def crossed(
        self, from_alias: str, to_alias: str, copies: Mapping[str, str]
    ) -> dict[Partition, int]:
        found = self.replicated(from_alias, to_alias, copies)
        for tp, end in self.unsynced_map.get((from_alias, to_alias), {}).items():
            if tp[0] in copies:
                found[tp] = max(found.get(tp, 0), end)
        return found

    def partition_ends(self, alias: str, topics: Collection[str]) -> dict[Partition, int]:
        self._up(alias)
        return {tp: end for tp, end in self.ends.get(alias, {}).items() if tp[0] in topics}

    def earliest(self, alias: str, partitions: Collection[Partition]) -> dict[Partition, int]:
        self._up(alias)
        return dict.fromkeys(partitions, 0)

    def live_members(self, alias: str, group: str) -> int:
        self._up(alias)
        return len(self.group_members(alias, group))

    def group_members(self, alias: str, group: str) -> list[GroupMember]:
        self._up(alias)
        if (alias, group) in self.member_list:
            return list(self.member_list[(alias, group)])
        count = self.members.get((alias, group), 0)
        return [GroupMember(f"{group}-member-{i}", "app", "/10.0.0.1") for i in range(count)]

    def set_offsets(
        self, alias: str, group: str, offsets: Mapping[Partition, int]
    ) -> dict[Partition, PartitionError | None]:
        self._up(alias)
        if self.group_members(alias, group):
            refusal = PartitionError("UNKNOWN_MEMBER_ID", "the group has members")
            return dict.fromkeys(offsets, refusal)
        for tp, offset in offsets.items():
            self.committed.setdefault((alias, group), {})[tp] = offset
            self.commits.append((alias, group, tp, offset))
        return dict.fromkeys(offsets)

    def replay(
        self,
        from_alias: str,
        into_alias: str,
        ranges: Collection[DivergentRange],
        failover_id: str,
        replay_from: Collection[PartitionOffset],
    ) -> int:
        self._up(from_alias)
        self._up(into_alias)
        done = {(t, p, o) for f, i, fid, t, p, o in self.replayed if fid == failover_id}
        copied = len(done)
        for found in sorted(ranges):
            for offset in range(found.first_offset, found.end_offset):
                if (found.topic, found.partition, offset) in done:
                    continue
                self.replayed.append(
                    (from_alias, into_alias, failover_id, found.topic, found.partition, offset)
                )
                copied += 1
                if self.failing_replays:
                    self.failing_replays -= 1
                    raise KafkaUnavailableError(f"replaying to {into_alias}: broken off")
        return copied


def exact(
    source_topic: str, partition: int, source_offset: int, topic: str, target_offset: int
) -> PartitionTranslation:
    """An exact downstream translation of one partition."""
    return PartitionTranslation(
        direction="downstream",
        flow="east->west",
        source_topic=source_topic,
        partition=partition,
        source_offset=source_offset,
        topic=topic,
        target_offset=target_offset,
        reason="exact",
        not_replicated=0,
    )
