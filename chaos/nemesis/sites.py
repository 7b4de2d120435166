"""Nemeses on sites: the loss of a Consul server, the loss of a whole site (its brokers killed),
and, on an environment brought up with links between sites, a partition and added latency."""

from __future__ import annotations

from chaos.nemesis.base import Nemesis, Timeline
from chaos.nemesis.context import ChaosContext, SiteLinks
from drsvc.errors import LocalEnvError


class LoseConsulServer(Nemesis):
    """SIGKILL of one site's Consul server; healed by starting it again (it rejoins)."""

    kind = "lose-consul-server"

    def __init__(self, timeline: Timeline, context: ChaosContext, site: str) -> None:
        super().__init__(timeline, f"consul-{site}")
        self.context = context
        self.site = site

    def inject(self) -> str:
        self.context.env.stop_consul_site(self.site)
        return f"kill -9 the Consul server of {self.site}"

    def heal(self) -> str:
        self.context.restart_environment()
        return f"kill -9 the Consul server of {self.site}; restarted, rejoined the quorum"


class LoseSite(Nemesis):
    """Every broker of a site killed at once (SIGKILL): the cluster is gone. Heal starts them
    again with their data (the site returns)."""

    kind = "lose-site"

    def __init__(self, timeline: Timeline, context: ChaosContext, site: str) -> None:
        super().__init__(timeline, site)
        self.context = context
        self.site = site

    def inject(self) -> str:
        stopped = self.context.env.stop_site(self.site, grace_s=0.0)
        return f"site {self.site} lost: {stopped} broker(s) killed"

    def heal(self) -> str:
        self.context.restart_environment()
        return f"site {self.site} lost, then back with its data"


def _links(context: ChaosContext) -> SiteLinks:
    if context.links is None:
        raise LocalEnvError("this fault needs an environment brought up with links between sites")
    return context.links


class Partition(Nemesis):
    """The link between two sites cut (no traffic either way); healed by restoring it."""

    kind = "partition"

    def __init__(self, timeline: Timeline, context: ChaosContext, a: str, b: str) -> None:
        super().__init__(timeline, f"{a}<->{b}")
        self.links = _links(context)
        self.a, self.b = a, b

    def inject(self) -> str:
        self.links.cut(self.a, self.b)
        return f"network between {self.a} and {self.b} cut"

    def heal(self) -> None:
        self.links.heal(self.a, self.b)


class Latency(Nemesis):
    """Latency (and jitter) added on the link between two sites; healed by removing it."""

    kind = "latency"

    def __init__(
        self, timeline: Timeline, context: ChaosContext, a: str, b: str, ms: int, jitter_ms: int
    ) -> None:
        super().__init__(timeline, f"{a}<->{b}")
        self.links = _links(context)
        self.a, self.b, self.ms, self.jitter_ms = a, b, ms, jitter_ms

    def inject(self) -> str:
        self.links.delay(self.a, self.b, self.ms, self.jitter_ms)
        return f"{self.ms} ms (+/- {self.jitter_ms} ms) between {self.a} and {self.b}"

    def heal(self) -> None:
        self.links.heal(self.a, self.b)
