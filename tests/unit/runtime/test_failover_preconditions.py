"""Preconditions a caller took from a dry run (expect_kind, expect_epoch): the failover runs
only while they still hold."""

from __future__ import annotations

from dataclasses import replace

import pytest
from failover_topologies import Clock, executor_on
from fake_failover_clusters import FakeFailoverClusters, exact
from memory_coordination import MemoryCoordinator
from test_failover_requests import topology, written

from drsvc.errors import PreconditionFailedError
from failover.failover_plan import FailoverKind, FailoverRequest, FailoverState


def test_preconditions_from_a_dry_run_must_still_hold() -> None:
    clock = Clock()
    store = MemoryCoordinator(clock)
    clusters = FakeFailoverClusters()
    clusters.translations[("g1", "east", "west")] = [exact("orders", 0, 10, "east.orders", 110)]
    executor = executor_on(topology(), store, clusters, clock)
    plan, _targets, _note = executor.preview(FailoverRequest("orders", "west"))
    epoch = executor.active(executor.application("orders")).epoch
    shown = FailoverRequest("orders", "west", expect_kind=plan.kind, expect_epoch=epoch)
    for wrong, why in (
        (replace(shown, expect_epoch=epoch + 1), f"at epoch {epoch}, not {epoch + 1}"),
        (replace(shown, expect_kind=FailoverKind.UNPLANNED), "would be planned now, not unpl"),
    ):
        for attempt in (executor.preview, executor.start):
            with pytest.raises(PreconditionFailedError, match=why):
                attempt(wrong)
    assert written(store) == []
    done = executor.start(shown)
    assert (done.state, done.plan.kind) == (FailoverState.COMPLETED, FailoverKind.PLANNED)
