"""``drsvc api``: the failover API over HTTP (see docs/api.md)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth, load_token
from drsvc.api.service import ApiService
from drsvc.cli.common import (
    ConsulOption,
    LogFormatOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    load_with_bootstraps,
    resolve_consul,
)
from drsvc.cli.failover import FAILOVER_PROBE_TIMEOUT_S
from drsvc.errors import ConfigError
from drsvc.runtime.failover.connect import connect_executor
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.heartbeats.observer import HeartbeatObserver
from drsvc.settings import Settings
from drsvc.topology.models import Topology
from failover.failover_plan import DEFAULT_CATCH_UP_TIMEOUT_S

log = logging.getLogger("drsvc.api")

PORT_ENV = "DRSVC_API_PORT"
DEFAULT_PORT = 8080
#: how long the API's reads wait for a cluster to answer (a gone cluster must not hold every
#: page); dry runs and failovers probe as ``drsvc failover`` does (FAILOVER_PROBE_TIMEOUT_S), so
#: the API and the CLI judge "does the active cluster answer?" alike
READ_PROBE_TIMEOUT_S = 2.0


def _default_port() -> int:
    text = os.environ.get(PORT_ENV, "")
    if not text:
        return DEFAULT_PORT
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"{PORT_ENV} must be a port number (got {text!r})")
    return int(text)


def build_service(
    topology: Topology,
    bootstraps: Mapping[str, str],
    consul_address: str,
    settings: Settings,
    catch_up_timeout_s: float,
    *,
    observer: HeartbeatObserver | None = None,
) -> ApiService:
    """The API's service: its reads and its failovers each on an executor of their own kind."""

    def executor(probe_timeout_s: float) -> FailoverExecutor:
        return connect_executor(
            topology,
            bootstraps,
            consul_address,
            settings,
            catch_up_timeout_s=catch_up_timeout_s,
            probe_timeout_s=probe_timeout_s,
            on_event=lambda message: log.info("%s", message),
        )

    return ApiService(
        topology,
        bootstraps,
        lambda: executor(READ_PROBE_TIMEOUT_S),
        ConsulCoordinator(consul_address),
        ConsulClient(consul_address),
        observer=observer,
        # A planned failover is refused when its active cluster does not answer: a probe
        # shorter than the CLI's would refuse through the API what the CLI runs.
        mover_factory=lambda: executor(FAILOVER_PROBE_TIMEOUT_S),
    )


def register(app: typer.Typer) -> None:
    @app.command(
        help="Serve the failover API (applications, failovers, flows, clusters, events, "
        "metrics) over HTTP. Changes need the bearer token of DRSVC_API_TOKEN or --token-file; "
        "without one they are refused."
    )
    def api(
        topology_file: TopologyOption,
        host: Annotated[
            str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")
        ] = "127.0.0.1",
        port: Annotated[
            int | None,
            typer.Option(help=f"Port (default: ${PORT_ENV} or {DEFAULT_PORT}).", min=0, max=65535),
        ] = None,
        token_file: Annotated[
            Path | None,
            typer.Option("--token-file", help="File holding the API token (mode 600)."),
        ] = None,
        protect_reads: Annotated[
            bool, typer.Option("--protect-reads", help="Reads need the token too.")
        ] = False,
        catch_up_timeout_s: Annotated[
            float,
            typer.Option(
                "--catch-up-timeout",
                min=1,
                help="Planned failovers: how long to wait for replication before rolling back.",
            ),
        ] = DEFAULT_CATCH_UP_TIMEOUT_S,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
        log_format: LogFormatOption = "text",
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    ) -> None:
        configure_logging(verbose, log_format)
        auth = ApiAuth(load_token(token_file), protect_reads)
        topology, bootstraps = load_with_bootstraps(topology_file, state_dir)
        address = resolve_consul(consul, state_dir)
        if address is None:
            raise ConfigError("no Consul agent known: pass --consul host:port")
        settings = Settings.from_env(state_dir=state_dir)

        observer = HeartbeatObserver(topology, bootstraps)
        service = build_service(
            topology, bootstraps, address, settings, catch_up_timeout_s, observer=observer
        )
        chosen = _default_port() if port is None else port
        if auth.token is None:
            log.warning("no API token configured: failover and failback are refused (403)")
        observer.start()
        try:
            config = uvicorn.Config(
                create_app(service, auth),
                host=host,
                port=chosen,
                log_config=None,
                access_log=verbose,
                timeout_graceful_shutdown=5,
            )
            log.info("serving the drsvc API on http://%s:%d", host, chosen)
            uvicorn.Server(config).run()
        finally:
            observer.stop()
