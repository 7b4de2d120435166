"""A failover executor wired to the real Consul and Kafka clusters of a topology (what the CLI,
the controller and the API run failovers with)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.runtime.translation.kept_syncs import KeptSyncs
from drsvc.settings import Settings
from drsvc.topology.models import Topology

__all__ = ["connect_executor"]


def connect_executor(
    topology: Topology,
    bootstraps: Mapping[str, str],
    consul_address: str,
    settings: Settings,
    *,
    catch_up_timeout_s: float,
    probe_timeout_s: float = 5.0,
    on_event: Callable[[str], None] | None = None,
    look_at_lost_cluster: bool = True,
    kept: KeptSyncs | None = None,
) -> FailoverExecutor:
    """``probe_timeout_s`` bounds each "does the active cluster answer?" probe;
    ``look_at_lost_cluster``: see :class:`FailoverExecutor`; ``kept``: offset indexes shared
    with other executors (see :class:`KafkaFailoverClusters`)."""
    return FailoverExecutor(
        topology,
        ConsulCoordinator(consul_address),
        KafkaFailoverClusters(topology, bootstraps, probe_timeout_s=probe_timeout_s, kept=kept),
        lock_timing=LockTiming(settings.failover_lock_ttl_s, settings.failover_lock_delay_s),
        catch_up_timeout_s=catch_up_timeout_s,
        on_event=on_event,
        look_at_lost_cluster=look_at_lost_cluster,
    )
