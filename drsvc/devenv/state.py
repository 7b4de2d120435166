"""The persistent state of the local environment: sites, their brokers, ports and processes.

Everything a site owns (its brokers, their ports and data) is grouped under that site, and each site
records the host address its processes listen on. Every site listens on 127.0.0.1; an environment
brought up with links (``links``) also gives each broker a listener per other site, reached through
a proxy that can cut, slow or throttle that link (``drsvc.devenv.links``).

The state file is rewritten atomically (temp file + rename) after every change, so an interrupted
command never leaves it half-written. A lock file serialises concurrent ``drsvc dev`` commands.
Clients read where the clusters and the Consul agent listen from the same file, without this
module (:mod:`drsvc.dev_endpoints`, which defines the file's name, format and reading).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from drsvc.dev_endpoints import (
    LOCAL_HOST,
    STATE_FILE,
    STATE_FORMAT,
    ConsulLayout,
    StateDocument,
    bootstrap_list,
    consul_url,
    read_state,
)
from drsvc.process_handle import ProcessHandle

__all__ = [
    "LOCK_FILE",
    "STATE_FILE",
    "STATE_FORMAT",
    "WITNESS_SITE",
    "BrokerNode",
    "ConsulAgentState",
    "ConsulLayout",
    "EnvState",
    "KafkaSite",
    "LinkListener",
    "LinksState",
    "StateStore",
]

LOCK_FILE = "state.lock"


class BrokerNode(BaseModel):
    """One KRaft node (broker and controller in one JVM)."""

    model_config = ConfigDict(extra="forbid")
    node_id: int
    broker_port: int
    controller_port: int
    #: the mutual-TLS listener of a secured site (brokers and administration); None: not secured
    mtls_port: int | None = None
    process: ProcessHandle | None = None


class KafkaSite(BaseModel):
    """One cluster alias = one site: its Kafka cluster and where it listens."""

    model_config = ConfigDict(extra="forbid")
    alias: str
    host: str = LOCAL_HOST
    cluster_id: str
    nodes: list[BrokerNode]
    #: broker properties that replace the environment's defaults (static broker settings such
    #: as ``offsets.retention.minutes``, which only a restart changes); kept so restarts keep them
    broker_overrides: dict[str, str] = Field(default_factory=dict)
    #: TLS, SASL and ACLs on every listener (``drsvc dev up --secure``; see drsvc.devenv.secure)
    secure: bool = False

    @property
    def bootstrap_servers(self) -> str:
        """The clients' listener (SASL_SSL on a secured site)."""
        return bootstrap_list(self.host, (n.broker_port for n in self.nodes))

    @property
    def mtls_bootstrap_servers(self) -> str | None:
        """The mutual-TLS listener of a secured site (None otherwise)."""
        ports = [n.mtls_port for n in self.nodes if n.mtls_port is not None]
        return bootstrap_list(self.host, ports) if self.secure and ports else None


class ConsulAgentState(BaseModel):
    """A Consul server agent: the only one (layout ``single``), or one site's (``per-site``)."""

    model_config = ConfigDict(extra="forbid")
    #: the site whose agent this is (a cluster alias, or ``witness``); None: the single agent
    site: str | None = None
    host: str = LOCAL_HOST
    #: the HTTP API (HTTPS only on a secured environment)
    http_port: int
    server_port: int
    serf_lan_port: int
    serf_wan_port: int
    process: ProcessHandle | None = None

    @property
    def http_addr(self) -> str:
        return f"{self.host}:{self.http_port}"


class LinkListener(BaseModel):
    """The way clients of one site reach one broker of another site: a broker listener of its
    own (``listener_port``) that Toxiproxy forwards to from ``proxy_port``, the address the
    broker advertises on that listener (``drsvc dev up --links``)."""

    model_config = ConfigDict(extra="forbid")
    #: the site whose clients use this way in
    client_site: str
    #: the site (cluster alias) whose broker it leads to
    server_site: str
    node_id: int
    listener_port: int
    proxy_port: int


class LinksState(BaseModel):
    """The links between the sites of an environment brought up with ``--links``: one Toxiproxy
    server and, per broker and per other site, a listener behind a proxy."""

    model_config = ConfigDict(extra="forbid")
    #: the linked sites: the cluster aliases of the first ``up`` (fixed afterwards)
    sites: list[str]
    host: str = LOCAL_HOST
    api_port: int
    listeners: list[LinkListener] = Field(default_factory=list)
    process: ProcessHandle | None = None

    @property
    def api_addr(self) -> str:
        return f"{self.host}:{self.api_port}"

    def listeners_of(self, server_site: str, node_id: int) -> list[LinkListener]:
        """The listeners a broker opens for the other sites' clients."""
        return [
            li for li in self.listeners if li.server_site == server_site and li.node_id == node_id
        ]

    def between(self, client_site: str, server_site: str) -> list[LinkListener]:
        """The ways from ``client_site``'s clients to ``server_site``'s brokers (by node id)."""
        found = [
            li
            for li in self.listeners
            if li.client_site == client_site and li.server_site == server_site
        ]
        return sorted(found, key=lambda li: li.node_id)


#: the site name of the third Consul server of the per-site layout
WITNESS_SITE = "witness"


class EnvState(StateDocument):
    model_config = ConfigDict(extra="forbid")
    sites: dict[str, KafkaSite] = Field(default_factory=dict)
    #: the agent of the ``single`` layout
    consul: ConsulAgentState | None = None
    consul_layout: ConsulLayout = "single"
    #: the servers of the ``per-site`` layout: one per site of the first ``up``, and a witness
    consul_servers: list[ConsulAgentState] = Field(default_factory=list)
    #: the links between sites (``drsvc dev up --links``); None: sites share loopback directly
    links: LinksState | None = None
    #: every site secured (``drsvc dev up --secure``), chosen when the environment is created
    secure: bool = False

    def consul_agents(self) -> list[ConsulAgentState]:
        """Every Consul agent of the environment, whatever the layout."""
        return (
            list(self.consul_servers)
            if self.consul_layout == "per-site"
            else ([self.consul] if self.consul is not None else [])
        )

    def consul_url(self, agent: ConsulAgentState) -> str:
        """How clients name ``agent``: with ``https://`` on a secured environment."""
        return consul_url(agent.host, agent.http_port, self.secure)

    def consul_agent_of(self, site: str) -> ConsulAgentState | None:
        """The agent a site's processes talk to: its own server, else none of its own."""
        return next((a for a in self.consul_servers if a.site == site), None)


class StateStore:
    """Reads and atomically writes ``state.json`` in the state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / STATE_FILE

    def load(self) -> EnvState:
        return read_state(self.path, EnvState)

    def save(self, state: EnvState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(state.model_dump_json(indent=2))
        tmp.replace(self.path)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on the state directory for the duration of a command."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / LOCK_FILE).open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
