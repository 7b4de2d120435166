"""Handing exact translated positions to the flow's group offset syncer.

:class:`~drsvc.runtime.checkpoints.group_sync.GroupOffsetSyncer` may set consumer group offsets
on the target from checkpoints, under its own opt-in rules. The hook creates it on the first
offer, in the worker thread that runs the offer, so that its checks of the flow and the target's
client settings fail there (the runner logs and retries such failures) rather than stopping the
stream. All of the coupling is in :meth:`GroupSyncHook.offer`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from drsvc.adapters.consul_client import ConsulClient
from drsvc.runtime.checkpoints.group_sync import GroupOffsetSyncer, GroupSyncResult
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin
from drsvc.topology.models import Flow, Topology

__all__ = ["GroupSyncHook", "GroupSyncer", "SyncerFactory"]

Partition = tuple[str, int]


class GroupSyncer(Protocol):
    """What the hook needs of a syncer (:class:`GroupOffsetSyncer` is one)."""

    def sync(
        self,
        group: str,
        offsets: Mapping[Partition, int],
        rewound: Collection[Partition],
        unknown: Mapping[Partition, str],
        origins: Mapping[Partition, SyncOrigin],
    ) -> GroupSyncResult | None: ...


SyncerFactory = Callable[[Topology, Flow, Mapping[str, str], ConsulClient | None], GroupSyncer]
"""Builds the flow's syncer from the topology, the flow, the target's client settings and the
Consul client (None: every application counts as active on its preferred cluster)."""


class GroupSyncHook:
    """Calls the flow's group offset syncer after checkpoints of a group were written."""

    def __init__(
        self,
        topology: Topology,
        flow: Flow,
        target_client: Mapping[str, str],
        consul: ConsulClient | None = None,
        *,
        syncer_factory: SyncerFactory = GroupOffsetSyncer,
    ) -> None:
        self._topology = topology
        self._flow = flow
        self._target_client = dict(target_client)
        self._consul = consul
        self._factory = syncer_factory
        self._syncer: GroupSyncer | None = None

    def offer(
        self,
        group: str,
        offsets: Mapping[Partition, int],
        rewound: Collection[Partition],
        unknown: Mapping[Partition, str],
        origins: Mapping[Partition, SyncOrigin],
    ) -> GroupSyncResult | None:
        """Pass ``group``'s exact target positions ((topic, partition) on the target -> offset),
        the partitions whose source group went back in this round, those whose translation is
        unknown (with the reason), and the source position each of them was translated from;
        returns the syncer's answer. Blocking: the syncer may talk to the target cluster."""
        if self._syncer is None:
            self._syncer = self._factory(
                self._topology, self._flow, self._target_client, self._consul
            )
        return self._syncer.sync(group, offsets, rewound, unknown, origins)
