"""Taking over from MirrorMaker 2: its records decoded, and where drsvc continues (pure)."""

from __future__ import annotations

import json
import struct

import pytest

from failover.errors import FormatError
from failover.migration_mm2 import (
    Mm2Progress,
    PartitionCopy,
    decode_progress,
    decode_sync,
    latest_progress,
    mm2_offset_syncs_topic,
    mm2_offsets_topic,
    mm2_worker_group,
    naming_refusals,
    takeover_start,
)


def _key(topic: str, partition: int, cluster: str = "east") -> bytes:
    source = {"cluster": cluster, "partition": partition, "topic": topic}
    return json.dumps(["MirrorSourceConnector", source]).encode()


def test_names() -> None:
    assert mm2_offsets_topic("east") == "mm2-offsets.east.internal"
    assert mm2_offset_syncs_topic("west") == "mm2-offset-syncs.west.internal"
    assert mm2_worker_group("east") == "east-mm2"


def test_progress_records_decode_and_the_latest_wins() -> None:
    found = decode_progress(_key("t", 2), b'{"offset": 41}')
    assert found == (Mm2Progress("MirrorSourceConnector", "east", "t", 2), 41)
    assert decode_progress(_key("t", 2), None) == (found[0], None) if found else False
    assert decode_progress(None, b"{}") is None
    assert decode_progress(b'["other", {"x": 1}]', b"{}") is None
    with pytest.raises(FormatError):
        decode_progress(b"not json", b"{}")
    with pytest.raises(FormatError):
        decode_progress(_key("t", 0), b'{"position": 3}')
    records = {
        Mm2Progress("MirrorSourceConnector", "east", "t", 0): 9,
        Mm2Progress("MirrorSourceConnector", "east", "t", 1): None,  # reset
        Mm2Progress("MirrorSourceConnector", "south", "t", 0): 4,
        Mm2Progress("OtherConnector", "east", "t", 0): 1,
    }
    assert latest_progress(records, "east") == {("t", 0): 9}


def test_offset_syncs_decode() -> None:
    key = struct.pack(">h", 3) + b"abc" + struct.pack(">i", 7)
    sync = decode_sync(key, struct.pack(">qq", 100, 90))
    assert (sync.topic, sync.partition, sync.upstream, sync.downstream) == ("abc", 7, 100, 90)
    with pytest.raises(FormatError):
        decode_sync(b"\x00", b"")


def _copy(committed: int | None, sync: tuple[int, int] | None, end: int) -> PartitionCopy:
    return PartitionCopy("t", 0, committed, sync, 0, end)


@pytest.mark.parametrize(
    ("copy", "copied_last", "start", "refused", "says"),
    [
        # a clean stop: the committed record is the last copy
        (_copy(49, (40, 40), 50), {49}, 50, False, "committed progress"),
        # killed past its last commit: the sync counted to the end places it
        (_copy(45, (40, 40), 50), {49}, 50, False, "copied past its last commit"),
        # a gap in the source (a transaction marker): the committed offset still places it
        (_copy(50, (40, 40), 50), {50}, 51, False, "committed progress"),
        (_copy(None, None, 0), set(), None, False, "copied nothing"),
        (_copy(None, None, 5), set(), None, True, "committed no progress"),
        (_copy(10, (5, 5), 0), set(), None, True, "empty"),
        (_copy(49, (40, 40), 50), set(), None, True, "does not say where its copy ends"),
    ],
)
def test_takeover_start(
    copy: PartitionCopy, copied_last: set[int], start: int | None, refused: bool, says: str
) -> None:
    asked: list[int] = []

    def matches(offset: int) -> bool:
        asked.append(offset)
        return offset in copied_last

    decision = takeover_start(copy, matches)
    assert (decision.start, decision.refused) == (start, refused)
    assert says in decision.reason, decision.reason
    assert len(asked) == len(set(asked))  # no candidate read twice


def test_prefixed_copies_are_refused_by_name() -> None:
    found = naming_refusals(["orders", "payments"], ["east.orders", "payments"], "east")
    assert len(found) == 1 and "east.orders" in found[0] and "IdentityReplicationPolicy" in found[0]
