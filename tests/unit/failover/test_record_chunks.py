"""A failover record too large for one value: split into a head and chunks, joined back only when
the chunks are exactly those the head names; small records stay in the format every build reads."""

from __future__ import annotations

import json

import pytest

from failover.active import ActiveDocument
from failover.errors import RecordFormatError, RecordTooLarge
from failover.failover_plan import (
    Cutoff,
    FailoverRecord,
    FailoverRequest,
    GroupTarget,
    Outcome,
    Situation,
    StepName,
    plan_failover,
    record_outcome,
)
from failover.failover_record import decode_record, encode_record, record_fields
from failover.naming import (
    FailoverKey,
    failover_chunk_key,
    failover_record_key,
    parse_failover_key,
)
from failover.record_chunks import (
    CHUNK_BYTES,
    INLINE_LIMIT_BYTES,
    chunk_set,
    join_record,
    split_record,
)


def _record(partitions: int, groups: int = 1) -> FailoverRecord:
    situation = Situation(frozenset({"east", "west"}), ActiveDocument("east"), True)
    plan = plan_failover(
        FailoverRequest("orders", "west"), situation, "f-20260101T000000Z-1a2b3c4d"
    )
    record = FailoverRecord(
        plan,
        created_ms=1_000,
        groups=tuple(
            GroupTarget(f"g{g}", "east.orders", p, 1_000_000 + p, True, "orders", 999_000 + p)
            for g in range(groups)
            for p in range(partitions)
        ),
        cutoffs=tuple(Cutoff("east.orders", p, 2_000_000 + p) for p in range(partitions)),
    )
    return record_outcome(record, StepName.DEACTIVATE, Outcome.OK, 2_000, "active: none (epoch 2)")


def _numbered(chunks: tuple[str, ...]) -> dict[int, str]:
    return dict(enumerate(chunks))


def test_a_small_record_is_stored_whole_in_the_format_every_build_reads() -> None:
    record = _record(10)
    stored = split_record(record)
    assert stored.chunks == () and stored.chunk_set is None
    assert stored.head == encode_record(record)
    assert chunk_set(stored.head) is None
    assert decode_record(stored.head) == record == join_record(stored.head, {})


def test_five_thousand_group_partitions_split_and_join_back() -> None:
    record = _record(1_000, groups=5)
    stored = split_record(record)
    named = stored.chunk_set
    assert named is not None and named.count == len(stored.chunks) > 1
    assert all(len(c) <= CHUNK_BYTES for c in stored.chunks)
    assert len(stored.head) <= INLINE_LIMIT_BYTES
    head = json.loads(stored.head)
    assert head["v"] == 2 and "groups" not in head and "cutoffs" not in head
    assert chunk_set(stored.head) == named
    assert join_record(stored.head, _numbered(stored.chunks)) == record


def test_an_older_reader_refuses_a_chunked_head_rather_than_read_no_positions() -> None:
    stored = split_record(_record(1_000, groups=5))
    with pytest.raises(RecordFormatError, match="chunks"):
        decode_record(stored.head)


def test_a_record_written_by_the_previous_version_reads() -> None:
    fields = record_fields(_record(3))
    fields.pop("requested_by")  # as a record from before the field was kept
    raw = json.dumps(fields)
    assert join_record(raw, {}).groups == _record(3).groups


def test_a_chunk_changed_in_place_is_refused_by_the_digest() -> None:
    stored = split_record(_record(1_000, groups=5))
    chunks = _numbered(stored.chunks)
    first = chunks[0]
    chunks[0] = first[:100] + ("7" if first[100] != "7" else "8") + first[101:]
    with pytest.raises(RecordFormatError, match="digest"):
        join_record(stored.head, chunks)


def test_a_missing_or_an_extra_chunk_is_refused() -> None:
    stored = split_record(_record(1_000, groups=5))
    chunks = _numbered(stored.chunks)
    last = max(chunks)
    with pytest.raises(RecordFormatError, match=f"missing \\[{last}\\]"):
        join_record(stored.head, {n: c for n, c in chunks.items() if n != last})
    with pytest.raises(RecordFormatError, match="unexpected"):
        join_record(stored.head, {**chunks, last + 1: "x"})
    with pytest.raises(RecordFormatError, match="no chunks"):
        join_record(split_record(_record(2)).head, {0: "x"})


def test_chunks_of_another_body_are_refused() -> None:
    one, other = split_record(_record(1_000, groups=5)), split_record(_record(1_000, groups=6))
    with pytest.raises(RecordFormatError):
        join_record(one.head, _numbered(other.chunks))


def test_a_record_over_the_ceiling_is_refused_naming_its_size() -> None:
    record = _record(1_000, groups=5)
    with pytest.raises(RecordTooLarge, match="5000 group partition"):
        split_record(record, chunk_bytes=64 * 1024, max_chunks=4)
    # a head too large on its own (its events) is refused too
    with pytest.raises(RecordTooLarge, match="head alone"):
        split_record(record, inline_limit=200)


def test_a_head_naming_its_chunks_wrongly_is_refused() -> None:
    stored = split_record(_record(1_000, groups=5))
    head = json.loads(stored.head)
    for chunks in (None, {"digest": "x", "count": 1, "bytes": 1}, {**head["chunks"], "count": 0}):
        with pytest.raises(RecordFormatError, match="chunks"):
            chunk_set(json.dumps({**head, "chunks": chunks}))


def test_chunk_keys_live_under_the_record_and_parse_back() -> None:
    key = failover_chunk_key("ns", "f-1", "0123abcd", 3)
    assert key == f"{failover_record_key('ns', 'f-1')}/0123abcd/0003"
    assert key.startswith("drsvc/ns/failovers/")
    assert parse_failover_key("ns", key) == FailoverKey("f-1", "0123abcd", 3)
    assert parse_failover_key("ns", failover_record_key("ns", "f-1")) == FailoverKey("f-1")
    assert parse_failover_key("ns", "drsvc/ns/failovers/f-1/odd") is None
    assert parse_failover_key("ns", "drsvc/other/failovers/f-1") is None
