"""Translation while an at-least-once re-copy pass is behind: nothing on the target is skipped.

The worker copies a whole topic, dies before committing any progress, and the next worker copies
it again from the start, slowly (throttled). Until that second pass catches up, the records past
its frontier are on the target only in the first pass, *before* the second pass's copies. A group
on the source positioned beyond the second pass's frontier must translate to where nothing on the
target is skipped (in the first pass), flagged ``recopy-behind`` with the re-reads counted, and a
failover at that moment must not count those records as lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from replication_support import (
    WorkerProcess,
    create,
    end_offsets,
    produce,
    wait_for,
    write_topology,
)
from translation_support import (
    by_partition,
    consume_and_commit,
    read_from,
    translate,
    translated,
)

from drsvc.devenv.environment import EnvironmentInfo

pytestmark = pytest.mark.timeout(240)

RECORDS = 20_000
GROUP_AT = 15_000


def test_a_group_ahead_of_a_recopy_pass_translates_where_nothing_is_skipped(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "recopy-behind"
    create(east, topic, 1)
    produce(east, topic, [(0, f"k{i}".encode(), f"{i}".encode(), [], 0) for i in range(RECORDS)])
    topology = write_topology(
        tmp_path / "recopy.yaml",
        "recopy",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": [f"^{topic}$"]}}],
    )
    consumed = consume_and_commit(east, topic, "recopy-group", {0: GROUP_AT}, "read_committed")

    # Pass 1: everything is copied (and its syncs written), but no progress is ever committed.
    first = WorkerProcess(
        topology, "east->west", tmp_path / "worker-1.log", "--commit-interval-s", "3600"
    )
    try:
        wait_for(
            lambda: (
                end_offsets(west, f"east.{topic}").get(0, 0) >= RECORDS
                and translate(topology, "recopy-group", "east", "west")["exact"]
            ),
            90,
            "the first pass to copy everything",
        )
    finally:
        first.kill()

    # Pass 2 starts over from the source's start, throttled to a crawl.
    second = WorkerProcess(
        topology, "east->west", tmp_path / "worker-2.log", "--throttle-bytes-per-s", "2000"
    )
    try:
        answer: dict[str, object] = {}

        def recopy_started() -> bool:
            rows = translated(translate(topology, "recopy-group", "east", "west"), f"east.{topic}")
            answer.update(rows[0])
            return rows[0]["reason"] == "recopy-behind"

        wait_for(recopy_started, 60, "the re-copy pass to write its first syncs")
    finally:
        second.kill()  # replication stops here, as if the source site were lost now

    # The group's next record, 15000, is on west only in the first pass, at offset 15000.
    assert answer["target_offset"] == GROUP_AT
    assert answer["exact"] is False
    assert (answer["would_lose"], answer["not_replicated"]) == (0, 0)
    pending = answer["pending"]
    assert isinstance(pending, int) and 0 < pending < GROUP_AT
    assert answer["would_reread"] == pending

    after = read_from(west, f"east.{topic}", "recopy-west", {0: GROUP_AT}, "read_committed")[0]
    everything = [value for _offset, value in by_partition(east, topic)[0]]
    unread = everything[GROUP_AT:]
    assert consumed[0] == everything[:GROUP_AT]
    # Nothing unread is skipped: the rest of the first pass comes first, in order ...
    assert after[: len(unread)] == unread
    # ... then the second pass's copies, all of records the group had consumed: re-reads, at
    # least as many as were counted when it translated (the pass went on until it was killed).
    rereads = after[len(unread) :]
    assert set(rereads) <= set(consumed[0])
    assert len(rereads) >= pending
    assert rereads == everything[: len(rereads)]
