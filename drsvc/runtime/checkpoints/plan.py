"""Which checkpoint streams a topology has, and which offset-sync topics they read, and where.

A *stream* belongs to one flow ``A->B``: it follows the consumer groups on ``A`` and writes their
checkpoints to ``A.checkpoints.internal`` on ``B``. It translates

* **downstream** through the flow's own syncs (``drsvc.offset-syncs.A`` on ``B``) the topics the
  flow copies (``orders`` on A continues as ``A.orders`` on B), and
* **upstream** through the syncs of the reverse flow ``B->A``, when there is one
  (``drsvc.offset-syncs.B`` on ``A``), the copies that flow made on A (``B.orders`` on A continues
  as ``orders`` on B). That is what lets a group of an active/active pair that reads both kinds of
  topic move to B even when A is gone: its upstream positions were checkpointed on B beforehand.

Each sync topic is followed once per process, by the faust app of the cluster that holds it, and
shared by every stream that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from drsvc.errors import ConfigError
from drsvc.topology.models import Flow, Topology

__all__ = ["CheckpointPlan", "StreamPlan", "SyncSource", "plan_checkpoints"]


@dataclass(frozen=True)
class SyncSource:
    """An offset-sync topic: the syncs of flow ``flow_id``, on cluster ``cluster`` (its target)."""

    flow_id: str
    cluster: str
    topic: str


@dataclass(frozen=True)
class StreamPlan:
    """The checkpoint stream of one flow."""

    flow: Flow
    checkpoints_topic: str
    """On ``flow.target``."""
    downstream: SyncSource
    upstream: SyncSource | None
    """The reverse flow's syncs, on ``flow.source``; None without a reverse flow."""

    @property
    def flow_id(self) -> str:
        return self.flow.id


@dataclass(frozen=True)
class CheckpointPlan:
    """Every stream to run, and the sync topics they read."""

    streams: tuple[StreamPlan, ...]

    @property
    def sync_sources(self) -> tuple[SyncSource, ...]:
        """Each sync topic any stream reads, once."""
        seen: dict[tuple[str, str], SyncSource] = {}
        for stream in self.streams:
            for source in (stream.downstream, stream.upstream):
                if source is not None:
                    seen.setdefault((source.cluster, source.topic), source)
        return tuple(seen.values())

    @property
    def clusters(self) -> tuple[str, ...]:
        """Clusters the process talks to through faust: those holding a sync topic it reads
        (every stream's target holds its downstream sync topic)."""
        return tuple(sorted({source.cluster for source in self.sync_sources}))

    def streams_into(self, alias: str) -> tuple[StreamPlan, ...]:
        """Streams that write checkpoints to ``alias``."""
        return tuple(s for s in self.streams if s.flow.target == alias)

    def sync_sources_on(self, alias: str) -> tuple[SyncSource, ...]:
        """Sync topics on ``alias``."""
        return tuple(s for s in self.sync_sources if s.cluster == alias)


def plan_checkpoints(topology: Topology, flow_id: str | None = None) -> CheckpointPlan:
    """The streams of every flow of ``topology``, or only of ``flow_id`` (``east->west``).

    Raises :class:`ConfigError` for an unknown flow or a topology without flows.
    """
    if not topology.flows:
        raise ConfigError(
            f"topology '{topology.name}' has no flows: there is nothing to checkpoint"
        )
    flows = topology.flows
    if flow_id is not None:
        flows = tuple(f for f in topology.flows if f.id == flow_id)
        if not flows:
            known = ", ".join(f.id for f in topology.flows)
            raise ConfigError(
                f"topology '{topology.name}' has no flow {flow_id!r} (flows: {known})"
            )
    names = topology.internal_names()
    reverse = {(f.source, f.target): f for f in topology.flows}
    streams = []
    for flow in flows:
        back = reverse.get((flow.target, flow.source))
        streams.append(
            StreamPlan(
                flow=flow,
                checkpoints_topic=names.checkpoints_topic(flow.source),
                downstream=SyncSource(flow.id, flow.target, names.offset_syncs_topic(flow.source)),
                upstream=None
                if back is None
                else SyncSource(back.id, back.target, names.offset_syncs_topic(back.source)),
            )
        )
    return CheckpointPlan(tuple(streams))
