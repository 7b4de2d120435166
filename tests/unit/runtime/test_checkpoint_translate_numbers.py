"""``drsvc translate`` reports what a failover right now would lose and re-read, with an as-of time
(the same numbers the checkpoint stream exports)."""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from rich.console import Console

from drsvc.cli.translate import render
from drsvc.runtime.translation.cluster_view import CommittedOffset
from drsvc.runtime.translation.group_translation import translate_group
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from drsvc.topology import load_topology_text
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

TOPOLOGY = """
name: one-way
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""
EAST_ORDERS, WEST_COPY = b"E" * 16, b"W" * 16


@dataclass
class View:
    alias: str
    commits: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    ids: dict[str, bytes] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    syncs: list[OffsetSync] = field(default_factory=list)

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self.commits)

    def topic_ids(self, topics: Collection[str]) -> dict[str, bytes]:
        return {t: self.ids[t] for t in topics if t in self.ids}

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def read_syncs(self, sync_topic: str, topics: Collection[str]) -> SyncTopicRead:
        read = SyncTopicRead(cluster=self.alias, topic=sync_topic)
        for offset, sync in enumerate(self.syncs):
            read.add_record(0, offset, *encode_sync(sync), topics)
        return read


def test_translate_reports_would_lose_and_would_reread_as_of_the_end_offsets() -> None:
    # orders-0 and -1 on east: 0..149 copied to west (0..149), the logs end at 200.
    east = View("east", ids={"orders": EAST_ORDERS})
    west = View("west", ids={"east.orders": WEST_COPY})
    for p in (0, 1):
        west.syncs.append(
            OffsetSync("orders", p, EAST_ORDERS, WEST_COPY, 0, 0, 150, (Segment(0, 0, 150),))
        )
        east.ends[TopicPartition("orders", p)] = 200
    east.commits = {
        TopicPartition("orders", 0): CommittedOffset(100),  # behind replication
        TopicPartition("orders", 1): CommittedOffset(180),  # ahead of it
    }
    before = int(time.time() * 1000)
    result = translate_group(
        load_topology_text(TOPOLOGY), "g", "east", "west", {"east": east, "west": west}
    )
    rows = {p.partition: p for p in result.partitions}
    assert (rows[0].would_lose, rows[0].would_reread) == (50, 0)
    assert (rows[1].would_lose, rows[1].would_reread) == (20, 30)
    assert result.as_of_ms is not None and before <= result.as_of_ms <= time.time() * 1000
    document = json.loads(json.dumps(result.as_dict()))
    assert document["as_of"].endswith("Z") and document["as_of_ms"] == result.as_of_ms
    assert [(p["would_lose"], p["would_reread"]) for p in document["partitions"]] == [
        (50, 0),
        (20, 30),
    ]
    console = Console(width=250, record=True)
    render(result, console)
    text = console.export_text()
    assert "WOULD-LOSE" in text and "WOULD-REREAD" in text and "as of" in text
