"""The returned site's divergence, the flow's floors, groups started past quarantined records."""

from __future__ import annotations

from dataclasses import replace

import pytest

from failover.active import ActiveDocument
from failover.errors import FailoverRefused
from failover.failover_plan import (
    FailoverKind,
    FailoverRecord,
    FailoverRequest,
    FailoverState,
    Situation,
    plan_failover,
)
from failover.site_recovery import (
    DivergentRange,
    RecoveryPolicy,
    SiteRecovery,
    crossed_end,
    divergence,
    parse_replayed_from,
    past_quarantine,
    replayed_from_value,
    skip_floors,
)


def test_divergence_is_what_lies_between_the_replicated_position_and_the_end_now() -> None:
    found = divergence(
        {("orders", 0): 40, ("orders", 1): 7, ("orders", 2): 9},
        {("orders", 0): 46, ("orders", 1): 7, ("orders", 2): 10, ("orders", 3): 2},
    )
    assert found == (
        DivergentRange("orders", 0, 40, 46),
        DivergentRange("orders", 2, 9, 10),
        DivergentRange("orders", 3, 0, 2),
    )
    assert [(r.records, r.last_offset) for r in found] == [(6, 45), (1, 9), (2, 1)]


@pytest.mark.parametrize(
    ("synced", "copied", "end"),
    [
        (40, [], 40),  # every copy mapped by a sync
        (40, [40, 41, 42], 43),  # copies a lost worker made before writing their sync
        (40, [40, 41, 41, 42], 43),  # with a re-copy
        (0, [0, 1], 2),  # a partition without any sync yet
        (46, [], 46),  # the syncs' run may end past the last record (a transaction marker)
    ],
)
def test_a_copy_without_a_sync_has_crossed_all_the_same(
    synced: int, copied: list[int], end: int
) -> None:
    assert crossed_end(synced, copied) == end


def _recovery() -> SiteRecovery:
    return SiteRecovery(
        RecoveryPolicy.QUARANTINE,
        "east",
        1_000,
        (DivergentRange("orders", 0, 40, 46), DivergentRange("orders", 1, 3, 5)),
    )


def test_the_flow_skips_below_each_divergence_end() -> None:
    assert skip_floors(_recovery()) == {("orders", 0): 46, ("orders", 1): 5}


@pytest.mark.parametrize(
    ("partition", "offset", "start"),
    [(0, 39, 39), (0, 40, 46), (0, 45, 46), (0, 46, 46), (1, 4, 5), (2, 4, 4)],
)
def test_a_group_starts_past_records_it_would_read_first(
    partition: int, offset: int, start: int
) -> None:
    assert past_quarantine("orders", partition, offset, [_recovery()]) == start


def test_replayed_from_headers_round_trip_and_malformed_ones_are_none() -> None:
    value = replayed_from_value("east", "orders.v2", 3, 1234)
    assert parse_replayed_from(value) == ("east", "orders.v2", 3, 1234)
    assert parse_replayed_from("east/orders/x/1") is None
    assert parse_replayed_from("east/orders/1") is None


def test_completion() -> None:
    recovery = _recovery()
    assert not recovery.completed and recovery.records == 8
    assert recovery.replay_done(8).complete(2_000).completed


def _unplanned(recovery: SiteRecovery | None) -> FailoverRecord:
    situation = Situation(frozenset({"east", "west"}), ActiveDocument("east"), False)
    plan = plan_failover(FailoverRequest("orders", "west"), situation, "f-1")
    assert plan.kind is FailoverKind.UNPLANNED
    return FailoverRecord(plan, FailoverState.COMPLETED, recovery=recovery)


def test_an_unplanned_failover_awaits_recovery_until_it_completed() -> None:
    assert _unplanned(None).awaits_recovery
    assert _unplanned(_recovery()).awaits_recovery
    assert not _unplanned(_recovery().complete(5)).awaits_recovery
    assert not replace(_unplanned(None), state=FailoverState.ROLLED_BACK).awaits_recovery


def test_a_failback_before_the_recovery_is_refused_saying_what_to_run() -> None:
    situation = Situation(
        frozenset({"east", "west"}), ActiveDocument("west"), True, unrecovered="f-1"
    )
    with pytest.raises(FailoverRefused, match="drsvc recover --app orders"):
        plan_failover(FailoverRequest("orders", "east"), situation, "f-2")
