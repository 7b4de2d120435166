"""Telling a takeover from a coordinator-side transaction timeout, and when to take a slot
again (on a fake clock); the slot progress carries the partition's last copy."""

from __future__ import annotations

import pytest

from failover.errors import PolicyError
from failover.keepalive import LastCopy
from failover.slots import RetakeDelays, SlotFailure, SlotProgress, classify_failure

TIMEOUT_S = 20.0


@pytest.mark.parametrize(
    ("fenced", "age", "assigned", "expected"),
    [
        # Not fenced: an ordinary failure, whatever else holds.
        (False, 30.0, True, SlotFailure.FAILED),
        (False, None, None, SlotFailure.FAILED),
        # Fenced after the transaction outlived its timeout, the slot still ours: a timeout.
        (True, 20.0, True, SlotFailure.TRANSACTION_TIMED_OUT),
        (True, 45.0, True, SlotFailure.TRANSACTION_TIMED_OUT),
        # The group gave the slot to someone else (a paused worker waking up): a takeover.
        (True, 45.0, False, SlotFailure.TAKEN_OVER),
        # The group could not say: assume a takeover rather than fence the real owner.
        (True, 45.0, None, SlotFailure.TAKEN_OVER),
        # Younger than the timeout: the coordinator cannot have timed it out, so another
        # instance bumped the epoch, even if the group still names us.
        (True, 19.9, True, SlotFailure.TAKEN_OVER),
        # No transaction open: nothing could time out.
        (True, None, True, SlotFailure.TAKEN_OVER),
    ],
)
def test_failures_are_classified(
    fenced: bool, age: float | None, assigned: bool | None, expected: SlotFailure
) -> None:
    assert (
        classify_failure(
            fenced=fenced,
            transaction_age_s=age,
            transaction_timeout_s=TIMEOUT_S,
            still_assigned=assigned,
        )
        is expected
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0


def test_a_timed_out_slot_is_taken_again_promptly_with_a_growing_backoff() -> None:
    delays = RetakeDelays(taken_over_s=15.0, timeout_first_s=0.1, timeout_max_s=2.0)
    waits = [delays.delay_s(SlotFailure.TRANSACTION_TIMED_OUT, n) for n in range(1, 8)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert max(waits) < 15.0


def test_only_a_takeover_waits_the_long_delay() -> None:
    delays = RetakeDelays(taken_over_s=15.0, failed_first_s=0.5, failed_max_s=30.0)
    assert delays.delay_s(SlotFailure.TAKEN_OVER, 1) == 15.0
    assert delays.delay_s(SlotFailure.TAKEN_OVER, 9) == 15.0  # never grows, never shrinks
    assert delays.delay_s(SlotFailure.FAILED, 1) == 0.5
    assert delays.delay_s(SlotFailure.FAILED, 20) == 30.0
    assert delays.delay_s(SlotFailure.TRANSACTION_TIMED_OUT, 1) == 0.1


def test_the_doubling_stops_before_a_float_overflows() -> None:
    assert RetakeDelays().delay_s(SlotFailure.FAILED, 5000) == 30.0


def test_progress_carries_the_last_copy() -> None:
    progress = SlotProgress(120, b"S" * 16, LastCopy(110, 507, 4))
    encoded = progress.encode()
    assert '"last":[110,507,4]' in encoded
    assert SlotProgress.decode(encoded) == progress


def test_progress_without_a_last_copy_reads_as_before() -> None:
    encoded = SlotProgress(120, b"S" * 16).encode()
    assert "last" not in encoded
    assert SlotProgress.decode(encoded).last_copy is None


@pytest.mark.parametrize("last", ["[1,2]", "[1,2,-2]", "[-1,2,3]", '"x"', "[1,2,true]"])
def test_a_malformed_last_copy_is_named(last: str) -> None:
    metadata = '{"v":1,"next":5,"source_topic_id":"' + "00" * 16 + '","last":' + last + "}"
    with pytest.raises(PolicyError, match="malformed last copy"):
        SlotProgress.decode(metadata)
