"""Two applications of one flow that activate at once both edit the flow's control document: the
one whose compare-and-set loses does its step again at once, instead of recording a failure and
waiting a retry's pause (which made five applications failing over together switch seconds
after one alone)."""

from __future__ import annotations

from collections.abc import Sequence

from failover_topologies import Clock, application, caught_up, east_west, executor_on
from memory_coordination import MemoryCoordinator

from drsvc.adapters.coordination import Lock, WriteOp
from drsvc.runtime.failover.flow_switch import FlowSwitch, stop_topics
from drsvc.runtime.replication.control import FlowControl
from failover.failover_plan import (
    FailoverRecord,
    FailoverRequest,
    FailoverState,
    Outcome,
    StepName,
)
from failover.naming import flow_control_key

NS = "t"
CONTROL = flow_control_key(NS, "east", "west")


class OtherApplicationFirst(MemoryCoordinator):
    """Just before this failover's first write to the flow's control document commits, another
    application's failover stops its own topic in that document (``times`` times)."""

    def __init__(self, clock: Clock, times: int) -> None:
        super().__init__(clock)
        self.times = times
        self.switch: FlowSwitch | None = None

    def write(self, ops: Sequence[WriteOp], *, lock: Lock | None = None) -> None:
        if self.times and self.switch is not None and any(op.key == CONTROL for op in ops):
            self.times -= 1
            other = self.switch.edit("east", "west", lambda c: stop_topics(c, [f"pay{self.times}"]))
            assert other is not None
            super().write([other])
        super().write(ops, lock=lock)


def _failover(times: int) -> tuple[OtherApplicationFirst, FailoverRecord]:
    clock = Clock()
    store = OtherApplicationFirst(clock, times)
    topology = east_west(NS, application("app", lease_s=3))
    store.switch = FlowSwitch(topology, store, NS)
    clusters = caught_up()
    clusters.down.add("east")
    clusters.checkpoint_map[("east", "west")] = {}
    executor = executor_on(topology, store, clusters, clock)
    return store, executor.start(FailoverRequest("app", "west", force=True))


def test_a_lost_compare_and_set_on_the_flow_document_is_done_again_at_once() -> None:
    store, record = _failover(times=2)
    assert record.state is FailoverState.COMPLETED
    activations = [e for e in record.events if e.step is StepName.ACTIVATE]
    assert [e.outcome for e in activations] == [Outcome.OK]
    entry = store.get(CONTROL)
    assert entry is not None
    # Both edits stand: the other applications' topics and this one's.
    assert FlowControl.from_json(entry.value, CONTROL).paused_topics == {"orders", "pay0", "pay1"}
