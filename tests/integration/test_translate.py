"""``drsvc translate`` against real clusters: a group moved to the translated offsets reads exactly
what it had not read, zero records skipped and zero read twice.

Each test copies a topic with the real worker, lets a consumer group read part of it and commit,
runs ``drsvc translate --json`` and then starts the group on the other cluster at the translated
offsets. Source logs are made so that offsets differ between the clusters (records deleted before
replication started, transaction markers, aborted transactions): taking the committed offsets over
unchanged would fail every one of these tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import (
    Producer,
)
from replication_support import (
    create,
    produce,
    sequence_records,
    write_topology,
)
from translation_support import (
    by_partition,
    check_moved_exactly,
    commit_at,
    compacted_history,
    consume_and_commit,
    delete_before,
    hole_and_tombstone,
    read_from,
    read_keyed,
    replicate,
    replicated_topic,
    stable_ends,
    translate,
    translated,
)

from drsvc.devenv.environment import EnvironmentInfo

pytestmark = pytest.mark.timeout(90)


# -- failover (downstream) ------------------------------------------------------------------------


def test_failover_of_a_group_partly_through_a_topic(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    deleted = {0: 100, 1: 250, 2: 37}  # offsets on west start at 0: they differ from east's
    topology = replicated_topic(east, west, tmp_path, "tr-orders", 3000, "orders-", deleted)

    # Partition 0 read to its end, 1 partly, 2 not at all (committed at its first offset).
    stops = {0: 1000, 1: 250 + 417, 2: 37}
    consumed = consume_and_commit(east, "tr-orders", "tr-group", stops, "read_committed")
    assert sum(map(len, consumed.values())) == 900 + 417

    result = translate(topology, "tr-group", "east", "west")
    assert (result["group"], result["from"], result["to"], result["exact"]) == (
        "tr-group",
        "east",
        "west",
        True,
    )
    rows = translated(result, "east.tr-orders")
    assert sorted(rows) == [0, 1, 2]
    for p, row in rows.items():
        assert (row["source_topic"], row["source_offset"]) == ("tr-orders", stops[p])
        assert (row["direction"], row["exact"], row["reason"]) == ("downstream", True, "exact")
        assert row["target_offset"] == stops[p] - deleted[p]
        assert (row["not_replicated"], row["pending"]) == (0, 0)
        assert row["target_lag"] == row["source_lag"] == 1000 - stops[p]

    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(west, "east.tr-orders", "tr-group", starts, "read_committed")
    check_moved_exactly(by_partition(east, "tr-orders"), consumed, after)


def test_failover_of_a_group_more_than_10k_records_behind(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    deleted = {0: 333, 1: 0, 2: 1200}
    topology = replicated_topic(east, west, tmp_path, "tr-lag", 12_600, "lag-", deleted)

    stops = {0: 333 + 400, 1: 350, 2: 1200 + 250}
    consumed = consume_and_commit(east, "tr-lag", "tr-lag-group", stops, "read_committed")
    assert sum(map(len, consumed.values())) == 1000

    result = translate(topology, "tr-lag-group", "east", "west")
    rows = translated(result, "east.tr-lag")
    assert sorted(rows) == [0, 1, 2] and result["exact"]
    assert sum(row["source_lag"] for row in rows.values()) == 12_600 - 1533 - 1000 >= 10_000
    for p, row in rows.items():
        assert (row["exact"], row["target_offset"]) == (True, stops[p] - deleted[p])

    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(west, "east.tr-lag", "tr-lag-group", starts, "read_committed")
    assert sum(map(len, after.values())) == 12_600 - 1533 - 1000
    check_moved_exactly(by_partition(east, "tr-lag"), consumed, after)


def test_failover_from_a_transactional_source_with_aborted_transactions(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic, partitions = "tr-tx", 4
    create(east, topic, partitions)
    producer = Producer({"bootstrap.servers": east, "transactional.id": "tr-tx-producer"})
    producer.init_transactions(30)
    seq = 0
    for txn in range(40):  # 8 records per partition each; every fourth transaction is aborted
        producer.begin_transaction()
        for _ in range(8 * partitions):
            kind = "aborted" if txn % 4 == 2 else "committed"
            producer.produce(topic, f"{kind}-{seq}".encode(), partition=seq % partitions)
            seq += 1
        if txn % 4 == 2:
            producer.flush(30)  # so that the aborted records are in the log, not just dropped
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    producer.flush(30)
    del producer

    # The log of each partition: 8 offsets of data and 1 marker per transaction.
    everything = by_partition(east, topic, "read_committed")
    uncommitted = by_partition(east, topic, "read_uncommitted")
    data = {p: [o for o, _v in records] for p, records in uncommitted.items()}
    aborted = {p: [o for o, v in records if v.startswith(b"aborted")] for p, records in
               uncommitted.items()}  # fmt: skip
    ends = stable_ends(east, topic, partitions)
    markers = {p: sorted(set(range(ends[p])) - set(data[p])) for p in range(partitions)}
    assert all(len(markers[p]) == 40 and len(everything[p]) == 30 * 8 for p in markers)

    topology = write_topology(
        tmp_path / "tr.yaml",
        "tr",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["tr-.*"]}}],
    )
    replicate(topology, ["east->west"], tmp_path, {"east": east}, [f"east->west:{topic}:4"])

    stops = {
        0: markers[0][17] + 1,  # right after a commit marker
        1: markers[1][9],  # on a commit marker: right after the transaction's last record
        2: aborted[2][3],  # in the middle of an aborted transaction
        3: ends[3],  # caught up, past the last commit marker
    }
    consumed = consume_and_commit(east, topic, "tr-tx-group", stops, "read_committed")

    result = translate(topology, "tr-tx-group", "east", "west")
    rows = translated(result, f"east.{topic}")
    assert sorted(rows) == [0, 1, 2, 3] and result["exact"]
    for p, row in rows.items():
        # west holds the committed records only, contiguous from offset 0
        expected = sum(1 for o, _v in everything[p] if o < stops[p])
        assert (row["exact"], row["target_offset"], row["source_offset"]) == (
            True,
            expected,
            stops[p],
        ), row
        assert row["not_replicated"] == 0
    assert rows[3]["target_lag"] == 0

    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(west, f"east.{topic}", "tr-tx-group", starts, "read_committed")
    check_moved_exactly(everything, consumed, after)
    assert not [v for values in after.values() for v in values if v.startswith(b"aborted")]


# -- failback (upstream) and both directions ------------------------------------------------------


def test_failback_of_a_group_that_read_the_copies(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    deleted = {0: 200, 1: 0, 2: 450}
    topology = replicated_topic(east, west, tmp_path, "tr-back", 3000, "back-", deleted)

    # The group ran on west (after a failover) and read part of the copies.
    copies = {0: 1000 - 200, 1: 1000, 2: 1000 - 450}
    stops = {0: 300, 1: copies[1], 2: 1}
    consumed = consume_and_commit(west, "east.tr-back", "tr-back-group", stops, "read_committed")

    result = translate(topology, "tr-back-group", "west", "east")
    rows = translated(result, "tr-back")
    assert sorted(rows) == [0, 1, 2] and result["exact"]
    for p, row in rows.items():
        assert (row["direction"], row["source_topic"], row["flow"]) == (
            "upstream",
            "east.tr-back",
            "east->west",
        )
        assert (row["exact"], row["target_offset"]) == (True, stops[p] + deleted[p])
        assert row["target_lag"] == copies[p] - stops[p]

    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(east, "tr-back", "tr-back-group", starts, "read_committed")
    check_moved_exactly(by_partition(east, "tr-back"), consumed, after)


def test_active_active_group_reading_local_and_remote_topics(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "tr-aa-orders", 2)
    create(west, "tr-aa-local", 2)
    produce(east, "tr-aa-orders", sequence_records(1000, 2, tag="orders-"))
    produce(west, "tr-aa-local", sequence_records(1000, 2, tag="local-"))
    delete_before(east, "tr-aa-orders", {0: 40, 1: 7})
    delete_before(west, "tr-aa-local", {0: 3, 1: 90})
    include = {"include": [r"(.*\.)?tr-aa-.*"]}
    topology = write_topology(
        tmp_path / "tr.yaml",
        "tr",
        {"east": east, "west": west},
        [
            {"source": "east", "target": "west", "topics": include},
            {"source": "west", "target": "east", "topics": include},
        ],
    )
    replicate(
        topology,
        ["east->west", "west->east"],
        tmp_path,
        {"east": east, "west": west},
        ["east->west:tr-aa-orders:2", "west->east:tr-aa-local:2"],
    )

    # A group on west reads its local topic and the copy of east's.
    remote_stops = {0: 100, 1: 333}
    local_stops = {0: 3 + 250, 1: 90 + 10}
    group = "tr-aa-group"
    consumed_remote = consume_and_commit(
        west, "east.tr-aa-orders", group, remote_stops, "read_committed"
    )
    consumed_local = consume_and_commit(west, "tr-aa-local", group, local_stops, "read_committed")

    result = translate(topology, group, "west", "east")
    assert result["exact"]
    upstream = translated(result, "tr-aa-orders")
    downstream = translated(result, "west.tr-aa-local")
    assert {r["direction"] for r in upstream.values()} == {"upstream"}
    assert {r["direction"] for r in downstream.values()} == {"downstream"}
    assert {p: r["target_offset"] for p, r in upstream.items()} == {0: 140, 1: 340}
    assert {p: r["target_offset"] for p, r in downstream.items()} == {0: 250, 1: 10}

    after_remote = read_from(
        east, "tr-aa-orders", group, {p: r["target_offset"] for p, r in upstream.items()},
        "read_committed",
    )  # fmt: skip
    after_local = read_from(
        east, "west.tr-aa-local", group, {p: r["target_offset"] for p, r in downstream.items()},
        "read_committed",
    )  # fmt: skip
    check_moved_exactly(by_partition(east, "tr-aa-orders"), consumed_remote, after_remote)
    check_moved_exactly(by_partition(west, "tr-aa-local"), consumed_local, after_local)


def test_unknown_group_and_cluster_are_refused(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topology = write_topology(
        tmp_path / "tr.yaml",
        "tr",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["tr-.*"]}}],
    )
    for args, message in (
        (["--group", "tr-nobody", "--from", "east", "--to", "west"],
         "consumer group 'tr-nobody' has no committed offsets on cluster 'east'"),
        (["--group", "tr-nobody", "--from", "east", "--to", "north"],
         "has no cluster 'north'"),
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "translate", "-t", str(topology), *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("drsvc: error: ") and message in done.stderr, done.stderr
        assert done.stdout == ""


# -- compacted topics -----------------------------------------------------------------------------


def test_failover_on_a_compacted_topic_with_tombstones(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "tr-compact"
    compacted_history(east, topic)
    topology = write_topology(
        tmp_path / "tr.yaml",
        "tr",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": [f"^{topic}$"]}}],
    )
    replicate(topology, ["east->west"], tmp_path, {"east": east}, [f"east->west:{topic}:2"])
    everything = read_keyed(east, topic, {0: 0, 1: 0})
    stops = hole_and_tombstone(everything)
    commit_at(east, topic, "tr-compact-group", stops)

    result = translate(topology, "tr-compact-group", "east", "west")
    rows = translated(result, f"east.{topic}")
    assert sorted(rows) == [0, 1] and result["exact"], result
    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_keyed(west, f"east.{topic}", starts)
    for p in (0, 1):
        expected = [(k, v) for o, k, v in everything[p] if o >= stops[p]]
        got = [(k, v) for _o, k, v in after[p]]
        assert got == expected, f"partition {p}: {len(got)} read on west, {len(expected)} wanted"
