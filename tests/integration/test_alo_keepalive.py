"""At-least-once keepalive syncs on real brokers: a partition idle for longer than the sync topic's
retention keeps translating exactly, across a restart of the worker.

The target is a cluster of its own whose brokers check retention every second and roll segments
every two seconds, and the worker creates the sync topic with a 20 s retention: the syncs written
when the idle partition was copied are really deleted (the sync topic's log start moves past
them), and only the keepalives that repeat its last copy are left to translate it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from replication_support import (
    Record,
    WorkerProcess,
    create,
    end_offsets,
    produce,
    read_all,
    sequence_records,
    wait_for,
    watermarks,
    write_topology,
)
from translation_support import (
    caught_up,
    consume_and_commit,
    read_from,
    translate,
    translated,
)

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from failover import offset_syncs

TARGET = "alokeep"
FLOW = f"east->{TARGET}"
SYNC_TOPIC = "drsvc.offset-syncs.east"
SYNC_RETENTION_MS = 20_000
KEEPALIVE_S = 4
SHORT = {
    # Retention acts within a second of a segment's expiry (default: every five minutes), and
    # segments roll every two seconds, so expired syncs do not wait in the active segment.
    "log.retention.check.interval.ms": "1000",
    "log.roll.ms": "2000",
}
WORKER_ARGS = (
    "--sync-retention-ms",
    str(SYNC_RETENTION_MS),
    "--sync-keepalive-s",
    str(KEEPALIVE_S),
)


@pytest.fixture(scope="module")
def short_retention(local_env: LocalEnvironment, cluster_pair: EnvironmentInfo) -> EnvironmentInfo:
    """``east`` (from the shared pair) and a target whose retention acts at once."""
    return local_env.up(["east", TARGET], broker_overrides={TARGET: SHORT})


def _syncs(bootstrap: str) -> list[tuple[int, offset_syncs.OffsetSync]]:
    """(sync-topic offset, sync) of every retained sync."""
    records: list[Record] = read_all(bootstrap, SYNC_TOPIC)
    out = []
    for record in records:
        assert record.key is not None and record.value is not None
        out.append((record.offset, offset_syncs.decode_sync(record.key, record.value)))
    return out


def _is_keepalive(sync: offset_syncs.OffsetSync, last_copy: tuple[int, int], end: int) -> bool:
    source, target = last_copy
    return (sync.source_begin, sync.source_end) == (source, end) and sync.segments == (
        offset_syncs.Segment(source, target, 1),
    )


def test_an_idle_partition_translates_exactly_after_its_syncs_expired(  # noqa: PLR0915 (one scenario)
    short_retention: EnvironmentInfo, tmp_path: Path
) -> None:
    started = time.monotonic()
    east, target = short_retention.clusters["east"], short_retention.clusters[TARGET]
    topic, remote = "alo-keep", "east.alo-keep"
    create(east, topic, 2)
    produce(east, topic, sequence_records(300, 2, tag="keep-"))
    topology = write_topology(
        tmp_path / "keep.yaml",
        "keep",
        {"east": east, TARGET: target},
        [{"source": "east", "target": TARGET, "topics": {"include": [f"^{topic}$"]}}],
    )
    idle_end = end_offsets(east, topic)[1]
    assert idle_end == 150
    # No transaction markers anywhere: the idle partition's copies are at the same offsets.
    last_copy = (idle_end - 1, idle_end - 1)

    stop_busy = threading.Event()

    def keep_partition_0_busy() -> None:
        seq = 10_000
        while not stop_busy.wait(2.0):
            produce(east, topic, [(0, None, f"busy-{seq}".encode(), [], int(time.time() * 1000))])
            seq += 1

    worker = WorkerProcess(topology, FLOW, tmp_path / "keep-1.log", *WORKER_ARGS)
    busy = threading.Thread(target=keep_partition_0_busy, daemon=True)
    try:
        wait_for(lambda: caught_up(east, FLOW, topic, 2), 60, "the first copies and their syncs")
        originals = [
            (offset, sync)
            for offset, sync in _syncs(target)
            if (sync.topic, sync.partition) == (topic, 1) and sync.segments
        ]
        assert originals, "no sync of the idle partition was written"
        copied = {source for _o, s in originals for source, _target in s.copies()}
        assert copied == set(range(idle_end))
        last_original = max(offset for offset, _sync in originals)
        busy.start()
        # The idle partition's own syncs expire: the sync topic's log start moves past them.
        wait_for(
            lambda: watermarks(target, SYNC_TOPIC)[0][0] > last_original,
            SYNC_RETENTION_MS / 1000 + 30,
            "retention to delete the idle partition's syncs",
        )
        left = [s for _o, s in _syncs(target) if (s.topic, s.partition) == (topic, 1)]
        assert left, "nothing of the idle partition is left in the sync topic"
        assert all(_is_keepalive(s, last_copy, idle_end) for s in left), left[:3]
    finally:
        stop_busy.set()
        if busy.is_alive():
            busy.join(10)
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()

    # A restarted worker learns the idle partition's last copy from the sync topic's tail and
    # keeps writing its keepalives (it copies nothing there that would tell it otherwise).
    restart_end = watermarks(target, SYNC_TOPIC)[0][1]
    worker = WorkerProcess(topology, FLOW, tmp_path / "keep-2.log", *WORKER_ARGS)
    try:
        wait_for(
            lambda: any(
                offset >= restart_end
                and (s.topic, s.partition) == (topic, 1)
                and _is_keepalive(s, last_copy, idle_end)
                for offset, s in _syncs(target)
            ),
            30,
            "a keepalive of the idle partition from the restarted worker",
        )
        wait_for(lambda: caught_up(east, FLOW, topic, 2), 30, "partition 0's copies")
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()

    # A group that consumed both partitions to their ends moves to the target exactly, and a
    # consumer there reads nothing: there is nothing it had not read.
    ends = end_offsets(east, topic)
    group = "alo-keep-group"
    consumed = consume_and_commit(east, topic, group, ends, "read_committed")
    assert len(consumed[1]) == idle_end
    result = translate(topology, group, "east", TARGET)
    rows = translated(result, remote)
    assert sorted(rows) == [0, 1], result
    assert result["exact"], [(p, r["reason"], r["pending"]) for p, r in rows.items()]
    remote_ends = end_offsets(target, remote)
    assert {p: row["target_offset"] for p, row in rows.items()} == remote_ends
    after = read_from(target, remote, f"{group}-{TARGET}", remote_ends, "read_committed")
    assert after == {0: [], 1: []}
    assert time.monotonic() - started < 150
