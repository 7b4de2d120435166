"""What a failover knows about data that did not make it: lag before a planned switch, the
recovery point after an unplanned one.

A planned failover switches only when nothing is left behind: every partition of the
application's topics is replicated up to its source end, and every group's checkpoint stands at
the group's committed offset on the old cluster (:func:`lagging`). An unplanned failover
switches anyway and reports, per partition, the records known not to have made it: those between
the replicated position and the last source end seen (:func:`unreplicated`). When the source end
was never seen (the source died before anyone asked), the range is open and its count a lower
bound of zero or more: the report says so rather than pretending to know.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "GroupPosition",
    "Lag",
    "PartitionReplication",
    "UnreplicatedRange",
    "cutoffs",
    "lagging",
    "rpo_records",
    "unreplicated",
]


@dataclass(frozen=True, order=True)
class PartitionReplication:
    """How far one source partition of the application is replicated."""

    topic: str
    partition: int
    #: next source offset whose copy (and its sync) is durable on the target
    replicated: int
    #: the source's end (last stable offset) as last seen; None when never seen
    source_end: int | None


@dataclass(frozen=True, order=True)
class GroupPosition:
    """A group's committed offset on the old cluster, and where its checkpoint stands."""

    group: str
    topic: str
    partition: int
    committed: int
    #: the source offset of the group's newest checkpoint; None when there is none
    checkpointed: int | None


@dataclass(frozen=True, order=True)
class Lag:
    """Why a planned failover still waits (one line of its report)."""

    topic: str
    partition: int
    #: records still to replicate, or the group's offsets the checkpoint has not reached
    behind: int
    #: "" for replication, else the group whose checkpoint lags
    group: str = ""

    def describe(self) -> str:
        where = f"{self.topic}-{self.partition}"
        if self.group:
            return f"group {self.group} on {where}: its checkpoint is {self.behind} behind"
        return f"{where}: {self.behind} record(s) not replicated yet"


def lagging(
    partitions: Iterable[PartitionReplication], groups: Iterable[GroupPosition]
) -> list[Lag]:
    """Everything a planned failover still waits for (empty: it may switch). A partition whose
    source end is unknown lags by an unknown amount: it is reported with ``behind`` = -1."""
    lags: list[Lag] = []
    for p in sorted(partitions):
        if p.source_end is None:
            lags.append(Lag(p.topic, p.partition, -1))
        elif p.replicated < p.source_end:
            lags.append(Lag(p.topic, p.partition, p.source_end - p.replicated))
    for g in sorted(groups):
        if g.checkpointed is None:
            lags.append(Lag(g.topic, g.partition, g.committed, g.group))
        elif g.checkpointed != g.committed:
            # A checkpoint past the committed offset is stale too (the group went back).
            lags.append(Lag(g.topic, g.partition, abs(g.committed - g.checkpointed), g.group))
    return lags


@dataclass(frozen=True, order=True)
class UnreplicatedRange:
    """Source records of one partition known not to be on the target after the switch."""

    topic: str
    partition: int
    first_offset: int
    #: the last offset known to exist; None when the source end was never seen
    last_offset: int | None

    @property
    def records(self) -> int:
        """How many (a lower bound, 0, when the end is unknown)."""
        if self.last_offset is None:
            return 0
        return self.last_offset - self.first_offset + 1

    @property
    def exact(self) -> bool:
        return self.last_offset is not None


def unreplicated(partitions: Iterable[PartitionReplication]) -> list[UnreplicatedRange]:
    """Per partition, the records the switch leaves behind on the old cluster. Partitions
    replicated up to their last seen end are not listed; partitions whose end was never seen are
    listed as open ranges."""
    ranges = []
    for p in sorted(partitions):
        if p.source_end is None:
            ranges.append(UnreplicatedRange(p.topic, p.partition, p.replicated, None))
        elif p.replicated < p.source_end:
            ranges.append(UnreplicatedRange(p.topic, p.partition, p.replicated, p.source_end - 1))
    return ranges


def rpo_records(ranges: Iterable[UnreplicatedRange]) -> tuple[int, bool]:
    """The recovery point in records: how many are known lost, and whether that is exact (False:
    some partition's end was never seen, so the true number may be higher)."""
    total, exact = 0, True
    for r in ranges:
        total += r.records
        exact = exact and r.exact
    return total, exact


def cutoffs(ends: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The cut-off per remote topic partition recorded at the switch: its end offset then.
    Consumers drain a remote copy up to it before they read what is written locally."""
    return {key: end for key, end in sorted(ends.items()) if end >= 0}
