"""Reading how far a migration's copy has got: the flow's committed progress (the next source
offset whose copy is on the target, as ``drsvc status`` reads it) against the source's ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping

from drsvc.runtime.status.cluster_reader import ClusterReader, KafkaClusterReader
from drsvc.runtime.status.flow_status import covered_partitions
from drsvc.topology.models import Flow, Topology
from failover import naming
from failover.migration_cutover import PartitionCatchUp, catch_up_rows, lagging
from failover.migration_progress import Look
from failover.offset_syncs import TopicPartition


class MigrationReader:
    """Reads the migration's two clusters (``topology`` includes its flow)."""

    def __init__(
        self,
        topology: Topology,
        flow: Flow,
        bootstrap: Mapping[str, str],
        timeout_s: float = 10.0,
        *,
        source: ClusterReader | None = None,
    ) -> None:
        self.topology = topology
        self.flow = flow
        config = topology.cluster(flow.source).client_config(bootstrap.get(flow.source))
        self.source = source or KafkaClusterReader(flow.source, config, timeout_s)
        self.group = naming.replicator_group(flow.source, flow.target)

    def partitions(self, topics: Collection[str] | None = None) -> list[TopicPartition]:
        """The source partitions the flow copies (of ``topics`` only, when given)."""
        covered = covered_partitions(self.topology, self.flow, self.source.partition_counts())
        return [tp for tp, _remote in covered if topics is None or tp.topic in topics]

    def copied_topics(self) -> set[str]:
        return {tp.topic for tp in self.partitions()}

    def progress(self, partitions: Collection[TopicPartition]) -> dict[tuple[str, int], int]:
        commits = self.source.committed(self.group, partitions)
        return {(tp.topic, tp.partition): c.offset for tp, c in commits.items()}

    def look(self) -> Look:
        parts = self.partitions()
        replicated = self.progress(parts)  # progress before ends: lag is never understated
        starts = self.source.log_starts(parts)
        ends = self.source.log_ends(parts)
        return Look(
            at_s=time.monotonic(),
            replicated=replicated,
            starts={(tp.topic, tp.partition): o for tp, o in starts.items()},
            ends={(tp.topic, tp.partition): o for tp, o in ends.items()},
        )

    def catch_up(
        self,
        topics: Collection[str],
        wait_s: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[PartitionCatchUp]:
        """Per partition of ``topics``: the source's end now, and the copy's progress read
        after it, again every half second for up to ``wait_s`` until nothing lags (the flow
        commits its progress about every second)."""
        parts = self.partitions(topics)
        ends = {(tp.topic, tp.partition): o for tp, o in self.source.log_ends(parts).items()}
        deadline = time.monotonic() + wait_s
        while True:
            rows = catch_up_rows(ends, self.progress(parts))
            if not lagging(rows) or time.monotonic() >= deadline:
                return rows
            sleep(0.5)
