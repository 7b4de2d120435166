"""Reading a sync topic gives up when the read stops moving, never because the topic is long.

A flow keeps a week of syncs, millions of them for a busy flow: a read of them takes minutes, and a
fixed deadline made every failover and every checkpoint-stream start fail once the topic had grown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest
from fake_kafka import FakeClock

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.translation import sync_reader
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

SOURCE_ID, TARGET_ID = b"S" * 16, b"T" * 16
TIMEOUT_S = 5.0


@dataclass
class SyncRecord:
    offset_: int
    key_: bytes
    value_: bytes

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.offset_

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return self.key_

    def value(self) -> bytes:
        return self.value_


@dataclass
class SlowConsumer:
    """Hands out ``records`` one per call, each call taking ``call_s`` on the clock; after
    ``stall_after`` records it returns nothing more."""

    clock: FakeClock
    records: list[SyncRecord]
    call_s: float
    stall_after: int | None = None
    handed: int = 0
    calls: list[float] = field(default_factory=list)

    def consume(self, num_messages: int, timeout: float) -> list[SyncRecord]:
        self.clock.advance(self.call_s)
        self.calls.append(self.clock.monotonic())
        limit = len(self.records) if self.stall_after is None else self.stall_after
        if self.handed >= limit:
            return []
        self.handed += 1
        return [self.records[self.handed - 1]]


def sync_records(count: int) -> list[SyncRecord]:
    records = []
    for n in range(count):
        key, value = encode_sync(
            OffsetSync(
                "orders",
                0,
                SOURCE_ID,
                TARGET_ID,
                0,
                n * 100,
                n * 100 + 100,
                (Segment(n * 100, n * 100, 100),),
            )
        )
        records.append(SyncRecord(n, key, value))
    return records


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(sync_reader, "time", fake)
    return fake


def test_a_read_that_keeps_moving_runs_past_the_timeout_and_says_how_far_it_is(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    records = sync_records(12)
    started = clock.monotonic()
    consumer = SlowConsumer(clock, records, call_s=2.0)
    result = SyncTopicRead(cluster="west", topic="drsvc.offset-syncs.east")
    result.ends = {0: 0}

    with caplog.at_level(logging.INFO, logger=sync_reader.__name__):
        sync_reader._read(consumer, result, {0: 12}, None, TIMEOUT_S)  # type: ignore[arg-type]

    assert clock.monotonic() - started == 24.0  # nearly five times the timeout
    assert result.records == 12
    assert result.ends == {0: 12}
    assert result.index.replicated_end(TopicPartition("orders", 0)) == 1200
    progress = [r.getMessage() for r in caplog.records if "so far" in r.getMessage()]
    assert progress, "a long read logs how far it is"
    assert "partition 0 at" in progress[0] and "of 12" in progress[0]


def test_a_read_that_stops_moving_gives_up_after_the_timeout_naming_where_it_stopped(
    clock: FakeClock,
) -> None:
    records = sync_records(10)
    consumer = SlowConsumer(clock, records, call_s=1.0, stall_after=3)
    result = SyncTopicRead(cluster="west", topic="drsvc.offset-syncs.east")
    result.ends = {0: 0}

    with pytest.raises(KafkaUnavailableError) as raised:
        sync_reader._read(consumer, result, {0: 10}, None, TIMEOUT_S)  # type: ignore[arg-type]

    message = str(raised.value)
    assert "drsvc.offset-syncs.east on west made no progress for 5s" in message
    assert "partition 0 at 3 of 10" in message and "3 syncs read" in message
    # It gave up within one consume() call of the timeout after the last record.
    last_record_at = consumer.calls[2]
    assert TIMEOUT_S < clock.monotonic() - last_record_at <= TIMEOUT_S + consumer.call_s
