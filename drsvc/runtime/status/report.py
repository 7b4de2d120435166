"""The result of ``drsvc status``: per flow, per source partition, progress, lag and owner.

Lag counts the source records a flow still has to copy:

* a partition with progress: ``end - max(replicated, log start)`` (records deleted by retention
  before they were copied cannot be copied any more, so they are not lag; the worker reports them
  as lost);
* a partition the flow never copied: ``end - where the flow would start`` (the log start for
  ``start: earliest``, the end for ``latest``, the first offset at the timestamp otherwise);
* a partition whose progress cannot be read (exactly-once progress without its metadata): unknown.

End offsets are last stable offsets: what the replicator's ``read_committed`` consumer can reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

#: committed: the flow's progress is known; none: never copied; unknown: progress unreadable
ProgressState = Literal["committed", "none", "unknown"]


@dataclass(frozen=True)
class Owner:
    """The consumer-group member that copies a partition (as Kafka's group tools show it)."""

    member_id: str
    client_id: str
    host: str


@dataclass(frozen=True)
class PartitionStatus:
    """One source partition of a flow."""

    topic: str
    partition: int
    remote_topic: str
    progress: ProgressState
    #: next source offset whose copy is persisted; None when never copied or unknown
    replicated_offset: int | None
    log_start_offset: int | None
    source_end_offset: int | None
    lag: int | None
    owner: Owner | None

    def as_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote_topic": self.remote_topic,
            "replicated_offset": self.replicated_offset,
            "source_end_offset": self.source_end_offset,
            "log_start_offset": self.log_start_offset,
            "lag": self.lag,
            "progress": self.progress,
            "owner": "-" if self.owner is None else self.owner.member_id,
            "owner_host": None if self.owner is None else self.owner.host,
            "owner_client_id": None if self.owner is None else self.owner.client_id,
        }


@dataclass(frozen=True)
class FlowStatus:
    """One flow: its partitions, or the error that kept them from being read."""

    flow: str
    source: str
    target: str
    delivery: str
    #: the consumer group holding the flow's progress, and the cluster it lives on
    progress_group: str
    progress_cluster: str
    partitions: tuple[PartitionStatus, ...] = ()
    error: str | None = None

    @property
    def lag(self) -> int | None:
        """Records left to copy over the partitions whose lag is known; None after an error."""
        if self.error is not None:
            return None
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def unknown_partitions(self) -> int:
        return sum(p.lag is None for p in self.partitions)

    def as_dict(self) -> dict[str, object]:
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "delivery": self.delivery,
            "progress_group": self.progress_group,
            "progress_cluster": self.progress_cluster,
            "lag": self.lag,
            "unknown_partitions": self.unknown_partitions,
            "partitions": [p.as_dict() for p in self.partitions],
            "error": self.error,
        }


@dataclass(frozen=True)
class StatusReport:
    """Every flow asked for, as of one moment."""

    as_of: datetime
    flows: tuple[FlowStatus, ...]

    @property
    def failed(self) -> bool:
        """True when some flow could not be read."""
        return any(flow.error is not None for flow in self.flows)

    def as_dict(self) -> dict[str, object]:
        return {
            "as_of": self.as_of.isoformat(timespec="milliseconds"),
            "flows": [flow.as_dict() for flow in self.flows],
        }


def partition_lag(
    replicated: int | None,
    progress: ProgressState,
    log_start: int | None,
    end: int | None,
    first_copy: int | None,
) -> int | None:
    """Records of one partition left to copy (see the module docstring); ``first_copy`` is
    where the flow would start a partition it never copied."""
    if end is None or progress == "unknown":
        return None
    if progress == "committed":
        assert replicated is not None
        start = replicated if log_start is None else max(replicated, log_start)
    elif first_copy is not None:
        start = first_copy
    else:
        return None
    return max(0, end - start)
