"""The offset-sync record: model invariants, the builder, and the versioned binary format."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.offset_syncs import (
    KEY_MAGIC,
    MAX_GAP,
    MAX_SEGMENTS_PER_SYNC,
    VALUE_MAGIC,
    VALUE_VERSION,
    OffsetSync,
    Segment,
    SyncBuilder,
    SyncFormatError,
    TopicPartition,
    decode_key,
    decode_sync,
    decode_value,
    encode_key,
    encode_sync,
    encode_value,
)

TP = TopicPartition("orders", 3)
SOURCE_ID = bytes(range(16))
TARGET_ID = bytes(range(16, 32))


def make_sync(begin: int, end: int, *segments: tuple[int, int, int], epoch: int = 7) -> OffsetSync:
    return OffsetSync(
        TP.topic,
        TP.partition,
        SOURCE_ID,
        TARGET_ID,
        epoch,
        begin,
        end,
        tuple(Segment(*segment) for segment in segments),
    )


def builder(begin: int = 0) -> SyncBuilder:
    return SyncBuilder(
        TP, source_topic_id=SOURCE_ID, target_topic_id=TARGET_ID, source_begin=begin, leader_epoch=7
    )


# -- the model ----------------------------------------------------------------------------------


def test_a_contiguous_batch_is_one_segment_of_a_few_dozen_bytes() -> None:
    run = builder(1000)
    run.add_all((1000 + i, 500 + i) for i in range(10_000))
    (sync,) = run.build(11_000)

    assert sync.segments == (Segment(1000, 500, 10_000),)
    assert len(encode_value(sync)) == 78
    assert sync.record_count == 10_000


def test_a_new_segment_starts_whenever_either_side_jumps() -> None:
    run = builder(10)
    # source: 10-11 compacted, 14 aborted; target: 103 is a transaction marker
    run.add_all([(12, 100), (13, 101), (15, 102), (16, 104), (17, 105)])

    (sync,) = run.build(20)

    assert sync.segments == (Segment(12, 100, 2), Segment(15, 102, 1), Segment(16, 104, 2))
    assert (sync.source_begin, sync.source_end) == (10, 20)
    assert list(sync.copies()) == [(12, 100), (13, 101), (15, 102), (16, 104), (17, 105)]


def test_a_run_without_copies_still_yields_a_sync() -> None:
    (sync,) = builder(40).build(42)  # the worker read past two transaction markers

    assert sync.segments == ()
    assert decode_sync(*encode_sync(sync)) == sync


def test_the_builder_refuses_copies_out_of_order() -> None:
    run = builder(0)
    run.add(5, 50)
    with pytest.raises(ValueError, match="not after the previous copy"):
        run.add(4, 51)
    with pytest.raises(ValueError, match="not after the previous copy"):
        run.add(6, 50)
    with pytest.raises(ValueError, match="before the last copy"):
        run.build(5)


def test_the_builder_splits_a_jump_wider_than_the_format_into_contiguous_syncs() -> None:
    far = 10 + MAX_GAP + 5
    run = builder(0)
    run.add_all([(3, 0), (far, 1), (far + 1, 2 + MAX_GAP + 1)])

    syncs = run.build(far + 9)

    assert [(s.source_begin, s.source_end) for s in syncs] == [
        (0, far),
        (far, far + 1),
        (far + 1, far + 9),
    ]
    copies = [copy for sync in syncs for copy in sync.copies()]
    assert copies == [(3, 0), (far, 1), (far + 1, 2 + MAX_GAP + 1)]
    for sync in syncs:
        assert decode_sync(*encode_sync(sync)) == sync


def test_the_builder_splits_a_run_with_too_many_segments() -> None:
    run = builder(0)
    count = MAX_SEGMENTS_PER_SYNC + 3
    run.add_all((2 * i, i) for i in range(count))  # every other source offset: one segment each

    syncs = run.build(2 * count)

    assert [len(s.segments) for s in syncs] == [MAX_SEGMENTS_PER_SYNC, 3]
    assert syncs[0].source_end == syncs[1].source_begin == 2 * MAX_SEGMENTS_PER_SYNC
    assert syncs[1].source_end == 2 * count


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"topic": ""}, "topic is empty"),
        ({"partition": -1}, "partition -1"),
        ({"source_topic_id": b"short"}, "source_topic_id must be 16 bytes"),
        ({"target_topic_id": bytes(17)}, "target_topic_id must be 16 bytes"),
        ({"leader_epoch": -2}, "leader epoch"),
        ({"source_begin": 9, "source_end": 8}, "not a valid range"),
        ({"segments": (Segment(0, 0, 0),)}, "count 0"),
        ({"segments": (Segment(0, 5, 2), Segment(1, 9, 1))}, "overlaps"),
        ({"segments": (Segment(0, 5, 2), Segment(4, 6, 1))}, "overlaps"),
        ({"segments": (Segment(0, 5, 2), Segment(4, 8 + MAX_GAP, 1))}, "split the run"),
        ({"segments": (Segment(8, 5, 3),)}, "past source_end"),
        ({"source_begin": 3, "segments": (Segment(2, 5, 1),)}, "precedes"),
    ],
)
def test_an_invalid_sync_cannot_be_built(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "topic": "t",
        "partition": 0,
        "source_topic_id": SOURCE_ID,
        "target_topic_id": TARGET_ID,
        "leader_epoch": 0,
        "source_begin": 0,
        "source_end": 10,
        "segments": (),
    }
    fields.update(kwargs)
    with pytest.raises(SyncFormatError, match=message):
        OffsetSync(**fields)  # type: ignore[arg-type]


# -- the binary format --------------------------------------------------------------------------


@st.composite
def syncs(draw: st.DrawFn) -> OffsetSync:
    begin = draw(st.integers(0, 2**40))
    target = draw(st.integers(0, 2**40))
    run = SyncBuilder(
        TopicPartition(draw(st.text(min_size=1, max_size=20)), draw(st.integers(0, 2**31 - 1))),
        source_topic_id=draw(st.binary(min_size=16, max_size=16)),
        target_topic_id=draw(st.binary(min_size=16, max_size=16)),
        source_begin=begin,
        leader_epoch=draw(st.integers(-1, 2**31 - 1)),
    )
    source = begin
    for source_gap, target_gap in draw(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=40)
    ):
        source += source_gap
        target += target_gap
        run.add(source, target)
        source += 1
        target += 1
    (sync,) = run.build(source + draw(st.integers(0, 3)))
    return sync


@given(syncs())
def test_encode_then_decode_is_the_identity(sync: OffsetSync) -> None:
    key, value = encode_sync(sync)

    assert decode_sync(key, value) == sync
    assert decode_key(key) == sync.tp
    assert len(value) == 66 + 12 * len(sync.segments)


@given(syncs(), st.data())
def test_every_truncation_of_a_value_is_rejected(sync: OffsetSync, data: st.DataObject) -> None:
    value = encode_value(sync)
    cut = data.draw(st.integers(0, len(value) - 1))

    with pytest.raises(SyncFormatError, match="truncated"):
        decode_value(sync.topic, sync.partition, value[:cut])


def test_trailing_bytes_are_rejected() -> None:
    value = encode_value(make_sync(0, 5, (0, 0, 5)))
    with pytest.raises(SyncFormatError, match="trailing bytes"):
        decode_value("t", 0, value + b"\0")


def test_an_unknown_value_version_is_rejected_with_a_clear_message() -> None:
    value = bytearray(encode_value(make_sync(0, 5, (0, 0, 5))))
    value[1] = VALUE_VERSION + 1
    with pytest.raises(
        SyncFormatError, match=r"unsupported offset-sync value version 2 .*reads version 1"
    ):
        decode_value("t", 0, bytes(value))


def test_foreign_bytes_are_not_mistaken_for_a_sync() -> None:
    with pytest.raises(SyncFormatError, match="not an offset-sync value: magic byte 0x7b"):
        decode_value("t", 0, b'{"offset": 5}')
    with pytest.raises(SyncFormatError, match="not an offset-sync key"):
        decode_key(b'{"topic": "t"}')


def test_a_decoded_value_must_hold_the_sync_invariants() -> None:
    # Gaps are unsigned, so overlapping segments cannot be expressed; copies past the end of the
    # run and a target base without segments can, and must be refused.
    head = struct.pack(
        ">BBi16s16sqqqI", VALUE_MAGIC, VALUE_VERSION, 0, SOURCE_ID, TARGET_ID, 10, 12, 0, 1
    )
    with pytest.raises(SyncFormatError, match="past source_end"):
        decode_value("t", 0, head + struct.pack(">III", 0, 0, 5))
    empty_with_base = struct.pack(
        ">BBi16s16sqqqI", VALUE_MAGIC, VALUE_VERSION, 0, SOURCE_ID, TARGET_ID, 10, 12, 4, 0
    )
    with pytest.raises(SyncFormatError, match="without segments has target base 4"):
        decode_value("t", 0, empty_with_base)


def test_the_value_layout_is_the_documented_one() -> None:
    sync = make_sync(10, 20, (12, 100, 2), (15, 102, 1), epoch=3)

    value = encode_value(sync)

    assert value[:2] == bytes([0xD5, 1])
    assert struct.unpack_from(">i16s16sqqqI", value, 2) == (3, SOURCE_ID, TARGET_ID, 10, 20, 100, 2)
    assert struct.unpack_from(">6I", value, 66) == (2, 0, 2, 1, 0, 1)


@given(st.text(min_size=1, max_size=249), st.integers(0, 2**31 - 1))
def test_key_round_trip(topic: str, partition: int) -> None:
    key = encode_key(topic, partition)

    assert key[0] == KEY_MAGIC
    assert decode_key(key) == (topic, partition)


def test_the_key_is_the_same_for_every_sync_of_a_partition() -> None:
    first = encode_sync(make_sync(0, 5, (0, 0, 5)))[0]
    later = encode_sync(make_sync(5, 9, (5, 7, 4)))[0]
    assert first == later == encode_key("orders", 3)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (b"", "truncated offset-sync key"),
        (bytes([KEY_MAGIC, 2, 0, 1]) + b"t" + bytes(4), "unsupported offset-sync key version 2"),
        (bytes([KEY_MAGIC, 1, 0, 5]) + b"t" + bytes(4), "expected 13"),
        (bytes([KEY_MAGIC, 1, 0, 1]) + b"\xff" + bytes(4), "not UTF-8"),
        (bytes([KEY_MAGIC, 1, 0, 1]) + b"t" + b"\xff\xff\xff\xff", "invalid partition"),
    ],
)
def test_bad_keys_are_rejected(key: bytes, message: str) -> None:
    with pytest.raises(SyncFormatError, match=message):
        decode_key(key)


def test_keys_that_cannot_be_encoded_are_refused() -> None:
    with pytest.raises(SyncFormatError, match="topic name"):
        encode_key("", 0)
    with pytest.raises(SyncFormatError, match="partition"):
        encode_key("t", -1)


def test_the_documented_worked_example() -> None:
    run = SyncBuilder(
        TopicPartition("orders", 3),
        source_topic_id=bytes.fromhex("5f1c0a2e9d3b4c7e8a6f1b2c3d4e5f60"),
        target_topic_id=bytes.fromhex("a1b2c3d4e5f60718293a4b5c6d7e8f90"),
        source_begin=1000,
        leader_epoch=7,
    )
    run.add_all([(1000, 5000), (1001, 5001), (1002, 5002), (1005, 5003), (1006, 5004)])
    run.add(1007, 5006)

    (sync,) = run.build(1009)
    key, value = encode_sync(sync)

    assert key.hex() == "d60100066f726465727300000003"
    assert value.hex() == (
        "d501" "00000007" "5f1c0a2e9d3b4c7e8a6f1b2c3d4e5f60" "a1b2c3d4e5f60718293a4b5c6d7e8f90"
        "00000000000003e8" "00000000000003f1" "0000000000001388" "00000003"
        "000000000000000000000003" "000000020000000000000002" "000000000000000100000001"
    )  # fmt: skip
