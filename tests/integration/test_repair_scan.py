"""The sync repair scan of a starting at-least-once worker ends at the remote partition's end,
also when that end is a transaction marker (which no consumer is ever given); and its committed
progress carries the source leader epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from replication_support import (
    create,
    end_offsets,
    produce,
    read_all,
    running_workers,
    sequence_records,
    wait_for,
    write_topology,
)

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.topology.loader import load_topology
from failover import naming, provenance

pytestmark = pytest.mark.timeout(120)


def test_a_remote_partition_ending_with_a_transaction_marker_does_not_stall_the_start(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "repair-marker"
    create(east, topic, 1)
    produce(east, topic, sequence_records(200, 1, tag="marker-"))
    # The remote topic already exists and ends with a commit marker: one committed record of
    # some earlier transactional writer, then the marker (high watermark 2, last record at 0).
    create(west, f"east.{topic}", 1)
    writer = Producer({"bootstrap.servers": west, "transactional.id": "repair-marker-writer"})
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(f"east.{topic}", b"earlier", partition=0)
    writer.commit_transaction(30)
    assert end_offsets(west, f"east.{topic}") == {0: 2}

    topology = write_topology(
        tmp_path / "marker.yaml",
        "marker",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": [f"^{topic}$"]}}],
    )
    with running_workers(topology, ["east->west"], tmp_path) as (worker,):
        # Before the scan ended at the partition's end it waited for an offset the marker never
        # delivers, gave up after 60 s and failed the worker's start, again and again.
        wait_for(
            lambda: end_offsets(west, f"east.{topic}").get(0, 0) >= 202,
            30,
            "the copies behind the marker",
        )
        assert worker.proc.poll() is None, worker.log_tail()
    copies = [r for r in read_all(west, f"east.{topic}") if provenance.chain(r.headers)]
    assert [provenance.chain(r.headers)[-1].offset for r in copies] == list(range(200))
    # The committed progress carries the source leader epoch, so that a restart can tell a
    # truncated source log (an unclean leader election) from its own position.
    group = Consumer(
        {"bootstrap.servers": east, "group.id": naming.replicator_group("east", "west")}
    )
    try:
        (progress,) = group.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        group.close()
    assert progress.offset == 200
    assert progress.leader_epoch is not None and progress.leader_epoch >= 0


def test_what_crossed_counts_copies_a_lost_worker_left_without_syncs(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    """A worker that loses its partitions (its source cluster gone, its group session with it)
    between a copy landing and the copy's sync leaves that copy unmapped. A recovery reading
    only the syncs then reports records that did cross as never replicated."""
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "crossed-tail"
    create(east, topic, 2)
    produce(east, topic, sequence_records(200, 2, tag="crossed-"))
    topology = write_topology(
        tmp_path / "crossed.yaml",
        "crossed",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": [f"^{topic}$"]}}],
    )
    with running_workers(topology, ["east->west"], tmp_path) as (worker,):
        wait_for(
            lambda: sum(end_offsets(west, f"east.{topic}").values()) >= 200,
            60,
            "the copies",
        )
        assert worker.proc.poll() is None, worker.log_tail()
    clusters = KafkaFailoverClusters(load_topology(topology))
    copies = {topic: f"east.{topic}"}
    synced = clusters.replicated("east", "west", copies)
    assert synced == {(topic, 0): 100, (topic, 1): 100}
    assert clusters.crossed("east", "west", copies) == synced
    # Ten more records on east, of which partition 0's first four crossed without their sync.
    produce(east, topic, sequence_records(10, 1, first=200, tag="crossed-"))
    lost_worker = Producer({"bootstrap.servers": west, "enable.idempotence": True})
    for offset in range(100, 104):
        header = provenance.encode(provenance.Provenance("east", topic, 0, offset))
        lost_worker.produce(
            f"east.{topic}",
            b"copy",
            partition=0,
            headers=[(provenance.PROVENANCE_HEADER, header)],
        )
    assert lost_worker.flush(30) == 0
    assert clusters.replicated("east", "west", copies) == synced
    assert clusters.crossed("east", "west", copies) == {(topic, 0): 104, (topic, 1): 100}
