from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover import heartbeats
from failover.heartbeats import (
    Freshness,
    FreshnessState,
    FreshnessTracker,
    Heartbeat,
    HeartbeatFormatError,
)

# -- format ---------------------------------------------------------------------------------------

#: Version 1 of a heartbeat from east, written at 1700000000123 ms by emitter 0x0123456789abcdef
#: as its 42nd record. These bytes are what drsvc releases write and read: if this test fails,
#: the change breaks observers and emitters of other versions and needs a new format version.
GOLDEN_V1 = bytes.fromhex(
    "01"  # version
    "04"  # alias length
    "65617374"  # alias: east
    "0000018bcfe5687b"  # emit time ms
    "0123456789abcdef"  # emitter id
    "000000000000002a"  # sequence
)
GOLDEN_HEARTBEAT = Heartbeat("east", 1_700_000_000_123, 0x0123456789ABCDEF, 42)


def test_version_1_bytes_are_stable() -> None:
    assert heartbeats.encode(GOLDEN_HEARTBEAT) == GOLDEN_V1


def test_version_1_bytes_decode() -> None:
    assert heartbeats.decode(GOLDEN_V1) == GOLDEN_HEARTBEAT


def test_key_is_the_alias() -> None:
    assert heartbeats.encode_key("east") == b"east"


@given(
    source=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60
    ).filter(lambda s: 0 < len(s.encode()) <= 255),
    emitted_at_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    emitter_id=st.integers(0, (1 << 64) - 1),
    sequence=st.integers(0, (1 << 64) - 1),
)
def test_round_trip(source: str, emitted_at_ms: int, emitter_id: int, sequence: int) -> None:
    beat = Heartbeat(source, emitted_at_ms, emitter_id, sequence)
    assert heartbeats.decode(heartbeats.encode(beat)) == beat


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "empty"),
        (b"", "empty"),
        (b"\x02" + GOLDEN_V1[1:], "version 2 is not supported"),
        (b"\x00", "version 0 is not supported"),
        (b"\x01", "truncated"),
        (b"\x01\x00" + GOLDEN_V1[6:], "empty source alias"),
        (GOLDEN_V1[:-1], "has 29 bytes"),
        (GOLDEN_V1 + b"\x00", "has 31 bytes"),
        (b"\x01\x02\xff\xfe" + GOLDEN_V1[6:], "not UTF-8"),
    ],
)
def test_unreadable_records_are_refused_with_the_reason(value: bytes | None, message: str) -> None:
    with pytest.raises(HeartbeatFormatError, match=message):
        heartbeats.decode(value)


@pytest.mark.parametrize(
    ("beat", "message"),
    [
        (Heartbeat("", 0, 0, 0), "1-255 bytes"),
        (Heartbeat("x" * 256, 0, 0, 0), "1-255 bytes"),
        (Heartbeat("east", 1 << 63, 0, 0), "64 bits"),
        (Heartbeat("east", 0, -1, 0), "emitter id"),
        (Heartbeat("east", 0, 0, 1 << 64), "sequence"),
    ],
)
def test_unwritable_heartbeats_are_refused(beat: Heartbeat, message: str) -> None:
    with pytest.raises(HeartbeatFormatError, match=message):
        heartbeats.encode(beat)


def test_format_errors_are_value_errors() -> None:
    assert issubclass(HeartbeatFormatError, ValueError)


# -- freshness ------------------------------------------------------------------------------------


def state(tracker: FreshnessTracker, now: float) -> tuple[FreshnessState, float]:
    fresh = tracker.freshness(now)
    return fresh.state, round(fresh.seconds, 6)


def test_unknown_until_the_offset_advances_then_stale_after_the_threshold() -> None:
    tracker = FreshnessTracker(stale_after_s=5.0, started_at=100.0)
    assert state(tracker, 101.0) == (FreshnessState.UNKNOWN, 1.0)
    assert state(tracker, 105.0) == (FreshnessState.UNKNOWN, 5.0)
    assert state(tracker, 105.5) == (FreshnessState.STALE, 5.5)


def test_fresh_after_an_advance_and_stale_when_it_stops() -> None:
    tracker = FreshnessTracker(stale_after_s=5.0, started_at=0.0)
    assert tracker.observe(10, now=1.0)
    assert tracker.observe(11, now=2.0)
    assert state(tracker, 2.5) == (FreshnessState.FRESH, 0.5)
    assert state(tracker, 7.0) == (FreshnessState.FRESH, 5.0)
    assert state(tracker, 7.25) == (FreshnessState.STALE, 5.25)
    assert tracker.observe(12, now=9.0)
    assert state(tracker, 9.0) == (FreshnessState.FRESH, 0.0)
    assert tracker.freshness(9.0) == Freshness(0.0, FreshnessState.FRESH, 12, 3)


def test_the_same_offset_again_is_no_news() -> None:
    tracker = FreshnessTracker(stale_after_s=2.0, started_at=0.0)
    tracker.observe(7, now=1.0)
    for now in (2.0, 3.0, 4.0):
        assert not tracker.observe(7, now)
    assert state(tracker, 4.0) == (FreshnessState.STALE, 3.0)


def test_a_smaller_offset_is_an_advance_because_the_topic_was_recreated() -> None:
    tracker = FreshnessTracker(stale_after_s=2.0, started_at=0.0)
    tracker.observe(500, now=1.0)
    assert tracker.observe(0, now=10.0)
    assert state(tracker, 10.5) == (FreshnessState.FRESH, 0.5)
    assert tracker.freshness(10.5).last_offset == 0


def test_a_baseline_is_not_an_advance() -> None:
    tracker = FreshnessTracker(stale_after_s=2.0, started_at=0.0)
    tracker.baseline(41)
    assert not tracker.observe(41, now=1.0)
    fresh = tracker.freshness(1.0)
    assert (fresh.state, fresh.last_offset, fresh.seen) == (FreshnessState.UNKNOWN, 41, False)
    assert tracker.observe(42, now=1.5)
    assert tracker.freshness(1.5).seen


def test_a_baseline_after_observations_changes_nothing() -> None:
    tracker = FreshnessTracker(stale_after_s=2.0, started_at=0.0)
    tracker.observe(5, now=1.0)
    tracker.baseline(3)
    assert tracker.freshness(1.0).last_offset == 5


def test_time_never_runs_backwards() -> None:
    tracker = FreshnessTracker(stale_after_s=2.0, started_at=10.0)
    tracker.observe(1, now=12.0)
    assert state(tracker, 11.0) == (FreshnessState.FRESH, 0.0)
    tracker.observe(2, now=5.0)  # a clock read before the last one: counts as "now"
    assert state(tracker, 12.0) == (FreshnessState.FRESH, 0.0)


def test_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        FreshnessTracker(stale_after_s=0.0, started_at=0.0)


@given(
    events=st.lists(st.tuples(st.floats(0.0, 10.0), st.integers(0, 5)), min_size=1, max_size=40),
    stale_after_s=st.floats(0.1, 20.0),
)
def test_freshness_is_the_time_since_the_last_change_of_offset(
    events: list[tuple[float, int]], stale_after_s: float
) -> None:
    tracker = FreshnessTracker(stale_after_s, started_at=0.0)
    now = 0.0
    last_offset: int | None = None
    changed_at: float | None = None
    for step, offset in events:
        now += step
        tracker.observe(offset, now)
        if offset != last_offset:
            last_offset, changed_at = offset, now
    fresh = tracker.freshness(now + 1.0)
    assert changed_at is not None
    assert fresh.seconds == pytest.approx(now + 1.0 - changed_at)
    assert fresh.state == (
        FreshnessState.STALE if fresh.seconds > stale_after_s else FreshnessState.FRESH
    )
