"""Pieces shared by commands: loading a topology and resolving its clusters' addresses."""

from __future__ import annotations

import getpass
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from drsvc.adapters.consul_access import (
    first_consul_address,
    topology_consul_in_use,
    use_topology_consul,
)
from drsvc.dev_endpoints import LocalEndpoints
from drsvc.errors import ConfigError
from drsvc.runtime.logs import LOG_FORMATS, JsonLogFormatter
from drsvc.settings import Settings
from drsvc.topology.consul import ConsulRole
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Topology

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="State directory of the local environment (default .drsvc, or DRSVC_STATE_DIR).",
        show_default=False,
    ),
]

TopologyOption = Annotated[
    Path, typer.Option("--topology", "-t", help="Topology file (YAML).", show_default=False)
]


def load_with_bootstraps(
    path: Path, state_dir: Path | None, *, consul_role: ConsulRole | None = None
) -> tuple[Topology, dict[str, str]]:
    """Load a topology and the bootstrap servers of every cluster: the file's own, or, where it
    omits them, those of the running ``drsvc dev`` environment. ``consul_role``: the command
    reaches Consul as that role, with the topology's ``consul`` block (its address, TLS files and
    the role's token) as the default of every Consul client it builds."""
    topology = load_topology(path)
    if consul_role is not None:
        use_topology_consul(topology.consul, consul_role)
    bootstrap: dict[str, str] = {}
    local: LocalEndpoints | None = None
    for alias, cluster in topology.clusters.items():
        if cluster.bootstrap_servers is not None:
            bootstrap[alias] = cluster.bootstrap_servers
            continue
        if local is None:
            local = _local_endpoints(state_dir)
        bootstrap[alias] = local.bootstrap_servers(alias)
    return topology, bootstrap


ConsulOption = Annotated[
    str | None,
    typer.Option(
        "--consul",
        help="Consul HTTP address host:port, optionally after http:// or https:// (default: "
        "DRSVC_CONSUL_HTTP_ADDR, CONSUL_HTTP_ADDR, the topology's consul.address, else the "
        "local environment's agent).",
        show_default=False,
    ),
]


def resolve_consul(
    option: str | None, state_dir: Path | None, topology: Topology | None = None
) -> str | None:
    """The Consul HTTP address to use, first given wins: the flag, ``DRSVC_CONSUL_HTTP_ADDR``,
    ``CONSUL_HTTP_ADDR`` (as Consul's own tools read it), the topology's ``consul.address``,
    else the local environment's agent (None: there is none)."""
    block = topology_consul_in_use() if topology is None else topology.consul
    configured = None if block is None else block.address
    return first_consul_address(option, os.environ, configured) or (
        _local_endpoints(state_dir).consul_http_addr()
    )


def _local_endpoints(state_dir: Path | None) -> LocalEndpoints:
    """The local environment of ``--state-dir``, else of DRSVC_STATE_DIR."""
    return LocalEndpoints(Settings.from_env(state_dir=state_dir).state_dir)


MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        help="Serve Prometheus metrics on this port (0: any free port; default: none).",
        min=0,
        max=65535,
        show_default=False,
    ),
]

LogFormatOption = Annotated[
    str,
    typer.Option(
        "--log-format",
        help="text (for people) or json (one object per line, for log pipelines).",
    ),
]


def configure_logging(verbose: bool, log_format: str = "text") -> None:
    """Log to stderr, as text lines or as JSON objects (``--log-format json``)."""
    if log_format not in LOG_FORMATS:
        raise ConfigError(
            f"--log-format must be one of {', '.join(LOG_FORMATS)} (got {log_format!r})"
        )
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonLogFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])


def os_user() -> str | None:
    """Who runs the command, if the system says (a container may have no name for its uid):
    the name a failover record keeps of who asked for it from the command line."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
