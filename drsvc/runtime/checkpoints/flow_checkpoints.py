"""Reading the checkpoints every flow's stream wrote, for ``drsvc checkpoints --once`` and the API.

Kept apart from :mod:`~drsvc.runtime.checkpoints.service`, which runs the stream in faust: a
reader of checkpoints (the API above all) reads one topic per flow with confluent-kafka and must
not load faust for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drsvc.runtime.checkpoints.checkpoint_topic import checkpoint_as_dict, read_checkpoints
from drsvc.runtime.checkpoints.plan import plan_checkpoints
from drsvc.topology.models import Topology

__all__ = ["client_configs", "read_flow_checkpoints"]


def client_configs(topology: Topology, bootstrap: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """librdkafka settings of every cluster of ``topology``."""
    return {
        alias: cluster.client_config(bootstrap.get(alias))
        for alias, cluster in topology.clusters.items()
    }


def read_flow_checkpoints(
    topology: Topology,
    bootstrap: Mapping[str, str],
    *,
    flow_id: str | None = None,
    timeout_s: float = 60.0,
) -> list[dict[str, Any]]:
    """The current checkpoints of every flow (or of ``flow_id``), grouped by consumer group:
    ``[{"flow", "cluster", "topic", "exists", "groups": {group: [checkpoint, ...]}}]``."""
    plan = plan_checkpoints(topology, flow_id)
    clients = client_configs(topology, bootstrap)
    flows = []
    for stream_plan in plan.streams:
        target = stream_plan.flow.target
        read = read_checkpoints(
            clients[target], stream_plan.checkpoints_topic, cluster=target, timeout_s=timeout_s
        )
        groups: dict[str, list[dict[str, Any]]] = {}
        for key, checkpoint in sorted(read.checkpoints.items()):
            groups.setdefault(key.group, []).append(checkpoint_as_dict(key, checkpoint))
        flows.append(
            {
                "flow": stream_plan.flow_id,
                "cluster": target,
                "topic": stream_plan.checkpoints_topic,
                "exists": read.exists,
                "groups": groups,
            }
        )
    return flows
