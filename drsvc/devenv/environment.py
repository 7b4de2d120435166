"""``drsvc dev up|down|status``: the embedded local environment as one object.

``up`` is idempotent: what already runs is left alone, what was stopped is restarted on the same
ports with its data, what is new is created. Every process start is recorded in the state file
before the next one begins, so ``down`` can always find everything ``up`` started, even after an
interrupted ``up``.
"""

from __future__ import annotations

import base64
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from drsvc.adapters.consul_access import ConsulAccess, TokenSource
from drsvc.adapters.consul_client import ConsulClient
from drsvc.components import Components, load_components
from drsvc.dev_endpoints import LOCAL_HOST, LocalEndpoints, bootstrap_list, unknown_cluster
from drsvc.devenv import consul_agent, consul_security, kafka_node, toxiproxy
from drsvc.devenv import secure as secure_env
from drsvc.devenv.link_plan import check_sites, plan_listeners, ports_needed, proxy_name
from drsvc.devenv.links import SiteLinks
from drsvc.devenv.processes import is_alive, stop_all
from drsvc.devenv.state import (
    WITNESS_SITE,
    BrokerNode,
    ConsulAgentState,
    ConsulLayout,
    EnvState,
    KafkaSite,
    LinkListener,
    LinksState,
    StateStore,
)
from drsvc.errors import (
    ConfigError,
    CoordinatorUnavailableError,
    KafkaUnavailableError,
    LocalEnvError,
    NotInstalledError,
    ProcessStartError,
)
from drsvc.kafka.admin import admin_client, wait_for_brokers
from drsvc.kafka.credentials import upsert_scram_users
from drsvc.ports import allocate_ports, ensure_free, port_accepts
from drsvc.settings import Settings
from drsvc.topology.consul import ConsulRole
from failover import naming

ALIAS_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class EnvironmentInfo:
    """Where to reach what the local environment runs."""

    clusters: dict[str, str]
    #: an agent that runs (per-site: the first site's, else another that runs)
    consul_http_addr: str | None
    #: per-site layout: every site's agent (the witness included); empty for ``single``
    consul_sites: dict[str, str] = field(default_factory=dict)
    #: with links: the Toxiproxy API that controls them (None: no links)
    links_api: str | None = None
    #: with links: per site, every cluster's bootstrap servers as that site's processes use them
    #: (their own cluster directly, the others through the links)
    bootstrap_from: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, object]:
        document: dict[str, object] = {
            "clusters": {a: {"bootstrap_servers": b} for a, b in sorted(self.clusters.items())},
            "consul": {"http_addr": self.consul_http_addr, "sites": dict(self.consul_sites)},
        }
        if self.links_api is not None:
            document["links"] = {
                "api": self.links_api,
                "bootstrap_from": {s: dict(c) for s, c in sorted(self.bootstrap_from.items())},
            }
        return document


@dataclass(frozen=True)
class ProcessStatus:
    """One managed process as ``drsvc dev status`` reports it."""

    site: str
    role: str
    address: str
    pid: int | None
    running: bool
    listening: bool
    log_file: Path


@dataclass(frozen=True)
class EnvironmentStatus:
    state_dir: Path
    processes: list[ProcessStatus] = field(default_factory=list)

    @property
    def all_running(self) -> bool:
        return bool(self.processes) and all(p.running and p.listening for p in self.processes)


def parse_aliases(text: str) -> list[str]:
    """Parse ``east,west`` into validated, de-duplicated cluster aliases (order kept)."""
    aliases = [a.strip() for a in text.split(",") if a.strip()]
    if not aliases:
        raise ConfigError("--clusters needs at least one cluster alias, e.g. --clusters east,west")
    seen: list[str] = []
    for alias in aliases:
        if not ALIAS_PATTERN.match(alias):
            raise ConfigError(
                f"invalid cluster alias {alias!r}: use 1-32 letters, digits, '-' or '_', "
                "starting with a letter"
            )
        if alias in seen:
            raise ConfigError(f"cluster alias {alias!r} is listed twice in --clusters")
        seen.append(alias)
    return seen


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class _StartingSite:
    """Nodes of a site started by this ``up`` and not yet known to be ready."""

    site: KafkaSite
    nodes: list[BrokerNode]
    log_offsets: dict[int, int]


class LocalEnvironment:
    """The local clusters and Consul agent recorded in one state directory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state_dir = settings.state_dir.resolve()
        self.store = StateStore(self.state_dir)
        #: what clients read of the state: the same answers for ``info`` and for them
        self.endpoints = LocalEndpoints(self.state_dir)

    # ------------------------------------------------------------------ queries

    def info(self) -> EnvironmentInfo:
        state = self.store.load()
        links = state.links
        return EnvironmentInfo(
            clusters={alias: site.bootstrap_servers for alias, site in state.sites.items()},
            consul_http_addr=self.endpoints.consul_http_addr(),
            consul_sites={
                a.site: state.consul_url(a) for a in state.consul_servers if a.site is not None
            },
            links_api=links.api_addr if links is not None else None,
            bootstrap_from=(
                {site: _clusters_from(state, site) for site in links.sites}
                if links is not None
                else {}
            ),
        )

    def bootstrap_from(self, site: str, cluster: str) -> str:
        """The bootstrap servers the processes of ``site`` use to reach ``cluster``: through the
        link between them when the environment has links and they are different sites, else the
        cluster's own (an environment without links has no link to go through)."""
        state = self.store.load()
        self._check_cluster(state, cluster)
        if state.links is not None and site not in state.links.sites:
            raise ConfigError(
                f"{site!r} is not a linked site of the local environment in {self.state_dir} "
                f"(linked: {', '.join(state.links.sites)})"
            )
        return _clusters_from(state, site)[cluster]

    def clusters_from(self, site: str) -> dict[str, str]:
        """Every cluster's bootstrap servers as the processes of ``site`` use them (see
        :meth:`bootstrap_from`): what a topology rendered for that site's roles names."""
        return {alias: self.bootstrap_from(site, alias) for alias in self.store.load().sites}

    def links(self) -> SiteLinks:
        """The links between sites, to cut, heal, delay and throttle them.

        Raises :class:`LocalEnvError` when the environment was not brought up with links, or
        their Toxiproxy server does not run."""
        state = self.store.load()
        if state.links is None:
            raise LocalEnvError(
                f"the local environment in {self.state_dir} was not brought up with links "
                "between its sites; start one with 'drsvc dev up --links' (an environment "
                "keeps what it was created with: 'drsvc dev down --purge' first)"
            )
        if state.links.process is None or not is_alive(state.links.process):
            raise LocalEnvError(
                f"the links' Toxiproxy server of the local environment in {self.state_dir} does "
                "not run; 'drsvc dev up' starts it again"
            )
        return SiteLinks(state.links)

    def _check_cluster(self, state: EnvState, alias: str) -> None:
        if alias not in state.sites:
            raise unknown_cluster(self.state_dir, alias, state.sites)

    def bootstrap_servers(self, alias: str) -> str:
        """Bootstrap servers of a running local cluster (for topologies that omit them)."""
        return self.endpoints.bootstrap_servers(alias)

    def status(self) -> EnvironmentStatus:
        state = self.store.load()
        rows: list[ProcessStatus] = []
        for agent in state.consul_agents():
            rows.append(
                ProcessStatus(
                    site=agent.site or "-",
                    role="consul",
                    address=state.consul_url(agent),
                    pid=agent.process.pid if agent.process else None,
                    running=agent.process is not None and is_alive(agent.process),
                    listening=port_accepts(agent.host, agent.http_port),
                    log_file=consul_agent.log_file(self.state_dir, agent),
                )
            )
        for alias, site in sorted(state.sites.items()):
            for node in site.nodes:
                rows.append(
                    ProcessStatus(
                        site=alias,
                        role=f"kafka-{node.node_id}",
                        address=f"{site.host}:{node.broker_port}",
                        pid=node.process.pid if node.process else None,
                        running=node.process is not None and is_alive(node.process),
                        listening=port_accepts(site.host, node.broker_port),
                        log_file=kafka_node.server_log(self.state_dir, site, node),
                    )
                )
        if state.links is not None:
            links = state.links
            rows.append(
                ProcessStatus(
                    site="-",
                    role="toxiproxy",
                    address=links.api_addr,
                    pid=links.process.pid if links.process else None,
                    running=links.process is not None and is_alive(links.process),
                    listening=port_accepts(links.host, links.api_port),
                    log_file=toxiproxy.log_file(self.state_dir),
                )
            )
        return EnvironmentStatus(state_dir=self.state_dir, processes=rows)

    # ------------------------------------------------------------------ up

    def up(
        self,
        aliases: Sequence[str],
        brokers: int | None = None,
        progress: Progress = _quiet,
        broker_overrides: Mapping[str, Mapping[str, object]] | None = None,
        consul_layout: ConsulLayout | None = None,
        consul_only: bool = False,
        links: bool | None = None,
        secure: bool | None = None,
    ) -> EnvironmentInfo:
        """Start (or keep running) a cluster per alias and the Consul agent(s); wait until ready.

        ``consul_layout``: ``single`` (one server, the default) or ``per-site`` (a server per
        alias of the first ``up`` plus a witness: one quorum of three for two sites, so losing
        a site leaves Consul working). An environment keeps the layout it was created with;
        asking for the other one is an error.

        ``broker_overrides`` maps aliases (of ``aliases``) to broker properties that replace the
        environment's defaults, e.g. ``{"short": {"offsets.retention.minutes": "1"}}``. They are
        recorded with the site, so later ``up`` calls (restarts) keep them. A site created with
        other overrides is refused: static broker settings are part of what the cluster is.

        ``consul_only`` starts (or restarts) the Consul agent(s) alone: ``aliases`` only name the
        sites of a new per-site layout, no broker starts and no service is registered. Tests of
        Consul itself use it to skip the brokers' start; a later ``up`` adds the clusters.

        ``links=True`` creates an environment whose sites (``aliases``, two or more) are joined
        by links that can be cut, delayed and throttled (:meth:`links`): every broker gets a
        listener per other site behind a Toxiproxy proxy, and :meth:`bootstrap_from` gives each
        site's processes the addresses that go through them. Chosen when the environment is
        created, like the Consul layout; ``None`` keeps what it was created with. Without links
        nothing of this exists (no proxy runs, brokers have their one listener).

        ``secure=True`` creates a secured environment (:mod:`drsvc.devenv.secure`): SASL_SSL and
        mutual-TLS listeners only, ACLs with nothing allowed by default, a certificate and a
        SCRAM password per principal; Consul with ACLs denying by default, HTTPS only and a
        token per role (:mod:`drsvc.devenv.consul_security`, :meth:`topology_consul`,
        :meth:`consul_environment`). Chosen when the environment is created, like links.
        """
        if brokers is not None and brokers not in (1, 3):
            raise ConfigError(f"--brokers must be 1 or 3 (got {brokers})")
        overrides = _checked_overrides(aliases, broker_overrides or {})
        with self.store.locked():
            state = self.store.load()
            for alias, wanted in overrides.items():
                _check_same_overrides(state, alias, wanted)
            # Before the layout is chosen: a new per-site layout records its servers at once.
            created = _created(state)
            layout = consul_layout or self.settings.consul_layout
            _choose_layout(state, layout, aliases, explicit=consul_layout)
            self._choose_links(state, links, aliases, brokers)
            self._choose_secure(state, secure, created)
            components = self._components(needs_java=not consul_only)
            self._start_consul(state, components, progress)
            if state.links is not None:
                self._start_links(state, state.links, components, progress)
            kafka_aliases = [] if consul_only else list(aliases)
            # Start every site first and wait afterwards: the JVMs boot in parallel.
            starting = [
                self._start_site(
                    state, alias, brokers, components, progress, overrides.get(alias, {})
                )
                for alias in kafka_aliases
            ]
            for pending in starting:
                if pending is not None:
                    self._await_site(state, pending, progress)
            self._wait_consul_ready(state, progress)
            if state.secure:
                self._secure_consul(state, progress)
            if kafka_aliases:
                self._register_services(state, kafka_aliases, progress)
        return self.info()

    def _components(self, needs_java: bool = True) -> Components:
        if needs_java and shutil.which(self.settings.java) is None:
            raise NotInstalledError(
                f"Java 17 or newer is required to run Kafka, but {self.settings.java!r} is not on "
                "PATH; install a JDK or point DRSVC_JAVA at a java executable"
            )
        return load_components(self.settings.cache_dir)

    def _choose_links(
        self, state: EnvState, wanted: bool | None, aliases: Sequence[str], brokers: int | None
    ) -> None:
        """Plan the links of a new environment; refuse a change of an existing one's."""
        if state.links is not None:
            if wanted is False:
                raise ConfigError(
                    "the local environment in its state directory was brought up with links; "
                    "run 'drsvc dev down --purge' to start over without them"
                )
            extra = [a for a in aliases if a not in state.links.sites]
            if extra:
                raise ConfigError(
                    f"cluster(s) {', '.join(extra)} cannot join an environment with links: its "
                    f"linked sites ({', '.join(state.links.sites)}) are fixed when it is created; "
                    "run 'drsvc dev down --purge' and bring all sites up at once"
                )
            return
        if not wanted:
            return
        if state.sites:
            raise ConfigError(
                "the local environment in its state directory was brought up without links; run "
                "'drsvc dev down --purge' to start over with them"
            )
        check_sites(aliases)
        node_ids = {alias: list(range(1, (brokers or 1) + 1)) for alias in aliases}
        ports = allocate_ports(LOCAL_HOST, 1 + ports_needed(node_ids))
        state.links = LinksState(
            sites=list(aliases),
            host=LOCAL_HOST,
            api_port=ports[0],
            listeners=plan_listeners(node_ids, ports[1:]),
        )
        self.store.save(state)

    def _choose_secure(self, state: EnvState, wanted: bool | None, created: bool) -> None:
        """Secure a new environment if asked; refuse a change of an existing one's."""
        if wanted is None or wanted == state.secure:
            return
        if created:
            have = "secured" if state.secure else "not secured"
            raise ConfigError(
                f"the local environment in its state directory was brought up {have}; run "
                "'drsvc dev down --purge' to start over "
                + ("without --secure" if state.secure else "with --secure")
            )
        state.secure = wanted
        self.store.save(state)

    def _start_links(
        self, state: EnvState, links: LinksState, components: Components, progress: Progress
    ) -> None:
        """Start the links' Toxiproxy server unless it runs; wait until it has every proxy."""
        if links.process is not None and is_alive(links.process):
            progress(f"links: already running (Toxiproxy at {links.api_addr})")
            return
        install = components.require_toxiproxy()
        ensure_free(links.host, links.api_port, "the links' Toxiproxy API")
        for listener in links.listeners:
            ensure_free(links.host, listener.proxy_port, f"link proxy {proxy_name(listener)}")
        toxiproxy.prepare(self.state_dir, links)
        progress(
            f"links: starting Toxiproxy {install.version} at {links.api_addr} "
            f"({len(links.listeners)} proxies between {', '.join(links.sites)})"
        )
        links.process = toxiproxy.start(self.state_dir, links, install)
        self.store.save(state)
        client = toxiproxy.ToxiproxyClient(links.api_addr, timeout_s=2.0)
        names = [proxy_name(li) for li in links.listeners]
        deadline = time.monotonic() + self.settings.start_timeout_s
        while True:
            if not is_alive(links.process):
                raise ProcessStartError(
                    "the links' Toxiproxy server",
                    "the process exited",
                    toxiproxy.log_file(self.state_dir),
                )
            try:
                if not toxiproxy.missing_proxies(client, names):
                    break
            except LocalEnvError:
                pass
            if time.monotonic() > deadline:
                raise ProcessStartError(
                    "the links' Toxiproxy server",
                    f"its proxies are not all up after {self.settings.start_timeout_s:.0f}s",
                    toxiproxy.log_file(self.state_dir),
                )
            time.sleep(0.1)
        progress("links: ready (every link healthy)")

    def _start_consul(self, state: EnvState, components: Components, progress: Progress) -> None:
        if state.consul_layout == "single" and state.consul is None:
            state.consul = self._new_agent(None)
            self.store.save(state)
        agents = state.consul_agents()
        for agent in agents:
            if agent.process is not None and is_alive(agent.process):
                progress(
                    f"consul{_site_label(agent)}: already running at {state.consul_url(agent)}"
                )
                continue
            for what, port in (
                ("the Consul HTTP API", agent.http_port),
                ("Consul server RPC", agent.server_port),
                ("Consul serf LAN", agent.serf_lan_port),
                ("Consul serf WAN", agent.serf_wan_port),
            ):
                ensure_free(agent.host, port, what)
            peers = [a for a in agents if a is not agent]
            secured = (
                consul_security.agent_settings(self._consul_secrets(), agent.http_port)
                if state.secure
                else None
            )
            consul_agent.prepare(self.state_dir, agent, peers, secured)
            progress(
                f"consul{_site_label(agent)}: starting agent {components.consul.version} at "
                f"{state.consul_url(agent)}"
            )
            agent.process = consul_agent.start(self.state_dir, agent, components.consul)
            self.store.save(state)

    @staticmethod
    def _new_agent(site: str | None) -> ConsulAgentState:
        return new_agents([site])[0]

    def _wait_consul_ready(self, state: EnvState, progress: Progress) -> None:
        """Every agent runs, one of them knows a leader, and every server is a Raft peer
        (a restarted server has rejoined)."""
        agents = state.consul_agents()
        deadline = time.monotonic() + self.settings.start_timeout_s
        while True:
            for agent in agents:
                assert agent.process is not None
                if not is_alive(agent.process):
                    raise ProcessStartError(
                        f"the Consul agent{_site_label(agent)}",
                        "the process exited",
                        consul_agent.log_file(self.state_dir, agent),
                    )
            if self._consul_quorum(state, agents):
                names = ", ".join(a.site or "local" for a in agents)
                progress(f"consul: ready ({len(agents)} server(s): {names})")
                return
            if time.monotonic() > deadline:
                raise ProcessStartError(
                    "the Consul agent" + ("s" if len(agents) > 1 else ""),
                    f"no Raft leader with all {len(agents)} server(s) after "
                    f"{self.settings.start_timeout_s:.0f}s",
                    consul_agent.log_file(self.state_dir, agents[0]),
                )
            time.sleep(0.3)

    def _consul_quorum(self, state: EnvState, agents: Sequence[ConsulAgentState]) -> bool:
        for agent in agents:
            client = self._consul_client(state, agent, timeout_s=2.0)
            try:
                if not client.leader() or len(client.peers()) < len(agents):
                    return False
            except CoordinatorUnavailableError:
                return False
        return True

    def _consul_secrets(self) -> consul_security.ConsulSecrets:
        """The Consul secrets of this (secured) environment, made now where missing."""
        files = secure_env.prepare(self.state_dir)
        return consul_security.prepare(files)

    def _consul_admin(self, state: EnvState) -> ConsulAccess | None:
        """How the environment itself reaches its Consul: on a secured one, over HTTPS with the
        management token; None otherwise (the process environment decides, as for any
        client)."""
        if not state.secure:
            return None
        found = consul_security.consul_secrets(secure_env.secure_files(self.state_dir))
        return ConsulAccess(
            scheme="https",
            ca_file=found.ca_file,
            token=TokenSource(
                f"the management token file {found.management_token_file}",
                file=found.management_token_file,
            ),
        )

    def _consul_client(
        self, state: EnvState, agent: ConsulAgentState, timeout_s: float = 5.0
    ) -> ConsulClient:
        return ConsulClient(
            state.consul_url(agent), timeout_s=timeout_s, access=self._consul_admin(state)
        )

    def consul_admin_client(self, site: str | None = None) -> ConsulClient:
        """A client of the environment's Consul with the environment's own access (on a secured
        environment, its management token): for tests and tools that set Consul up."""
        state = self.store.load()
        return self._consul_client(state, self._consul_agent_for(state, site))

    def _secure_consul(self, state: EnvState, progress: Progress) -> None:
        """Once the quorum runs: wait until the management token is known (the leader creates
        it), then create or update the agents' token and one policy and token per role."""
        found = self._consul_secrets()
        client = self._consul_client(state, state.consul_agents()[0], timeout_s=5.0)
        deadline = time.monotonic() + self.settings.start_timeout_s
        while True:
            try:
                client.acl_self()
                break
            except (ConfigError, CoordinatorUnavailableError) as err:
                if time.monotonic() > deadline:
                    raise LocalEnvError(
                        f"Consul's ACL system did not accept the management token after "
                        f"{self.settings.start_timeout_s:.0f}s: {err}"
                    ) from err
                time.sleep(0.3)
        client.upsert_acl_policy(
            consul_security.AGENT_POLICY,
            consul_security.AGENT_RULES,
            "drsvc local environment: the server agents",
        )
        client.upsert_acl_token(
            found.read(found.agent_accessor_file()),
            found.read(found.agent_token_file),
            [consul_security.AGENT_POLICY],
            "drsvc local environment: the server agents",
        )
        for role in consul_security.ROLES:
            name = consul_security.policy_name(role)
            client.upsert_acl_policy(
                name,
                consul_security.rules_document(
                    consul_security.dev_role_rules(role, list(state.sites))
                ),
                f"drsvc local environment: {role}",
            )
            client.upsert_acl_token(
                found.accessor(role),
                found.read(found.token_file(role)),
                [name],
                f"drsvc local environment: {role}",
            )
        progress(
            f"consul: ACLs deny by default; role tokens in {found.root / 'tokens'} "
            f"({', '.join(consul_security.ROLES)})"
        )

    def _consul_agent_for(self, state: EnvState, site: str | None) -> ConsulAgentState:
        """The agent a process of ``site`` uses: that site's server in the per-site layout,
        else the first agent (the single one, or the first site's)."""
        agents = state.consul_agents()
        if not agents:
            raise LocalEnvError(
                f"the local environment in {self.state_dir} has no Consul agent; start it with "
                "'drsvc dev up'"
            )
        if site is None:
            return agents[0]
        return state.consul_agent_of(site) or agents[0]

    def stop_consul_site(self, site: str) -> None:
        """Kill one site's Consul server (SIGKILL, as a lost site); ``up`` brings it back."""
        with self.store.locked():
            state = self.store.load()
            agent = state.consul_agent_of(site)
            if agent is None:
                known = ", ".join(a.site or "-" for a in state.consul_servers) or "none"
                raise ConfigError(
                    f"no Consul server of site {site!r} (the per-site layout has: {known})"
                )
            if agent.process is not None:
                stop_all([agent.process], grace_s=0.0)
            agent.process = None
            self.store.save(state)

    def _start_site(
        self,
        state: EnvState,
        alias: str,
        brokers: int | None,
        components: Components,
        progress: Progress,
        overrides: dict[str, str],
    ) -> _StartingSite | None:
        """Start the nodes of ``alias`` that are not running; None when all already run.

        ``overrides`` are the broker properties of a site created now (an existing site keeps
        the ones it was created with)."""
        site = state.sites.get(alias)
        if site is None:
            count = brokers or 1
            # A secured node has a third port: its mutual-TLS listener.
            per_node = 3 if state.secure else 2
            ports = allocate_ports(LOCAL_HOST, per_node * count)
            nodes = [
                BrokerNode(
                    node_id=i + 1,
                    broker_port=ports[per_node * i],
                    controller_port=ports[per_node * i + 1],
                    mtls_port=ports[per_node * i + 2] if state.secure else None,
                )
                for i in range(count)
            ]
            site = KafkaSite(
                alias=alias,
                host=LOCAL_HOST,
                cluster_id=new_cluster_id(),
                nodes=nodes,
                broker_overrides=overrides,
                secure=state.secure,
            )
            state.sites[alias] = site
            self.store.save(state)
        elif brokers is not None and brokers != len(site.nodes):
            raise ConfigError(
                f"cluster {alias!r} already exists with {len(site.nodes)} broker(s), "
                f"not {brokers}; "
                "run 'drsvc dev down --purge' to start over with a different size"
            )
        to_start = [n for n in site.nodes if n.process is None or not is_alive(n.process)]
        if not to_start:
            progress(f"kafka {alias}: already running at {site.bootstrap_servers}")
            return None
        for node in to_start:
            ensure_free(site.host, node.broker_port, f"Kafka {alias} node {node.node_id}")
            ensure_free(site.host, node.controller_port, f"Kafka {alias} controller {node.node_id}")
            if node.mtls_port is not None:
                ensure_free(site.host, node.mtls_port, f"Kafka {alias} node {node.node_id} TLS")
            for link in _link_listeners(state, alias, node.node_id):
                ensure_free(
                    site.host,
                    link.listener_port,
                    f"Kafka {alias} node {node.node_id} listener for {link.client_site}",
                )
        progress(
            f"kafka {alias}: starting {len(to_start)} node(s), Kafka {components.kafka.version}"
        )
        # A restarted node appends to its old log: readiness counts only what is written after.
        log_offsets = {
            n.node_id: _file_size(kafka_node.server_log(self.state_dir, site, n))
            for n in site.nodes
        }
        pending = _StartingSite(site=site, nodes=to_start, log_offsets=log_offsets)
        secured = (
            secure_env.broker_properties(secure_env.prepare(self.state_dir))
            if site.secure
            else None
        )
        try:
            for node in to_start:
                kafka_node.prepare(
                    self.state_dir,
                    site,
                    node,
                    self.settings.java,
                    components.kafka,
                    _link_listeners(state, alias, node.node_id),
                    secured,
                )
                node.process = kafka_node.start(
                    self.state_dir,
                    site,
                    node,
                    self.settings.java,
                    components.kafka,
                    self.settings.kafka_heap,
                )
                self.store.save(state)
        except BaseException:
            self._abandon(state, pending)
            raise
        return pending

    def _await_site(self, state: EnvState, pending: _StartingSite, progress: Progress) -> None:
        try:
            self._wait_site_ready(pending.site, pending.log_offsets, progress)
        except BaseException:
            self._abandon(state, pending)
            raise

    def _abandon(self, state: EnvState, pending: _StartingSite) -> None:
        """Leave nothing half-started: a site is either ready or its new nodes are stopped."""
        stop_all([n.process for n in pending.nodes if n.process is not None], grace_s=10.0)
        for node in pending.nodes:
            node.process = None
        self.store.save(state)

    def _wait_site_ready(
        self, site: KafkaSite, log_offsets: dict[int, int], progress: Progress
    ) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        for node in site.nodes:
            log = kafka_node.server_log(self.state_dir, site, node)
            while True:
                assert node.process is not None
                if not is_alive(node.process):
                    reason, where = kafka_node.failure_reason(self.state_dir, site, node)
                    raise ProcessStartError(
                        f"Kafka {site.alias} node {node.node_id}", reason, where
                    )
                if _log_contains(log, kafka_node.READY_MARKER, log_offsets.get(node.node_id, 0)):
                    break
                if time.monotonic() > deadline:
                    raise ProcessStartError(
                        f"Kafka {site.alias} node {node.node_id}",
                        f"not ready after {self.settings.start_timeout_s:.0f}s",
                        log,
                    )
                time.sleep(0.2)
        remaining = max(1.0, deadline - time.monotonic())
        bootstrap, settings = self._admin_access(site)
        try:
            wait_for_brokers(bootstrap, len(site.nodes), timeout_s=remaining, extra=settings)
            if site.secure:
                self._set_scram_users(site)
        except KafkaUnavailableError as err:
            log = kafka_node.server_log(self.state_dir, site, site.nodes[0])
            raise ProcessStartError(f"Kafka {site.alias}", str(err), log) from err
        progress(f"kafka {site.alias}: ready at {site.bootstrap_servers}")

    def _admin_access(self, site: KafkaSite) -> tuple[str, dict[str, str]]:
        """Where and how the environment administers ``site``: the plaintext listener, or a
        secured site's mutual-TLS listener as its administrator."""
        mtls = site.mtls_bootstrap_servers
        if mtls is None:
            return site.bootstrap_servers, {}
        return mtls, secure_env.mtls_settings(secure_env.secure_files(self.state_dir))

    def _set_scram_users(self, site: KafkaSite) -> None:
        """Give every principal of the environment its SCRAM password on ``site`` (again at
        each start: a rewritten password file is a rotation)."""
        files = secure_env.secure_files(self.state_dir)
        bootstrap, settings = self._admin_access(site)
        passwords = {p: files.password(p) for p in secure_env.principals(files)}
        upsert_scram_users(
            admin_client(bootstrap, settings),
            passwords,
            mechanism=secure_env.SCRAM_MECHANISM,
            cluster=site.alias,
        )

    def admin_settings(self, alias: str) -> tuple[str, dict[str, str]]:
        """The bootstrap servers and client settings that administer cluster ``alias`` (a
        super user on a secured site): for tests and tools that create topics or ACLs."""
        state = self.store.load()
        self._check_cluster(state, alias)
        return self._admin_access(state.sites[alias])

    def client_settings(self, principal: str) -> dict[str, str]:
        """librdkafka security settings of ``principal`` on a secured environment's clients'
        listener (empty on an environment that is not secured)."""
        state = self.store.load()
        if not state.secure:
            return {}
        return secure_env.sasl_settings(secure_env.secure_files(self.state_dir), principal)

    def topology_security(self, principal: str) -> dict[str, object] | None:
        """A topology cluster's ``security`` block for ``principal`` (None: not secured)."""
        state = self.store.load()
        if not state.secure:
            return None
        return secure_env.topology_security(secure_env.secure_files(self.state_dir), principal)

    def topology_consul(
        self, role: ConsulRole, site: str | None = None
    ) -> dict[str, object] | None:
        """A topology's ``consul:`` block for a process of ``role`` (the environment's Consul
        address, its CA file and the role's token file) when the environment's Consul is secured;
        None while it is not (a process then reaches it by address alone). ``site``: the agent
        of that site in the per-site layout (default: the first site's)."""
        state = self.store.load()
        if not state.secure:
            return None
        url = state.consul_url(self._consul_agent_for(state, site))
        found = consul_security.consul_secrets(secure_env.secure_files(self.state_dir))
        return consul_security.role_topology_block(found, role, url)

    def consul_environment(self, role: ConsulRole, site: str | None = None) -> dict[str, str]:
        """The ``CONSUL_HTTP_*`` variables that let a process of ``role`` (or Consul's own tools)
        reach the environment's Consul; empty while it is not secured. ``site`` as for
        :meth:`topology_consul`."""
        state = self.store.load()
        if not state.secure:
            return {}
        url = state.consul_url(self._consul_agent_for(state, site))
        found = consul_security.consul_secrets(secure_env.secure_files(self.state_dir))
        return consul_security.role_environment(found, role, url)

    def add_principal(self, principal: str) -> None:
        """A certificate and a SCRAM password for ``principal`` (an application's, say), set on
        every running secured site."""
        state = self.store.load()
        if not state.secure:
            raise LocalEnvError(
                f"the local environment in {self.state_dir} is not secured: it has no principals"
            )
        files = secure_env.prepare(self.state_dir, [principal])
        for site in state.sites.values():
            bootstrap, settings = self._admin_access(site)
            upsert_scram_users(
                admin_client(bootstrap, settings),
                {principal: files.password(principal)},
                mechanism=secure_env.SCRAM_MECHANISM,
                cluster=site.alias,
            )

    def _register_services(
        self, state: EnvState, aliases: Sequence[str], progress: Progress
    ) -> None:
        agents = state.consul_agents()
        assert agents
        clients: dict[str, ConsulClient] = {}
        for alias in aliases:
            site = state.sites[alias]
            # Each site's services live on its own agent; sites without one use the first.
            agent = state.consul_agent_of(alias) or agents[0]
            client = clients.setdefault(alias, self._consul_client(state, agent))
            client.register_tcp_service(
                naming.kafka_service(alias),
                address=site.host,
                ports=[n.broker_port for n in site.nodes],
                tags=["drsvc", f"site-{alias}"],
                meta={"bootstrap_servers": site.bootstrap_servers, "site": alias},
                # Consul's checks are one vantage point of the DR controller: a 1 s check
                # notices a lost site a second sooner than the adapter's 2 s default.
                interval="1s",
            )
        deadline = time.monotonic() + 30.0
        pending = [naming.kafka_service(a) for a in aliases]
        reader = self._consul_client(state, agents[0])
        while pending:
            pending = [name for name in pending if not reader.service_passing(name)]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise LocalEnvError(
                    f"Consul health checks of {', '.join(pending)} are not passing after 30s"
                )
            time.sleep(0.5)
        progress(f"consul: services {', '.join(naming.kafka_service(a) for a in aliases)} healthy")

    def stop_site(self, alias: str, grace_s: float = 20.0) -> int:
        """Stop the brokers of one site (a fault for tests and chaos); ``up`` restarts them."""
        with self.store.locked():
            state = self.store.load()
            site = state.sites.get(alias)
            if site is None:
                raise ConfigError(f"cluster {alias!r} is not part of the local environment")
            handles = [n.process for n in site.nodes if n.process is not None]
            stop_all(handles, grace_s=grace_s)
            for node in site.nodes:
                node.process = None
            self.store.save(state)
        return len(handles)

    # ------------------------------------------------------------------ down

    def down(self, purge: bool = False, progress: Progress = _quiet) -> int:
        """Stop every process the state lists; with ``purge`` also delete the state directory.

        Returns how many processes were stopped.
        """
        with self.store.locked():
            state = self.store.load()
            handles = [
                node.process
                for site in state.sites.values()
                for node in site.nodes
                if node.process is not None
            ]
            stopped = [h for h in handles if is_alive(h)]
            if stopped:
                progress(f"kafka: stopping {len(stopped)} broker process(es)")
            try:
                killed = stop_all(handles, grace_s=20.0)
            except OSError as err:
                raise LocalEnvError(f"could not stop every broker: {err}") from err
            if killed:
                progress(f"kafka: {len(killed)} broker(s) did not stop in time and were killed")
            for site in state.sites.values():
                for node in site.nodes:
                    node.process = None
            self.store.save(state)
            agents = [a for a in state.consul_agents() if a.process is not None]
            if agents:
                running = [a.process for a in agents if a.process and is_alive(a.process)]
                if running:
                    progress(f"consul: stopping {len(running)} agent(s)")
                    stopped.extend(running)
                try:
                    stop_all([a.process for a in agents if a.process], grace_s=10.0)
                except OSError as err:
                    raise LocalEnvError(f"could not stop the Consul agents: {err}") from err
                for agent in agents:
                    agent.process = None
                self.store.save(state)
            if state.links is not None and state.links.process is not None:
                proxy = state.links.process
                if is_alive(proxy):
                    progress("links: stopping Toxiproxy")
                    stopped.append(proxy)
                try:
                    stop_all([proxy], grace_s=5.0)
                except OSError as err:
                    raise LocalEnvError(f"could not stop the links' Toxiproxy: {err}") from err
                state.links.process = None
                self.store.save(state)
        if purge:
            shutil.rmtree(self.state_dir, ignore_errors=False)
            progress(f"removed {self.state_dir}")
        return len(stopped)


def _created(state: EnvState) -> bool:
    """Has an ``up`` already recorded clusters or Consul agents in ``state``?"""
    return bool(state.sites) or state.consul is not None or bool(state.consul_servers)


def _link_listeners(state: EnvState, alias: str, node_id: int) -> list[LinkListener]:
    return [] if state.links is None else state.links.listeners_of(alias, node_id)


def _clusters_from(state: EnvState, site: str) -> dict[str, str]:
    """Every cluster's bootstrap servers as seen from ``site`` (see ``bootstrap_from``)."""
    seen: dict[str, str] = {}
    for alias, kafka in state.sites.items():
        ways = [] if state.links is None or alias == site else state.links.between(site, alias)
        seen[alias] = (
            bootstrap_list(state.links.host, (li.proxy_port for li in ways))
            if ways and state.links is not None
            else kafka.bootstrap_servers
        )
    return seen


def _choose_layout(
    state: EnvState, wanted: ConsulLayout, aliases: Sequence[str], explicit: str | None
) -> None:
    """Record the Consul layout of a new environment; refuse another one for an existing one.
    The per-site servers are those of the first ``up``'s sites plus the witness (clusters added
    later register with the first site's agent: the quorum does not change under a running
    environment)."""
    created = bool(state.consul_agents())
    if created:
        if explicit is not None and explicit != state.consul_layout:
            raise ConfigError(
                f"the local environment in its state directory runs Consul as "
                f"{state.consul_layout!r}, not {explicit!r}; run 'drsvc dev down' (with --purge: "
                "the Consul data belongs to the layout) to change it"
            )
        return
    state.consul_layout = wanted
    if wanted == "single":
        return
    if len(aliases) < 2:
        raise ConfigError(
            "--consul-layout per-site needs two or more clusters (sites), e.g. --clusters "
            "east,west: each gets a Consul server and a witness makes the third"
        )
    if WITNESS_SITE in aliases:
        raise ConfigError(f"{WITNESS_SITE!r} names the third Consul server; use another alias")
    state.consul_servers = new_agents([*aliases, WITNESS_SITE])


def new_agents(sites: Sequence[str | None]) -> list[ConsulAgentState]:
    """Agents for ``sites``, with ports allocated in one go (so no two share one)."""
    ports = allocate_ports(LOCAL_HOST, 4 * len(sites))
    return [
        ConsulAgentState(
            site=site,
            host=LOCAL_HOST,
            http_port=ports[4 * i],
            server_port=ports[4 * i + 1],
            serf_lan_port=ports[4 * i + 2],
            serf_wan_port=ports[4 * i + 3],
        )
        for i, site in enumerate(sites)
    ]


def _site_label(agent: ConsulAgentState) -> str:
    return "" if agent.site is None else f" {agent.site}"


def _checked_overrides(
    aliases: Sequence[str], overrides: Mapping[str, Mapping[str, object]]
) -> dict[str, dict[str, str]]:
    unknown = sorted(set(overrides) - set(aliases))
    if unknown:
        raise ConfigError(
            f"broker overrides name cluster(s) {', '.join(unknown)} that are not being started "
            f"(clusters: {', '.join(aliases)})"
        )
    return {
        alias: kafka_node.check_broker_overrides(alias, props) for alias, props in overrides.items()
    }


def _check_same_overrides(state: EnvState, alias: str, wanted: dict[str, str]) -> None:
    """An existing site keeps the broker overrides it was created with; asking for others is an
    error rather than a silent no-op (the caller relies on them, e.g. a short retention)."""
    site = state.sites.get(alias)
    if site is not None and site.broker_overrides != wanted:
        raise ConfigError(
            f"cluster {alias!r} already exists with broker overrides "
            f"{site.broker_overrides or 'none'}, not {wanted or 'none'}; run "
            "'drsvc dev down --purge' to start over, or use another alias"
        )


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_contains(path: Path, marker: str, offset: int) -> bool:
    """True when ``marker`` appears in ``path`` after byte ``offset`` (a rolled log restarts)."""
    try:
        with path.open("rb") as fh:
            if fh.seek(0, 2) >= offset:
                fh.seek(offset)
            else:
                fh.seek(0)
            return marker.encode() in fh.read()
    except OSError:
        return False
