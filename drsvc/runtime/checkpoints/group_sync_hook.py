"""Handing exact translated positions to the group offset syncer, when there is one.

``drsvc.runtime.checkpoints.group_sync.GroupOffsetSyncer`` may set consumer group offsets on the
target from checkpoints, under its own opt-in rules. The stream does not depend on it at import
time: the module is imported lazily (it brings in the Kafka admin client) and the hook does
nothing while it is missing. All of the coupling is in :meth:`GroupSyncHook.offer`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from drsvc.adapters.consul_client import ConsulClient
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin
from drsvc.topology.models import Flow, Topology

if TYPE_CHECKING:
    from drsvc.runtime.checkpoints.group_sync import GroupSyncResult

__all__ = ["SYNCER_MODULE", "GroupSyncHook"]

SYNCER_MODULE = "drsvc.runtime.checkpoints.group_sync"

log = logging.getLogger(__name__)


class GroupSyncHook:
    """Calls the flow's group offset syncer after checkpoints of a group were written."""

    def __init__(
        self,
        topology: Topology,
        flow: Flow,
        target_client: Mapping[str, str],
        consul: ConsulClient | None = None,
    ) -> None:
        self._topology = topology
        self._flow = flow
        self._target_client = dict(target_client)
        self._consul = consul
        self._syncer: Any = None
        self._missing = False

    def offer(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        rewound: Collection[tuple[str, int]],
        unknown: Mapping[tuple[str, int], str],
        origins: Mapping[tuple[str, int], SyncOrigin],
    ) -> GroupSyncResult | None:
        """Pass ``group``'s exact target positions ((topic, partition) on the target -> offset),
        the partitions whose source group went back in this round, those whose translation is
        unknown (with the reason), and the source position each of them was translated from;
        returns the syncer's answer, or None when there is no syncer. Blocking: the syncer may
        talk to the target cluster."""
        if self._missing:
            return None
        if self._syncer is None:
            try:
                module = importlib.import_module(SYNCER_MODULE)
                syncer_class = module.GroupOffsetSyncer
            except (ImportError, AttributeError) as err:
                self._missing = True
                log.debug("no group offset syncer in this build (%s): skipping group sync", err)
                return None
            self._syncer = syncer_class(
                self._topology, self._flow, self._target_client, self._consul
            )
        result: GroupSyncResult | None = self._syncer.sync(
            group, offsets, rewound, unknown, origins
        )
        return result
