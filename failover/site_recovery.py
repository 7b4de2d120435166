"""When a lost site returns: its records that never crossed, and the application's ``on_recovery``.

An unplanned failover moves an application away from a cluster that stopped answering. Records
written there after the last one that crossed are not part of the history the application
continues on the new cluster: the failover's record lists them as open ranges (their end was not
known), and it paused the flow from the lost cluster for the application's topics, so they are not
copied behind the new history's back when the site returns.

Once it is back, recovery closes those ranges (the *divergence*: per source partition, from the
replicated position to the end the partition has now) and applies the application's policy:

- ``quarantine`` (the default): the records stay out of the new history. They are listed, per
  partition, in the failover's record (the divergence report), the flow from the returned cluster
  skips them (its control document's ``skip_below``) and resumes for the application's topics,
  and a later failback to that cluster starts the groups past them.
- ``replay``: the same, and the records are first copied, in order, to the application's topics
  on the cluster where it is active now, each with headers naming where it came from and the
  failover, so they join the new history late and visibly, never silently.

Everything here is pure; the executor reads the offsets and writes the effects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = [
    "REPLAYED_FROM_HEADER",
    "REPLAYED_IN_FAILOVER_HEADER",
    "DivergentRange",
    "PartitionOffset",
    "RecoveryPolicy",
    "SiteRecovery",
    "crossed_end",
    "divergence",
    "parse_replayed_from",
    "past_quarantine",
    "replayed_from_value",
    "skip_floors",
]

#: header of a replayed record: ``<cluster>/<topic>/<partition>/<offset>`` of the original
REPLAYED_FROM_HEADER = "drsvc-replayed-from"
#: header of a replayed record: the failover whose recovery replayed it
REPLAYED_IN_FAILOVER_HEADER = "drsvc-replayed-in"


class RecoveryPolicy(StrEnum):
    QUARANTINE = "quarantine"
    REPLAY = "replay"


@dataclass(frozen=True, order=True)
class PartitionOffset:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, order=True)
class DivergentRange:
    """Records of one source partition on the returned cluster that never crossed:
    ``[first_offset, end_offset)``."""

    topic: str
    partition: int
    first_offset: int
    end_offset: int

    @property
    def records(self) -> int:
        """Offsets in the range (a compacted or transactional topic may hold fewer records)."""
        return self.end_offset - self.first_offset

    @property
    def last_offset(self) -> int:
        return self.end_offset - 1


@dataclass(frozen=True)
class SiteRecovery:
    """The recovery of one unplanned failover's old cluster, as recorded with the failover."""

    policy: RecoveryPolicy
    #: the cluster that returned (the failover's old cluster)
    cluster: str
    started_ms: int
    divergence: tuple[DivergentRange, ...]
    #: replay: the cluster the records are copied to (where the application is active)
    into: str | None = None
    #: replay: the end offsets of the application's topics on ``into`` when the replay began;
    #: copies an interrupted attempt made lie past them, and are not made twice
    replay_from: tuple[PartitionOffset, ...] = ()
    #: records copied by the replay (None until it is done, or without replay)
    replayed: int | None = None
    completed_ms: int | None = None

    @property
    def completed(self) -> bool:
        return self.completed_ms is not None

    @property
    def records(self) -> int:
        return sum(r.records for r in self.divergence)

    def replay_done(self, replayed: int) -> SiteRecovery:
        return replace(self, replayed=replayed)

    def complete(self, at_ms: int) -> SiteRecovery:
        return replace(self, completed_ms=at_ms)


def divergence(
    replicated: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]
) -> tuple[DivergentRange, ...]:
    """The ranges between each partition's replicated position and its end now (partitions
    without a replicated position diverge from offset 0)."""
    found = []
    for (topic, partition), end in sorted(ends.items()):
        first = replicated.get((topic, partition), 0)
        if end > first:
            found.append(DivergentRange(topic, partition, first, end))
    return tuple(found)


def crossed_end(synced: int, copied: Iterable[int]) -> int:
    """The next source offset past a partition's last copy on the target: ``synced`` (what the
    offset syncs map), or one past the newest copy found after it that no sync maps yet."""
    return max(synced, max(copied, default=-1) + 1)


def skip_floors(recovery: SiteRecovery) -> dict[tuple[str, int], int]:
    """What the flow from the returned cluster must not copy: per source partition, nothing
    below the divergence's end."""
    return {(r.topic, r.partition): r.end_offset for r in recovery.divergence}


def past_quarantine(
    topic: str, partition: int, offset: int, recoveries: Iterable[SiteRecovery]
) -> int:
    """A group's start on the returned cluster, moved past divergent records it would read
    first (a failback must not read quarantined or already replayed records there)."""
    for recovery in recoveries:
        for found in recovery.divergence:
            inside = found.first_offset <= offset < found.end_offset
            if (found.topic, found.partition) == (topic, partition) and inside:
                offset = found.end_offset
    return offset


def replayed_from_value(cluster: str, topic: str, partition: int, offset: int) -> str:
    return f"{cluster}/{topic}/{partition}/{offset}"


def parse_replayed_from(value: str) -> tuple[str, str, int, int] | None:
    """``(cluster, topic, partition, offset)`` of a replayed-from header; None if malformed.
    Topic names cannot contain ``/``, so the value splits unambiguously."""
    parts = value.split("/")
    if len(parts) != 4:
        return None
    cluster, topic, partition, offset = parts
    if not (partition.isdigit() and offset.isdigit()):
        return None
    return cluster, topic, int(partition), int(offset)
