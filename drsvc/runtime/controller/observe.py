"""Where the controller's observations come from: one per cluster and vantage point per cycle.

* ``probe@<replica>``: the controller itself asks the cluster for its metadata.
* ``consul``: the health of the cluster's ``kafka-<alias>`` service, whose TCP checks run on the
  Consul agent of the cluster's own site (a site lost with its agent turns critical once Consul
  notices the agent is gone).

Each source may say nothing (no observation) when it cannot tell: a service that is not
registered, or Consul itself unreachable. The decision needs enough fresh vantage points to agree
(:func:`failover.dr_decision.cluster_health`), so a vantage that went silent never decides.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from drsvc.adapters.consul_client import ConsulClient
from drsvc.errors import DrsvcError
from failover.dr_decision import Observation

__all__ = ["ConsulHealth", "DirectProbe", "observe"]

log = logging.getLogger(__name__)

Source = Callable[[str, float], Observation | None]


class DirectProbe:
    """The controller's own probe of a cluster (metadata within a short timeout)."""

    def __init__(self, replica: str, reachable: Callable[[str], bool]) -> None:
        self.vantage = f"probe@{replica}"
        self._reachable = reachable

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        try:
            answered = self._reachable(cluster)
        except DrsvcError as err:
            return Observation(cluster, self.vantage, False, now_s, str(err))
        return Observation(cluster, self.vantage, answered, now_s)


class ConsulHealth:
    """The site agents' view: are the TCP checks of ``kafka-<alias>`` passing?"""

    vantage = "consul"

    def __init__(self, consul: ConsulClient) -> None:
        self._consul = consul

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        try:
            entries = self._consul.service_health(f"kafka-{cluster}")
        except DrsvcError as err:
            log.debug("consul health of %s: %s", cluster, err)
            return None  # Consul unreachable: this vantage says nothing
        if not entries:
            return None  # not registered: nothing to tell
        passing = all(
            check["Status"] == "passing" for entry in entries for check in entry["Checks"]
        )
        return Observation(cluster, self.vantage, passing, now_s)


def observe(clusters: Iterable[str], sources: Iterable[Source], now_s: float) -> list[Observation]:
    """Every source's observation of every cluster, asked in parallel (a probe of a dead
    cluster waits for its timeout; the others do not wait behind it)."""
    asks = [(cluster, source) for cluster in clusters for source in sources]
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(asks)))) as pool:
        answers = list(pool.map(lambda ask: ask[1](ask[0], now_s), asks))
    return [a for a in answers if a is not None]
