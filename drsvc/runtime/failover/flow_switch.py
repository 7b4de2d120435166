"""Which flow copies an application's topics, as failovers move it: edits of the flows' control
documents, written in the same transaction as the step that needs them.

Two shapes of topology:

- **Prefix flows** (active/active): each cluster's topics are copied under their own names
  (``east.orders`` on west), so both directions run all the time. Only an unplanned failover
  changes a flow: the old cluster's flow to the new one stops copying the application's topics
  until the records that never crossed are dealt with (:mod:`.recovery`).
- **An identity pair** (active/passive): ``orders`` is the same topic on both clusters, so only one
  direction may copy it at a time, or each flow would copy the other's copies back. The way back
  is declared ``standby`` in the topology: it copies an application's topics only once a failover
  started them there. When the application becomes active on the new cluster, the flow old -> new
  stops copying its topics and the flow new -> old starts at the cut-off (the new cluster's end at
  the switch, a ``skip_below`` floor), so the old cluster catches up with what the application
  writes from then on, and a failback is a planned failover the other way. After an unplanned
  failover the way back starts only at the recovery, once the divergence of the returned cluster
  is known (what it copies lands after the divergence).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from drsvc.adapters.coordination import Coordinator, Put
from drsvc.runtime.replication.control import FlowControl
from drsvc.topology.models import Topology
from failover import naming
from failover.stale_epochs import watch_after_switch

__all__ = ["FlowSwitch", "start_topics", "stop_topics", "watch_epochs"]

Floors = Mapping[tuple[str, int], int]


def stop_topics(control: FlowControl, topics: Iterable[str]) -> FlowControl:
    """The flow copies none of ``topics`` (kept until started again)."""
    wanted = frozenset(topics)
    return replace(
        control,
        paused_topics=control.paused_topics | wanted,
        started_topics=control.started_topics - wanted,
    )


def start_topics(control: FlowControl, topics: Iterable[str], floors: Floors) -> FlowControl:
    """The flow copies ``topics`` again (a standby flow: for the first time), nothing below
    ``floors`` (floors only rise)."""
    wanted = frozenset(topics)
    skip = dict(control.skip_below)
    for tp, floor in floors.items():
        skip[tp] = max(floor, skip.get(tp, 0))
    return replace(
        control,
        paused_topics=control.paused_topics - wanted,
        started_topics=control.started_topics | wanted,
        skip_below=skip,
    )


def watch_epochs(control: FlowControl, app: str, epoch: int, ends: Floors) -> FlowControl:
    """The flow judges the records of ``app``'s topics by their epoch from ``ends`` on: below
    ``epoch`` they were written after the switch by a client that had not heard of it."""
    return replace(control, epoch_watch=watch_after_switch(control.epoch_watch, app, epoch, ends))


class FlowSwitch:
    """Builds the guarded writes of flow control documents for the failover executor."""

    def __init__(self, topology: Topology, coordinator: Coordinator, namespace: str) -> None:
        self._topology = topology
        self._store = coordinator
        self._ns = namespace

    def has_flow(self, source: str, target: str) -> bool:
        return any(f.source == source and f.target == target for f in self._topology.flows)

    def identity_pair(self, a: str, b: str) -> bool:
        """Flows both ways between ``a`` and ``b`` that keep topic names (active/passive)."""
        pair = [f for f in self._topology.flows if {f.source, f.target} == {a, b}]
        return len(pair) == 2 and all(f.policy == "identity" for f in pair)

    def edit(
        self, source: str, target: str, change: Callable[[FlowControl], FlowControl]
    ) -> Put | None:
        """A compare-and-set of the flow's control document to ``change`` of it (None: no such
        flow, or nothing to change)."""
        if not self.has_flow(source, target):
            return None
        key = naming.flow_control_key(self._ns, source, target)
        entry = self._store.get(key)
        control = FlowControl() if entry is None else FlowControl.from_json(entry.value, key)
        changed = change(control)
        if changed == control:
            return None
        return Put(key, changed.to_json(), 0 if entry is None else entry.index)
