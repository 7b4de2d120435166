"""The drill's verdict from the workload's history (pure: no I/O).

Every read is placed in time (wall clock, one machine): a read of an order already read is a
re-read after the unplanned failover when it happened after the fault, and after the planned
failback when it happened after the failback began. An unplanned failover may re-read what was
consumed after the group's last checkpoint (counted and shown), and loses what had not crossed
when the site was lost (drsvc reports it: the recovery point). A planned failback must re-read
nothing. Nothing acknowledged may go unread unless drsvc reported it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drsvc.demo.workload import Acked, Read

__all__ = ["Unreplicated", "Verdict", "judge"]


@dataclass(frozen=True)
class Unreplicated:
    """A range the unplanned failover reported as not replicated (on the lost cluster)."""

    cluster: str
    partition: int
    first_offset: int
    last_offset: int | None

    def holds(self, record: Acked) -> bool:
        return (
            record.cluster == self.cluster
            and record.partition == self.partition
            and record.offset >= self.first_offset
            and (self.last_offset is None or record.offset <= self.last_offset)
        )


@dataclass(frozen=True)
class Verdict:
    acknowledged: int
    read: int
    #: acknowledged, never read, and not in what drsvc reported as not replicated: lost on the
    #: way or skipped by a move (the Spark check tells which, from the topics themselves)
    unread: int
    #: acknowledged orders drsvc reported as never replicated (the recovery point)
    rpo_reported: int
    #: of those, orders never read from another cluster than their own (all of them, when the
    #: report is true: the application may have read one on its own cluster before the loss)
    rpo_true: int
    reread_after_unplanned: int
    reread_after_planned: int
    #: orders read more than once in all
    duplicates: int

    @property
    def passed(self) -> bool:
        return (
            self.unread == 0
            and self.reread_after_planned == 0
            and self.rpo_true == self.rpo_reported
        )


def judge(
    acked: Sequence[Acked],
    reads: Sequence[Read],
    unreplicated: Iterable[Unreplicated],
    *,
    fault_at: float,
    failback_at: float | None,
) -> Verdict:
    """``fault_at``: when the site was lost; ``failback_at``: when the planned failback began
    (its first step), wall-clock seconds like the history's. ``unreplicated``: the ranges drsvc
    reported as never replicated. A closed range is exact and holds whatever it covers, also an
    order acknowledged while the brokers were going down (after ``fault_at``: often the very
    order that did not cross); an open range ends nowhere, so it holds only orders acknowledged
    before the fault."""
    ranges = list(unreplicated)
    reported = {
        a.seq
        for a in acked
        if any(u.holds(a) and (u.last_offset is not None or a.at < fault_at) for u in ranges)
    }
    seen: set[int] = set()
    reread_unplanned = reread_planned = 0
    for r in sorted(reads, key=lambda r: r.at):
        if r.seq in seen:
            if failback_at is not None and r.at >= failback_at:
                reread_planned += 1
            elif r.at >= fault_at:
                reread_unplanned += 1
        seen.add(r.seq)
    never_read = {a.seq for a in acked} - seen
    origin = {a.seq: a.cluster for a in acked}
    crossed = {r.seq for r in reads if r.cluster != origin.get(r.seq, r.cluster)}
    return Verdict(
        acknowledged=len(acked),
        read=len(seen),
        unread=len(never_read - reported),
        rpo_reported=len(reported),
        rpo_true=len(reported - crossed),
        reread_after_unplanned=reread_unplanned,
        reread_after_planned=reread_planned,
        duplicates=sum(1 for n in Counter(r.seq for r in reads).values() if n > 1),
    )
