"""The at-least-once replication worker against real clusters."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import TopicPartition
from replication_support import (
    WorkerProcess,
    check_syncs_map_every_copy,
    create,
    end_offsets,
    original_headers,
    produce,
    read_all,
    read_syncs,
    running_workers,
    sequence_records,
    topics_of,
    wait_for,
    write_topology,
)

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.kafka.admin import admin_client, grow_partitions
from failover import provenance


def _copied_count(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def test_active_active_copies_each_way_once_and_never_loops(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "aa-orders", 3)
    create(west, "aa-payments", 2)
    produce(east, "aa-orders", sequence_records(3000, 3, tag="orders-"))
    produce(west, "aa-payments", sequence_records(2000, 2, tag="payments-"))
    # The include pattern also matches the remote topics, so only the loop rule keeps
    # west.aa-payments on east from going back to west.
    include = {"include": [r"(.*\.)?aa-.*"]}
    topology = write_topology(
        tmp_path / "aa.yaml",
        "aa",
        {"east": east, "west": west},
        [
            {"source": "east", "target": "west", "topics": include},
            {"source": "west", "target": "east", "topics": include},
        ],
    )
    with running_workers(topology, ["east->west", "west->east"], tmp_path):
        wait_for(lambda: _copied_count(west, "east.aa-orders") >= 3000, 60, "east.aa-orders")
        wait_for(lambda: _copied_count(east, "west.aa-payments") >= 2000, 60, "west.aa-payments")
        time.sleep(3)  # give a loop, if there were one, time to show

    for cluster in (east, west):
        names = topics_of(cluster)
        assert not [n for n in names if n.startswith(("east.west.", "west.east."))], names
        assert not [n for n in names if n.startswith(("east.east.", "west.west."))], names

    for source, target, topic, alias in (
        (east, west, "aa-orders", "east"),
        (west, east, "aa-payments", "west"),
    ):
        originals = read_all(source, topic)
        copies = read_all(target, f"{alias}.{topic}")
        assert len(copies) == len(originals), "each record arrives exactly once"
        for original, copy in zip(originals, copies, strict=True):
            assert copy.partition == original.partition
            assert copy.key == original.key
            assert copy.value == original.value
            assert copy.timestamp == original.timestamp
            assert original_headers(copy) == original.headers
            assert copy.headers[-1][0] == provenance.PROVENANCE_HEADER
            hop = provenance.chain(copy.headers)[-1]
            assert (hop.cluster, hop.topic, hop.partition, hop.offset) == (
                alias,
                topic,
                original.partition,
                original.offset,
            )
        check_syncs_map_every_copy(copies, read_syncs(target, alias), topic)


def test_aggregation_of_three_sources(aggregation_trio: EnvironmentInfo, tmp_path: Path) -> None:
    clusters = aggregation_trio.clusters
    sources = ("east", "west", "south")
    for alias in sources:
        create(clusters[alias], "agg-events", 2)
        produce(clusters[alias], "agg-events", sequence_records(500, 2, tag=f"{alias}-"))
    topology = write_topology(
        tmp_path / "agg.yaml",
        "agg",
        {a: clusters[a] for a in (*sources, "agg")},
        [{"source": a, "target": "agg", "topics": {"include": ["agg-events"]}} for a in sources],
    )
    flows = [f"{a}->agg" for a in sources]
    with running_workers(topology, flows, tmp_path):
        for alias in sources:
            wait_for(
                lambda alias=alias: _copied_count(clusters["agg"], f"{alias}.agg-events") >= 500,
                90,
                f"{alias}.agg-events on agg",
            )
    for alias in sources:
        values = Counter(r.value for r in read_all(clusters["agg"], f"{alias}.agg-events"))
        assert values == Counter(f"{alias}-{i}".encode() for i in range(500))


def test_new_topics_and_partitions_are_picked_up_while_running(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "grow-first", 1)
    topology = write_topology(
        tmp_path / "grow.yaml",
        "grow",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["grow-.*"]}}],
    )
    with running_workers(topology, ["east->west"], tmp_path):
        wait_for(lambda: "east.grow-first" in topics_of(west), 30, "east.grow-first")
        created = time.monotonic()
        create(east, "grow-later", 2)
        produce(east, "grow-later", sequence_records(100, 2))
        wait_for(lambda: _copied_count(west, "east.grow-later") >= 100, 30, "the new topic")
        assert time.monotonic() - created < 30

        grow_partitions(admin_client(east), "grow-later", 4)
        grown = time.monotonic()
        produce(east, "grow-later", [(3, b"k", b"in-new-partition", [], 0)])
        wait_for(
            lambda: end_offsets(west, "east.grow-later").get(3, 0) >= 1, 30, "the new partition"
        )
        assert time.monotonic() - grown < 30
    copy = [r for r in read_all(west, "east.grow-later") if r.partition == 3]
    assert [r.value for r in copy] == [b"in-new-partition"]


def test_kill_9_mid_stream_loses_nothing(cluster_pair: EnvironmentInfo, tmp_path: Path) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    total = 120_000
    create(east, "kill-seq", 3)
    produce(east, "kill-seq", sequence_records(total, 3))
    topology = write_topology(
        tmp_path / "kill.yaml",
        "kill",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["kill-seq"]}}],
    )
    first = WorkerProcess(topology, "east->west", tmp_path / "first.log")
    try:
        # The worker copies tens of thousands of records a second: look often, so the kill
        # lands mid-stream and leaves copies whose syncs were not written yet.
        wait_for(lambda: _copied_count(west, "east.kill-seq") >= 30_000, 90, "a third copied", 0.05)
    finally:
        first.kill()
    with running_workers(topology, ["east->west"], tmp_path):

        def all_copied_and_mapped() -> bool:
            # Every record copied is not enough: the copies the killed worker made last may
            # all be there before the restarted one has taken the partitions and rebuilt
            # their syncs. Wait for that too (the check below says what is still missing).
            if _copied_count(west, "east.kill-seq") < total:
                return False
            copies = read_all(west, "east.kill-seq")
            if len({r.value for r in copies}) < total:
                return False
            try:
                check_syncs_map_every_copy(copies, read_syncs(west, "east"), "kill-seq")
            except AssertionError:
                return False
            return True

        wait_for(all_copied_and_mapped, 180, "every record copied after the restart", 2.0)
    copies = read_all(west, "east.kill-seq")
    assert {r.value for r in copies} == {str(i).encode() for i in range(total)}
    check_syncs_map_every_copy(copies, read_syncs(west, "east"), "kill-seq")
    # Per partition, copies follow the source order; a restart may only go back, then forward.
    for partition in range(3):
        offsets = [
            provenance.chain(r.headers)[-1].offset for r in copies if r.partition == partition
        ]
        assert offsets[0] == 0
        assert all(b == a + 1 or b <= a for a, b in itertools.pairwise(offsets))


def test_a_target_outage_longer_than_the_message_timeout_loses_nothing(
    local_env: LocalEnvironment, cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    info = local_env.up(["out-src", "out-dst"])
    src, dst = info.clusters["out-src"], info.clusters["out-dst"]
    create(src, "outage-seq", 2)
    produce(src, "outage-seq", sequence_records(5000, 2))
    topology = write_topology(
        tmp_path / "outage.yaml",
        "outage",
        {"out-src": src, "out-dst": dst},
        [{"source": "out-src", "target": "out-dst", "topics": {"include": ["outage-seq"]}}],
    )
    with running_workers(
        topology, ["out-src->out-dst"], tmp_path, "--message-timeout-ms", "3000"
    ) as workers:
        wait_for(lambda: _copied_count(dst, "out-src.outage-seq") >= 5000, 60, "first batch")
        local_env.stop_site("out-dst")
        produce(src, "outage-seq", sequence_records(5000, 2, first=5000))
        time.sleep(8)  # well past the 3 s message timeout
        local_env.up(["out-dst"])
        wait_for(
            lambda: len({r.value for r in read_all(dst, "out-src.outage-seq")}) >= 10_000,
            120,
            "every record after the outage",
        )
        log_tail = workers[0].log_tail(400)
        assert "failed at offset" in log_tail
    copies = read_all(dst, "out-src.outage-seq")
    assert {r.value for r in copies} == {str(i).encode() for i in range(10_000)}
    try:
        check_syncs_map_every_copy(copies, read_syncs(dst, "out-src"), "outage-seq")
    except AssertionError as err:
        raise AssertionError(f"{err}\nworker log:\n{log_tail}") from None


def test_records_deleted_before_they_were_copied_are_reported(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "ret-seq", 1)
    produce(east, "ret-seq", sequence_records(1000, 1))
    topology = write_topology(
        tmp_path / "ret.yaml",
        "ret",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["ret-seq"]}}],
    )
    with running_workers(topology, ["east->west"], tmp_path):
        wait_for(lambda: _copied_count(west, "east.ret-seq") >= 1000, 60, "the first records")
    produce(east, "ret-seq", sequence_records(1000, 1, first=1000))
    admin = admin_client(east)
    deleted = admin.delete_records([TopicPartition("ret-seq", 0, 1500)])
    for future in deleted.values():
        future.result(timeout=30)
    with running_workers(topology, ["east->west"], tmp_path) as workers:
        wait_for(lambda: _copied_count(west, "east.ret-seq") >= 1500, 60, "the rest")
        time.sleep(1)
        log_tail = workers[0].log_tail(200)
    assert "500 record(s) of ret-seq-0 were deleted by retention on east" in log_tail
    values = [r.value for r in read_all(west, "east.ret-seq")]
    expected = [str(i).encode() for i in (*range(1000), *range(1500, 2000))]
    assert values == expected


def test_pause_resume_and_throttle_through_consul(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    consul = cluster_pair.consul_http_addr
    assert consul is not None
    create(east, "ctl-seq", 1)
    topology = write_topology(
        tmp_path / "ctl.yaml",
        "ctl",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["ctl-seq"]}}],
    )

    def flow_cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "flow", *args, "east->west", "-t",
             str(topology), "--consul", consul],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    with running_workers(topology, ["east->west"], tmp_path, "--consul", consul) as workers:
        worker = workers[0]
        wait_for(lambda: "east.ctl-seq" in topics_of(west), 30, "the remote topic")
        flow_cli("pause")
        wait_for(lambda: '"paused": true' in worker.log_tail(200), 30, "the worker to pause")
        produce(east, "ctl-seq", sequence_records(500, 1))
        time.sleep(6)  # more than a refresh interval: a paused flow copies nothing
        assert _copied_count(west, "east.ctl-seq") == 0

        flow_cli("resume")
        wait_for(lambda: _copied_count(west, "east.ctl-seq") >= 500, 30, "copying after resume")

        flow_cli("throttle", "--bytes-per-s", "50000")
        wait_for(lambda: '"throttle_bytes_per_s": 50000' in worker.log_tail(200), 30, "throttle")
        big = [(0, b"k", b"x" * 1000, [], 0) for _ in range(200)]
        started = time.monotonic()
        produce(east, "ctl-seq", big)
        wait_for(lambda: _copied_count(west, "east.ctl-seq") >= 700, 60, "throttled copying")
        # 200 kB at 50 kB/s cannot take less than about 3 s, however fast the machine.
        assert time.monotonic() - started >= 2.5
        flow_cli("throttle")
    values = [r.value for r in read_all(west, "east.ctl-seq")]
    assert values[:500] == [str(i).encode() for i in range(500)]
    assert len(values) == 700


def test_a_recreated_source_topic_is_copied_with_fresh_syncs(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "recreate-seq", 1)
    produce(east, "recreate-seq", sequence_records(100, 1, tag="old-"))
    topology = write_topology(
        tmp_path / "recreate.yaml",
        "recreate",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["recreate-seq"]}}],
    )
    admin = admin_client(east)
    with running_workers(topology, ["east->west"], tmp_path) as workers:
        wait_for(lambda: _copied_count(west, "east.recreate-seq") >= 100, 60, "the old topic")
        admin.delete_topics(["recreate-seq"])["recreate-seq"].result(timeout=30)
        wait_for(lambda: "recreate-seq" not in topics_of(east), 30, "the deletion")
        create(east, "recreate-seq", 1)
        produce(east, "recreate-seq", sequence_records(50, 1, tag="new-"))
        wait_for(lambda: _copied_count(west, "east.recreate-seq") >= 150, 60, "the new topic")
        log_tail = workers[0].log_tail(300)
    values = [r.value for r in read_all(west, "east.recreate-seq")]
    assert values == [f"old-{i}".encode() for i in range(100)] + [
        f"new-{i}".encode() for i in range(50)
    ], log_tail
    syncs = [s for s in read_syncs(west, "east") if s.topic == "recreate-seq"]
    ids = [s.source_topic_id for s in syncs if s.segments]
    assert len(set(ids)) == 2, "the new topic's syncs carry its own topic id"
    assert ids == sorted(ids, key=ids.index)  # old id first, then only the new one
