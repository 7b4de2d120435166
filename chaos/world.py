"""What a suite shares between its scenarios: one local environment and one Spark session."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from chaos.nemesis.context import SiteLinks
from drsvc.adapters.consul_access import ConsulAccess, resolve_consul_access
from drsvc.devenv.access import TopologyRole, consul_role
from drsvc.devenv.components import load_components
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.errors import LocalEnvError
from drsvc.settings import Settings
from drsvc.verify.spark import build_session

PAIR = ("east", "west")
Progress = Callable[[str], None]


def links_of(env: LocalEnvironment) -> SiteLinks | None:
    """The environment's links between sites; None when it was brought up without them
    (partition and latency scenarios are then skipped, and say why)."""
    try:
        return env.links()
    except LocalEnvError:
        return None


@dataclass
class World:
    """The suite's environment (clusters east and west, Consul per site with a witness) in
    ``state_dir``, its Spark session (started on first use) and where results go."""

    state_dir: Path
    out_dir: Path
    master: str = "local[2]"
    progress: Progress = print
    #: bring a new environment up with links between its sites (an existing one keeps what it
    #: was created with)
    with_links: bool = True
    #: secured clusters (SASL_SSL, ACLs that allow nothing by default); an existing environment
    #: brought up otherwise is refused, never changed
    secure: bool = False
    #: principals the environment must know besides drsvc's roles (the workload's application)
    principals: tuple[str, ...] = ()
    env: LocalEnvironment = field(init=False)
    info: EnvironmentInfo = field(init=False)
    links: SiteLinks | None = field(init=False, default=None)
    _spark: SparkSession | None = field(init=False, default=None)
    spark_start_s: float = field(init=False, default=0.0)

    def up(self, fresh: bool = False) -> None:
        """Start the environment (``fresh``: a new one, new ports, whatever the state directory
        held before), or keep the one running in ``state_dir``."""
        self.env = LocalEnvironment(
            Settings.from_env(state_dir=self.state_dir, consul_layout="per-site")
        )
        if fresh:
            self.env.down(purge=True)
        new = not self.env.store.load().sites
        self.info = self.env.up(
            list(PAIR),
            progress=self.progress,
            consul_layout="per-site",
            links=True if new and self.with_links else None,
            secure=self.secure,
        )
        self.links = links_of(self.env)
        for principal in self.principals if self.secure else ():
            self.env.add_principal(principal)

    def admin(self, alias: str) -> tuple[str, dict[str, str]]:
        """Where and how to administer cluster ``alias`` (create topics and ACLs, read anything):
        the super user on secured clusters."""
        if not self.secure:
            return self.info.clusters[alias], {}
        return self.env.admin_settings(alias)

    def client_settings(self, principal: str) -> dict[str, str]:
        """librdkafka security settings of ``principal`` (none on clusters not secured)."""
        return self.env.client_settings(principal) if self.secure else {}

    def security(self, principal: str) -> dict[str, object] | None:
        """A topology cluster's security block for ``principal`` (None: not secured)."""
        return self.env.topology_security(principal) if self.secure else None

    def consul_block(self, role: TopologyRole, site: str) -> dict[str, object] | None:
        """A topology's Consul block for a process of ``role`` at ``site`` (None: Consul is
        reached by address alone)."""
        role_of = consul_role(role)
        return None if role_of is None else self.env.topology_consul(role_of, site)

    def consul_environment(self, role: TopologyRole, site: str) -> dict[str, str]:
        """The variables that let a process of ``role`` at ``site`` reach the environment's
        Consul (its address, CA and token file; none when Consul is not secured)."""
        role_of = consul_role(role)
        return {} if role_of is None else self.env.consul_environment(role_of, site)

    def service_bootstrap(self, site: str) -> dict[str, str]:
        """The clusters as the processes of ``site`` reach them (through the links, if any)."""
        return self.env.clusters_from(site)

    def consul(self, site: str) -> str:
        """The Consul agent the processes of ``site`` use (an https URL when it is secured)."""
        secured = self.env.consul_environment("executor", site).get("CONSUL_HTTP_ADDR")
        address = secured or self.info.consul_sites.get(site) or self.info.consul_http_addr
        assert address is not None
        return address

    def consul_access(self, role: TopologyRole, site: str) -> ConsulAccess | None:
        """How this process reaches ``site``'s Consul agent as ``role`` (its token) when Consul
        is secured; None: by address alone."""
        variables = self.consul_environment(role, site)
        return resolve_consul_access(variables) if variables else None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            started = time.monotonic()
            jars = load_components(Settings.from_env().cache_dir).spark_kafka.jars
            self._spark = build_session(
                self.master,
                jars=jars,
                app_name="drsvc-chaos",
                conf={"spark.ui.showConsoleProgress": "false"},
            )
            self.spark_start_s = time.monotonic() - started
        return self._spark

    def close(self, keep_environment: bool = False) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
        if not keep_environment:
            self.env.down()
