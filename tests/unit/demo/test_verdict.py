"""The drill's verdict catches what it must: an unread order, a re-read after the planned
failback, a recovery point that does not match what was reported."""

from __future__ import annotations

from drsvc.demo.verdict import Unreplicated, judge
from drsvc.demo.workload import Acked, Read

FAULT, FAILBACK = 100.0, 200.0


def acked(seq: int, at: float = 50.0, offset: int | None = None) -> Acked:
    return Acked(seq, "east", 0, seq if offset is None else offset, at)


def read(seq: int, cluster: str, at: float) -> Read:
    return Read(seq, cluster, "orders", 0, seq, at)


def test_a_clean_drill_passes_and_counts_reads_after_the_unplanned_failover() -> None:
    sent = [acked(s) for s in range(4)]
    reads = [read(0, "east", 60), read(1, "east", 61), read(1, "west", 120), read(2, "west", 121),
             read(3, "east", 210)]  # fmt: skip
    v = judge(sent, reads, [], fault_at=FAULT, failback_at=FAILBACK)
    assert v.passed
    assert (v.reread_after_unplanned, v.reread_after_planned, v.duplicates) == (1, 0, 1)


def test_an_unread_order_fails() -> None:
    v = judge([acked(0), acked(1)], [read(0, "east", 60)], [], fault_at=FAULT, failback_at=None)
    assert v.unread == 1 and not v.passed


def test_a_re_read_after_the_planned_failback_fails() -> None:
    reads = [read(0, "west", 150), read(0, "east", 201)]
    v = judge([acked(0)], reads, [], fault_at=FAULT, failback_at=FAILBACK)
    assert v.reread_after_planned == 1 and not v.passed


def test_reported_orders_may_stay_unread_but_must_really_be_unread() -> None:
    lost = Unreplicated("east", 0, 5, 6)
    sent = [acked(s) for s in range(7)]
    reads = [read(s, "east", 60) for s in range(5)]
    v = judge(sent, reads, [lost], fault_at=FAULT, failback_at=None)
    assert (v.rpo_reported, v.rpo_true, v.unread, v.passed) == (2, 2, 0, True)
    # drsvc reported order 5 lost, but it was read: the report was wrong
    v = judge(sent, [*reads, read(5, "west", 150)], [lost], fault_at=FAULT, failback_at=None)
    assert (v.rpo_reported, v.rpo_true, v.passed) == (2, 1, False)


def test_an_order_read_on_its_own_cluster_before_the_loss_can_still_be_unreplicated() -> None:
    lost = Unreplicated("east", 0, 5, 5)
    sent = [acked(s) for s in range(6)]
    reads = [read(s, "east", 60) for s in range(6)]
    v = judge(sent, reads, [lost], fault_at=FAULT, failback_at=None)
    assert (v.rpo_reported, v.rpo_true, v.unread, v.passed) == (1, 1, 0, True)


def test_orders_written_after_the_fault_are_never_in_the_reported_range() -> None:
    open_range = Unreplicated("east", 0, 5, None)
    late = acked(9, at=FAULT + 50)
    v = judge([late], [read(9, "east", 260)], [open_range], fault_at=FAULT, failback_at=FAILBACK)
    assert (v.rpo_reported, v.passed) == (0, True)


def test_an_order_acknowledged_while_the_brokers_went_down_may_be_in_the_reported_range() -> None:
    # east's brokers take a moment to stop: the last order they acknowledged came after the fault
    # began, and it is typically the one that did not cross (the drill's recover reports it)
    exact = Unreplicated("east", 0, 5, 5)
    sent = [*(acked(s) for s in range(5)), acked(5, at=FAULT + 0.3)]
    reads = [read(s, "east", 60) for s in range(5)]
    v = judge(sent, reads, [exact], fault_at=FAULT, failback_at=FAILBACK)
    assert (v.rpo_reported, v.rpo_true, v.unread, v.passed) == (1, 1, 0, True)
