"""Reading a checkpoints topic back: the newest checkpoint per key, tombstones, foreign records."""

from __future__ import annotations

import pytest

from drsvc.errors import PermanentError
from drsvc.runtime.checkpoints.checkpoint_topic import CheckpointsRead, checkpoint_as_dict
from failover.checkpoints import (
    VALUE_MAGIC,
    VALUE_VERSION,
    Checkpoint,
    CheckpointKey,
    encode_key,
    encode_value,
)

KEY = CheckpointKey("g", "east.orders", 0)


def test_the_newest_checkpoint_of_a_key_wins_and_a_tombstone_deletes_it() -> None:
    read = CheckpointsRead(cluster="west", topic="east.checkpoints.internal")
    read.add_record(0, 0, encode_key(KEY), encode_value(Checkpoint("orders", 5, 5, "exact")))
    read.add_record(0, 1, encode_key(KEY), encode_value(Checkpoint("orders", 9, 9, "exact")))
    assert read.checkpoints[KEY].source_offset == 9
    assert checkpoint_as_dict(KEY, read.checkpoints[KEY])["target_offset"] == 9
    read.add_record(0, 2, encode_key(KEY), None)
    assert read.checkpoints == {}
    assert read.records == 3


def test_a_record_of_an_unknown_version_stops_the_read_naming_it() -> None:
    read = CheckpointsRead(cluster="west", topic="east.checkpoints.internal")
    newer = (
        bytes([VALUE_MAGIC, VALUE_VERSION + 1])
        + encode_value(Checkpoint("orders", 5, 5, "exact"))[2:]
    )
    with pytest.raises(PermanentError, match=r"record 7 of east.checkpoints.internal-0 on west"):
        read.add_record(0, 7, encode_key(KEY), newer)
    with pytest.raises(PermanentError, match="has no key"):
        read.add_record(0, 8, None, b"x")
