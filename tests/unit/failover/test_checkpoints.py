"""Checkpoints: the versioned record format (golden bytes of versions 1 and 2), the monotonicity
rule, and what a failover right now would lose and re-read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.checkpoints import (
    DOWNSTREAM,
    KEY_MAGIC,
    UPSTREAM,
    VALUE_MAGIC,
    VALUE_VERSION,
    Checkpoint,
    CheckpointFormatError,
    CheckpointKey,
    Exposure,
    decide,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    exposure,
)
from failover.translation import Reason

KEY = CheckpointKey("orders-app", "east.orders", 3)
EXACT = Checkpoint(
    source_topic="orders",
    source_offset=1009,
    target_offset=5007,
    reason="exact",
    direction=DOWNSTREAM,
    pending=0,
    metadata="m1",
    time_ms=1_700_000_000_000,
)

# Version 1, byte for byte, as earlier builds wrote it: still read (without topic ids). If one of
# these tests fails, a reader lost version 1.
GOLDEN_KEY = bytes.fromhex(
    "da 01"  # magic, version
    "00 0a 6f 72 64 65 72 73 2d 61 70 70"  # group "orders-app"
    "00 0b 65 61 73 74 2e 6f 72 64 65 72 73"  # topic "east.orders"
    "00 00 00 03"  # partition 3
)
GOLDEN_VALUE = bytes.fromhex(
    "db 01"  # magic, version
    "03"  # flags: target known, exact, downstream
    "00 00 00 00 00 00 03 f1"  # source offset 1009
    "00 00 00 00 00 00 13 8f"  # target offset 5007
    "00 00 00 00 00 00 00 00"  # pending 0
    "00 00 01 8b cf e5 68 00"  # time 1700000000000 ms
    "05 65 78 61 63 74"  # reason "exact"
    "00 06 6f 72 64 65 72 73"  # source topic "orders"
    "00 00 00 02 6d 31"  # metadata "m1"
)
UNKNOWN_UPSTREAM = Checkpoint(
    source_topic="west.payments",
    source_offset=7,
    target_offset=None,
    reason="before-syncs",
    direction=UPSTREAM,
    time_ms=1,
)
GOLDEN_UNKNOWN_UPSTREAM = bytes.fromhex(
    "db 01 04"  # flags: upstream, target unknown
    "00 00 00 00 00 00 00 07"
    "ff ff ff ff ff ff ff ff"  # target unknown: -1
    "00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 01"
    "0c 62 65 66 6f 72 65 2d 73 79 6e 63 73"  # reason "before-syncs"
    "00 0d 77 65 73 74 2e 70 61 79 6d 65 6e 74 73"  # source topic "west.payments"
    "00 00 00 00"  # no metadata
)


# -- format: compatibility of version 1 ---------------------------------------------------------


def test_version_1_key_golden_bytes() -> None:
    assert encode_key(KEY) == GOLDEN_KEY
    assert decode_key(GOLDEN_KEY) == KEY


def test_version_1_values_are_still_read_with_unknown_topic_ids() -> None:
    assert decode_value(GOLDEN_VALUE) == EXACT
    decoded = decode_value(GOLDEN_UNKNOWN_UPSTREAM)
    assert decoded == UNKNOWN_UPSTREAM
    assert not decoded.known and not decoded.exact and decoded.direction == UPSTREAM
    assert (decoded.source_topic_id, decoded.target_topic_id) == (None, None)


# Version 2, byte for byte (docs/checkpoints.md draws the same bytes): version 1 with the topic ids
# of both sides after the time. If one of these tests fails, the format changed: give it a new
# version number and keep reading versions 1 and 2.
ORDERS_ID = bytes.fromhex("0123456789abcdef0123456789abcdef")
COPY_ID = bytes.fromhex("fedcba9876543210fedcba9876543210")
EXACT_V2 = Checkpoint(
    source_topic="orders",
    source_offset=1009,
    target_offset=5007,
    reason="exact",
    direction=DOWNSTREAM,
    pending=0,
    metadata="m1",
    time_ms=1_700_000_000_000,
    source_topic_id=ORDERS_ID,
    target_topic_id=COPY_ID,
)
GOLDEN_VALUE_V2 = bytes.fromhex(
    "db 02"  # magic, version
    "03"  # flags: target known, exact, downstream
    "00 00 00 00 00 00 03 f1"  # source offset 1009
    "00 00 00 00 00 00 13 8f"  # target offset 5007
    "00 00 00 00 00 00 00 00"  # pending 0
    "00 00 01 8b cf e5 68 00"  # time 1700000000000 ms
    "01 23 45 67 89 ab cd ef 01 23 45 67 89 ab cd ef"  # source topic id (orders on east)
    "fe dc ba 98 76 54 32 10 fe dc ba 98 76 54 32 10"  # target topic id (east.orders on west)
    "05 65 78 61 63 74"  # reason "exact"
    "00 06 6f 72 64 65 72 73"  # source topic "orders"
    "00 00 00 02 6d 31"  # metadata "m1"
)
GOLDEN_UNKNOWN_UPSTREAM_V2 = bytes.fromhex(
    "db 02 04"  # flags: upstream, target unknown
    "00 00 00 00 00 00 00 07"
    "ff ff ff ff ff ff ff ff"  # target unknown: -1
    "00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 01"
    "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"  # source topic id unknown
    "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"  # target topic id unknown
    "0c 62 65 66 6f 72 65 2d 73 79 6e 63 73"  # reason "before-syncs"
    "00 0d 77 65 73 74 2e 70 61 79 6d 65 6e 74 73"  # source topic "west.payments"
    "00 00 00 00"  # no metadata
)


def test_version_2_value_golden_bytes() -> None:
    assert VALUE_VERSION == 2
    assert encode_value(EXACT_V2) == GOLDEN_VALUE_V2
    assert decode_value(GOLDEN_VALUE_V2) == EXACT_V2


def test_version_2_unknown_ids_are_all_zero() -> None:
    assert encode_value(UNKNOWN_UPSTREAM) == GOLDEN_UNKNOWN_UPSTREAM_V2
    assert decode_value(GOLDEN_UNKNOWN_UPSTREAM_V2) == UNKNOWN_UPSTREAM


def test_a_version_1_record_written_again_becomes_version_2_with_nothing_lost() -> None:
    # Version 2 is version 1 with two unknown (all-zero) ids after the time, at byte 35.
    as_v2 = bytes([VALUE_MAGIC, 2]) + GOLDEN_VALUE[2:35] + bytes(32) + GOLDEN_VALUE[35:]
    assert encode_value(decode_value(GOLDEN_VALUE)) == as_v2


@pytest.mark.parametrize(
    ("data", "decoder", "message"),
    [
        (
            bytes([KEY_MAGIC, 2]) + GOLDEN_KEY[2:],
            decode_key,
            "unsupported checkpoint key version 2",
        ),
        (
            bytes([VALUE_MAGIC, 3]) + GOLDEN_VALUE_V2[2:],
            decode_value,
            "unsupported checkpoint value version 3 (this build reads versions 1 and 2)",
        ),
        (GOLDEN_VALUE_V2[:60], decode_value, "truncated checkpoint value"),
        (GOLDEN_VALUE_V2 + b"\x00", decode_value, "1 trailing bytes"),
        (b"\xd6\x01" + GOLDEN_KEY[2:], decode_key, "not a checkpoint key: magic byte 0xd6"),
        (GOLDEN_KEY, decode_value, "not a checkpoint value: magic byte 0xda"),
        (GOLDEN_KEY[:-1], decode_key, "truncated checkpoint key"),
        (GOLDEN_VALUE + b"\x00", decode_value, "1 trailing bytes"),
        (GOLDEN_VALUE[:20], decode_value, "truncated checkpoint value"),
        (b"\xda", decode_key, "truncated checkpoint key: 1 bytes"),
        (GOLDEN_VALUE[:2] + b"\x0b" + GOLDEN_VALUE[3:], decode_value, "unknown flags 0x0b"),
        (GOLDEN_VALUE[:2] + b"\x01" + GOLDEN_VALUE[3:], decode_value, "contradicts its reason"),
        (GOLDEN_VALUE[:2] + b"\x00" + GOLDEN_VALUE[3:], decode_value, "says the target offset"),
    ],
)
def test_bytes_that_are_not_a_readable_checkpoint_are_refused_with_a_clear_error(
    data: bytes, decoder: object, message: str
) -> None:
    with pytest.raises(
        CheckpointFormatError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        decoder(data)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("checkpoint", "message"),
    [
        (Checkpoint("orders", -1, 0, "exact"), "source offset -1"),
        (Checkpoint("orders", 1, None, "exact"), "an exact checkpoint needs a target offset"),
        (Checkpoint("", 1, 1, "exact"), "source topic is empty"),
        (Checkpoint("orders", 1, 1, ""), "must be non-empty ASCII"),
        (Checkpoint("orders", 1, 1, "exact", direction="sideways"), "neither downstream"),  # type: ignore[arg-type]
        (Checkpoint("orders", 1, 1, "exact", source_topic_id=b"x"), "source topic id must be 16"),
        (Checkpoint("orders", 1, 1, "exact", target_topic_id=bytes(16)), "target topic id must"),
    ],
)
def test_invalid_checkpoints_are_not_encoded(checkpoint: Checkpoint, message: str) -> None:
    with pytest.raises(CheckpointFormatError, match=message):
        encode_value(checkpoint)


def test_invalid_keys_are_not_encoded() -> None:
    with pytest.raises(CheckpointFormatError, match="group name of 0 bytes"):
        encode_key(CheckpointKey("", "t", 0))
    with pytest.raises(CheckpointFormatError, match="partition -1"):
        encode_key(CheckpointKey("g", "t", -1))


names = st.text(min_size=1, max_size=40)
offsets = st.integers(min_value=0, max_value=(1 << 63) - 1)
reasons = st.sampled_from([r.value for r in Reason] + ["topic-missing", "sync-conflict"])
topic_ids = st.binary(min_size=16, max_size=16).filter(lambda b: b != bytes(16))


@st.composite
def checkpoints(draw: st.DrawFn) -> Checkpoint:
    reason = draw(reasons)
    known = reason == "exact" or draw(st.booleans())
    return Checkpoint(
        source_topic=draw(names),
        source_offset=draw(offsets),
        target_offset=draw(offsets) if known else None,
        reason=reason,
        direction=draw(st.sampled_from([DOWNSTREAM, UPSTREAM])),
        pending=draw(offsets),
        metadata=draw(st.text(max_size=100)),
        time_ms=draw(offsets),
        source_topic_id=draw(st.one_of(st.none(), topic_ids)),
        target_topic_id=draw(st.one_of(st.none(), topic_ids)),
    )


@given(names, names, st.integers(min_value=0, max_value=0x7FFF_FFFF), checkpoints())
def test_every_key_and_value_round_trips(
    group: str, topic: str, partition: int, checkpoint: Checkpoint
) -> None:
    key = CheckpointKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    assert decode_value(encode_value(checkpoint)) == checkpoint


# -- monotonicity ---------------------------------------------------------------------------------


def cp(
    source: int,
    target: int | None,
    reason: str = "exact",
    pending: int = 0,
    ids: tuple[bytes | None, bytes | None] = (None, None),
) -> Checkpoint:
    return Checkpoint(
        "orders", source, target, reason, pending=pending, source_topic_id=ids[0],
        target_topic_id=ids[1],
    )  # fmt: skip


SRC_A, SRC_B = b"a" * 16, b"b" * 16  # two incarnations of orders on the source
TGT_A, TGT_B = b"A" * 16, b"B" * 16  # two incarnations of east.orders on the target
OLD = (SRC_A, TGT_A)


AHEAD = Reason.AHEAD_OF_SYNCS.value
BEFORE = Reason.BEFORE_SYNCS.value
UNKNOWN = Reason.UNKNOWN_PARTITION.value


@pytest.mark.parametrize(
    ("previous", "candidate", "emit", "rewound"),
    [
        (None, cp(10, 20), True, False),  # first of its key
        (None, cp(10, None, UNKNOWN), True, False),  # first, even unknown: say why
        (cp(10, 20), cp(12, 22), True, False),  # forward
        (cp(10, 20), cp(10, 20), False, False),  # unchanged
        (cp(10, 20, AHEAD, 1), cp(10, 21), True, False),  # syncs caught up: forward
        (cp(10, 20, AHEAD, 1), cp(10, 20), True, False),  # same position, now exact
        (cp(10, 20), cp(12, 20), True, False),  # source moved through a gap: refresh
        (cp(10, 20), cp(12, 19), False, False),  # never backwards without a rewind
        (cp(10, 20), cp(12, None, BEFORE), False, False),  # unknown never hides known
        (cp(10, None, UNKNOWN), cp(10, None, BEFORE), True, False),  # unknown, new reason
        (cp(10, None, UNKNOWN), cp(11, None, UNKNOWN), False, False),  # still the same unknown
        (cp(10, None, UNKNOWN), cp(10, 4), True, False),  # translated at last
        (cp(10, 20), cp(5, 15), True, True),  # the group went back: follow it
        (cp(10, 20), cp(5, None, BEFORE), True, True),  # ... even to an unknown position
        # the same incarnations on both sides: as above
        (cp(10, 20, ids=OLD), cp(12, 19, ids=OLD), False, False),
        (cp(10, 20, ids=OLD), cp(12, 22, ids=OLD), True, False),
        (cp(10, 20, ids=OLD), cp(5, 15, ids=OLD), True, True),
        # the remote topic was recreated and is copied again from the start: lower offsets win
        (cp(10, 20, ids=OLD), cp(10, 3, ids=(SRC_A, TGT_B)), True, True),
        (cp(10, 20, ids=OLD), cp(10, 20, ids=(SRC_A, TGT_B)), True, True),
        (cp(10, 20, ids=OLD), cp(10, None, UNKNOWN, ids=(SRC_A, TGT_B)), True, True),
        # the source topic was recreated: its offsets start again, higher or lower
        (cp(10, 20, ids=OLD), cp(2, 25, ids=(SRC_B, TGT_A)), True, True),
        (cp(10, 20, ids=OLD), cp(30, 19, ids=(SRC_B, TGT_A)), True, True),
        # an id unknown on either side: compared by offsets, as before
        (cp(10, 20), cp(10, 3, ids=(SRC_A, TGT_B)), False, False),
        (cp(10, 20, ids=OLD), cp(10, 3, ids=(None, None)), False, False),
        (cp(10, 20, ids=(None, TGT_A)), cp(30, 19, ids=(SRC_B, TGT_A)), False, False),
        # unchanged ids and position: nothing to write
        (cp(10, 20, ids=OLD), cp(10, 20, ids=OLD), False, False),
    ],
)
def test_decide(
    previous: Checkpoint | None, candidate: Checkpoint, emit: bool, rewound: bool
) -> None:
    verdict = decide(previous, candidate)
    assert (verdict.emit, verdict.rewound) == (emit, rewound), verdict.why


def test_a_recreated_topic_is_named_in_the_reason() -> None:
    assert decide(cp(10, 20, ids=OLD), cp(10, 3, ids=(SRC_A, TGT_B))).why == (
        "the target topic was recreated (new topic id)"
    )
    assert decide(cp(10, 20, ids=OLD), cp(10, 3, ids=(SRC_B, TGT_A))).why == (
        "the source topic was recreated (new topic id)"
    )


ids_or_none = st.sampled_from([None, SRC_A, SRC_B])
target_ids_or_none = st.sampled_from([None, TGT_A, TGT_B])


@given(
    st.lists(
        st.tuples(
            st.integers(0, 50),
            st.one_of(st.none(), st.integers(0, 50)),
            ids_or_none,
            target_ids_or_none,
        ),
        max_size=40,
    )
)
def test_a_position_only_goes_back_within_one_incarnation_when_the_group_went_back(
    steps: list[tuple[int, int | None, bytes | None, bytes | None]],
) -> None:
    """Any sequence of candidates, with topic ids that come, go and change: an emitted checkpoint
    that is not flagged rewound never lowers a known target offset; one flagged rewound has a
    lower source offset or another known id on one side; and a candidate with another known id
    on one side is always emitted."""
    newest: Checkpoint | None = None
    for source, target, source_id, target_id in steps:
        candidate = cp(source, target, "exact" if target is not None else UNKNOWN,
                       ids=(source_id, target_id))  # fmt: skip
        verdict = decide(newest, candidate)
        changed = newest is not None and (
            (
                None not in (newest.source_topic_id, source_id)
                and newest.source_topic_id != source_id
            )
            or (
                None not in (newest.target_topic_id, target_id)
                and newest.target_topic_id != target_id
            )
        )
        if changed:
            assert verdict.emit and verdict.rewound
        if not verdict.emit:
            continue
        if newest is not None and not verdict.rewound:
            assert candidate.source_offset >= newest.source_offset
            if newest.target_offset is not None:
                assert candidate.target_offset is not None
                assert candidate.target_offset >= newest.target_offset
        if verdict.rewound:
            assert newest is not None
            assert changed or candidate.source_offset < newest.source_offset
        newest = candidate


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.one_of(st.none(), st.integers(0, 50)), st.booleans()),
        max_size=40,
    )
)
def test_emitted_target_offsets_never_go_backwards_unless_the_group_rewound(
    steps: list[tuple[int, int | None, bool]],
) -> None:
    """Feed any sequence of candidates; the emitted ones only go back at a source rewind."""
    newest: Checkpoint | None = None
    for source, target, exact in steps:
        candidate = cp(source, target, "exact" if exact and target is not None else AHEAD)
        verdict = decide(newest, candidate)
        if not verdict.emit:
            continue
        if newest is not None and not verdict.rewound:
            assert candidate.source_offset >= newest.source_offset
            if newest.target_offset is not None:
                assert candidate.target_offset is not None
                assert candidate.target_offset >= newest.target_offset
        if verdict.rewound:
            assert newest is not None and candidate.source_offset < newest.source_offset
        newest = candidate


# -- what a failover right now would cost -------------------------------------------------------


@pytest.mark.parametrize(
    ("direction", "committed", "reason", "known", "pending", "frontier", "end", "expected"),
    [
        # caught up everywhere: nothing lost, nothing re-read
        (DOWNSTREAM, 100, "exact", True, 0, 100, 100, Exposure(0, 0)),
        # the group consumed up to 80, replication reached 90, the log ends at 100
        (DOWNSTREAM, 80, "exact", True, 0, 90, 100, Exposure(10, 0)),
        # the group is ahead of replication: 90..94 consumed but not copied (re-read if the
        # source recovers), 95..99 neither consumed nor copied (lost)
        (DOWNSTREAM, 95, AHEAD, True, 5, 90, 100, Exposure(5, 5)),
        # nothing replicated yet: everything unconsumed is lost, the re-read count is unknown
        (DOWNSTREAM, 10, UNKNOWN, False, 0, None, 30, Exposure(20, None)),
        # no end offset known: would lose is unknown
        (DOWNSTREAM, 10, "exact", True, 0, 10, None, Exposure(None, 0)),
        # replication skipped records (gap): those are missing, not re-read
        (DOWNSTREAM, 50, Reason.REPLICATION_GAP.value, True, 7, 60, 60, Exposure(0, 0)),
        # a re-copy pass is behind: the position is after its newest copy, and the copies of
        # the 4 records consumed past it (an earlier pass copied them up to 90) are read again
        (DOWNSTREAM, 80, Reason.RECOPY_BEHIND.value, True, 4, 90, 100, Exposure(10, 4)),
        (UPSTREAM, 80, Reason.RECOPY_BEHIND.value, True, 4, None, None, Exposure(0, 4)),
        # upstream: the originals are on the target, nothing is lost
        (UPSTREAM, 40, "exact", True, 0, None, None, Exposure(0, 0)),
        (UPSTREAM, 40, AHEAD, True, 3, None, None, Exposure(0, 3)),
        (UPSTREAM, 40, BEFORE, False, 0, None, None, Exposure(0, None)),
    ],
)
def test_exposure(
    direction: str,
    committed: int,
    reason: str,
    known: bool,
    pending: int,
    frontier: int | None,
    end: int | None,
    expected: Exposure,
) -> None:
    assert (
        exposure(
            direction,  # type: ignore[arg-type]
            committed=committed,
            reason=reason,
            known=known,
            pending=pending,
            frontier=frontier,
            source_end=end,
        )
        == expected
    )


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000))
def test_exposure_matches_a_brute_force_count_over_a_plain_log(
    committed: int, frontier: int, end: int
) -> None:
    """A plain log 0..end-1, replicated up to ``frontier``, consumed up to ``committed``: count
    record by record what is neither consumed nor copied, and what is consumed but not copied."""
    frontier = min(frontier, end)
    committed = min(committed, end)
    lost = sum(1 for offset in range(end) if offset >= committed and offset >= frontier)
    consumed_not_copied = sum(1 for offset in range(end) if frontier <= offset < committed)
    ahead = committed > frontier
    result = exposure(
        DOWNSTREAM,
        committed=committed,
        reason=AHEAD if ahead else "exact",
        known=True,
        pending=committed - frontier if ahead else 0,
        frontier=frontier,
        source_end=end,
    )
    assert result == Exposure(lost, consumed_not_copied)
