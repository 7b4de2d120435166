"""Before the controller starts: can it see every cluster it may act on from enough places?

The decision counts a cluster as down only when ``min_vantages`` independent vantage points agree
(:func:`failover.dr_decision.cluster_health`). If the sources configured could never give that
many for a cluster, the controller would hold for ever there, or, were the vantage points not
told apart, fail over on its own connectivity alone (a partition between the controller's site
and the cluster, while the cluster serves its clients). So it refuses to start instead, and says
what it has and what would add a vantage point.

Each source says from where it can see a cluster (``viewpoint``): the controller's own probe and
the cluster's own heartbeats read by the controller are one viewpoint, ``controller``; Consul's
health checks of ``kafka-<alias>`` (run by the agent of the cluster's own site) are another,
when that service is registered with checks; the cluster's heartbeats copied to another cluster
Y and read there (``heartbeats@Y``) another, when a flow copies them to Y.

The clusters checked are those an application with ``auto_failover`` can be active on: its
preferred cluster and every cluster a failover can take it to (joined by a flow), and on from
there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from drsvc.errors import ConfigError
from drsvc.topology.models import Topology
from failover.dr_decision import Observation

__all__ = ["Vantage", "require_independent_vantages", "watched_clusters"]


class Vantage(Protocol):
    """A source (:data:`drsvc.runtime.controller.observe.Source`) that can also say, before it
    is asked anything, from where it sees a cluster."""

    @property
    def vantage(self) -> str: ...

    def __call__(self, cluster: str, now_s: float) -> Observation | None: ...

    def viewpoint(self, cluster: str) -> str | None:
        """The place in the network ``cluster`` is seen from (None: this source says nothing
        about it)."""
        ...


def watched_clusters(topology: Topology) -> list[str]:
    """Every cluster an application with ``auto_failover`` can be active on."""
    joined: dict[str, set[str]] = {alias: set() for alias in topology.aliases}
    for flow in topology.flows:
        joined[flow.source].add(flow.target)
        joined[flow.target].add(flow.source)
    found: set[str] = set()
    pending = [app.preferred for app in topology.applications if app.auto_failover]
    while pending:
        cluster = pending.pop()
        if cluster not in found:
            found.add(cluster)
            pending.extend(joined.get(cluster, ()))
    return sorted(found)


def require_independent_vantages(
    topology: Topology, vantages: Sequence[Vantage], min_vantages: int
) -> dict[str, dict[str, list[str]]]:
    """Per watched cluster, its viewpoints and the vantages of each; raises
    :class:`ConfigError` naming every cluster that has fewer than ``min_vantages`` viewpoints."""
    seen: dict[str, dict[str, list[str]]] = {}
    for cluster in watched_clusters(topology):
        viewpoints: dict[str, list[str]] = {}
        for vantage in vantages:
            viewpoint = vantage.viewpoint(cluster)
            if viewpoint is not None:
                viewpoints.setdefault(viewpoint, []).append(vantage.vantage)
        seen[cluster] = viewpoints
    short = {c: v for c, v in seen.items() if len(v) < min_vantages}
    if short:
        problems = "; ".join(
            f"{cluster} is seen from {len(viewpoints)} ({_describe(viewpoints)})"
            for cluster, viewpoints in sorted(short.items())
        )
        remedies = ", or ".join(
            [
                "register the Consul service kafka-<cluster> with health checks run by the "
                "agent of the cluster's own site (the consul vantage point)",
                "copy the cluster's heartbeats to another cluster with a flow from it and run "
                "the heartbeats role (a heartbeats@<other cluster> vantage point)",
            ]
        )
        raise ConfigError(
            f"the controller needs {min_vantages} independent vantage points of every cluster "
            f"an application with auto_failover can be active on "
            f"(controller.min_vantages): {problems}. The controller's own probe and the "
            f"cluster's own heartbeats read by the controller count as one (both only show "
            f"whether the controller reaches it). To add one: {remedies}"
        )
    return seen


def _describe(viewpoints: dict[str, list[str]]) -> str:
    if not viewpoints:
        return "nowhere"
    return "; ".join(
        f"{viewpoint}: {', '.join(sorted(vantages))}"
        if sorted(vantages) != [viewpoint]
        else viewpoint
        for viewpoint, vantages in sorted(viewpoints.items())
    )
