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
from drsvc.api.auth import ApiAuth, load_token, load_tokens
from drsvc.api.limits import ApiLimits
from drsvc.api.service import ApiService
from drsvc.api.tls import tls_files
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
from drsvc.runtime.translation.kept_syncs import KeptSyncs
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
#: how long a stopping API waits for its requests and then for the failovers running on its
#: threads (each its own wait): long enough for a failover to reach its next recorded step
GRACEFUL_SHUTDOWN_S = 30
_DEFAULT_LIMITS = ApiLimits()


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
    exposure_ttl_s: float = _DEFAULT_LIMITS.exposure_ttl_s,
) -> ApiService:
    """The API's service: its reads and its failovers each on an executor of their own kind."""
    # Executors are made per request; the offset indexes are kept across them, so a request
    # reads only the syncs written since the last one instead of whole sync topics.
    kept = KeptSyncs()

    def executor(probe_timeout_s: float) -> FailoverExecutor:
        return connect_executor(
            topology,
            bootstraps,
            consul_address,
            settings,
            catch_up_timeout_s=catch_up_timeout_s,
            probe_timeout_s=probe_timeout_s,
            on_event=lambda message: log.info("%s", message),
            kept=kept,
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
        exposure_ttl_s=exposure_ttl_s,
    )


def allowed_hosts_of(text: str | None) -> list[str] | None:
    """``--allowed-hosts a,b``: the host names, or none (any host)."""
    if text is None:
        return None
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise ConfigError("--allowed-hosts names no host: give host names separated by commas")
    return hosts


def build_auth(
    token_file: Path | None,
    tokens_file: Path | None,
    *,
    public_reads: bool,
    protect_reads: bool,
    environ: Mapping[str, str] | None = None,
) -> ApiAuth:
    """The API's tokens: $DRSVC_API_TOKEN or --token-file (the operator "default") and those
    of --tokens-file."""
    if protect_reads:
        log.warning(
            "--protect-reads is deprecated and does nothing: reads need a token unless "
            "--public-reads is given"
        )
    if protect_reads and public_reads:
        raise ConfigError("--protect-reads and --public-reads contradict each other: drop one")
    named = () if tokens_file is None else load_tokens(tokens_file)
    return ApiAuth.of(load_token(token_file, environ), named, public_reads=public_reads)


def register(app: typer.Typer) -> None:
    @app.command(
        help="Serve the failover API (applications, failovers, flows, clusters, events, "
        "metrics) over HTTP. Reads need a viewer's or an operator's token (unless "
        "--public-reads), changes an operator's: DRSVC_API_TOKEN or --token-file is the "
        "operator 'default', --tokens-file names more; without any token they are refused."
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
            typer.Option(
                "--token-file",
                help="File holding the operator token 'default' (mode 600; instead of "
                "DRSVC_API_TOKEN).",
            ),
        ] = None,
        tokens_file: Annotated[
            Path | None,
            typer.Option(
                "--tokens-file",
                help="File of named tokens, one 'name role secret' per line, role viewer "
                "(reads) or operator (reads and changes); mode 600.",
            ),
        ] = None,
        public_reads: Annotated[
            bool,
            typer.Option("--public-reads", help="Reads (GET) need no token; changes still do."),
        ] = False,
        protect_reads: Annotated[
            bool,
            typer.Option(
                "--protect-reads",
                hidden=True,
                help="Deprecated, does nothing: reads need a token by default.",
            ),
        ] = False,
        max_body_bytes: Annotated[
            int,
            typer.Option(
                "--max-body-bytes",
                min=1024,
                help="Largest request body accepted (413 above it).",
            ),
        ] = _DEFAULT_LIMITS.max_body_bytes,
        max_long_polls: Annotated[
            int,
            typer.Option(
                "--max-long-polls",
                min=1,
                help="Long-polls of /v1/events waiting at once; past it a poll is answered "
                "at once, with Retry-After.",
            ),
        ] = _DEFAULT_LIMITS.max_long_polls,
        exposure_ttl_s: Annotated[
            float,
            typer.Option(
                "--exposure-ttl-s",
                min=0,
                help="How long an application's exposure (?exposure=true) is served again "
                "before it is computed anew.",
            ),
        ] = _DEFAULT_LIMITS.exposure_ttl_s,
        allowed_hosts: Annotated[
            str | None,
            typer.Option(
                "--allowed-hosts",
                help="Answer only requests whose Host header is one of these, separated by "
                "commas (against DNS rebinding); default: any.",
            ),
        ] = None,
        tls_cert: Annotated[
            Path | None,
            typer.Option(
                "--tls-cert",
                help="Serve HTTPS with this PEM certificate (chain); needs --tls-key.",
            ),
        ] = None,
        tls_key: Annotated[
            Path | None,
            typer.Option("--tls-key", help="The PEM private key of --tls-cert (mode 600)."),
        ] = None,
        tls_client_ca: Annotated[
            Path | None,
            typer.Option(
                "--tls-client-ca",
                help="Require client certificates issued by this PEM CA (mutual TLS), on top "
                "of the bearer tokens.",
            ),
        ] = None,
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
        auth = build_auth(
            token_file, tokens_file, public_reads=public_reads, protect_reads=protect_reads
        )
        limits = ApiLimits(
            max_body_bytes=max_body_bytes,
            max_long_polls=max_long_polls,
            exposure_ttl_s=exposure_ttl_s,
        )
        hosts = allowed_hosts_of(allowed_hosts)
        # before anything starts: a file that cannot serve is an error naming it
        tls = tls_files(tls_cert, tls_key, tls_client_ca)
        topology, bootstraps = load_with_bootstraps(
            topology_file, state_dir, consul_role="executor"
        )
        address = resolve_consul(consul, state_dir)
        if address is None:
            raise ConfigError("no Consul agent known: pass --consul host:port")
        settings = Settings.from_env(state_dir=state_dir)

        observer = HeartbeatObserver(topology, bootstraps)
        service = build_service(
            topology,
            bootstraps,
            address,
            settings,
            catch_up_timeout_s,
            observer=observer,
            exposure_ttl_s=exposure_ttl_s,
        )
        chosen = _default_port() if port is None else port
        if not auth.tokens:
            log.warning(
                "no API token configured: %s refused (403)",
                "changes are" if public_reads else "reads and changes are",
            )
        observer.start()
        try:
            config = uvicorn.Config(
                create_app(service, auth, limits, allowed_hosts=hosts),
                host=host,
                port=chosen,
                log_config=None,
                access_log=verbose,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                **({} if tls is None else tls.uvicorn_options()),
            )
            scheme = "http" if tls is None else "https"
            log.info("serving the drsvc API on %s://%s:%d", scheme, host, chosen)
            uvicorn.Server(config).run()
        finally:
            observer.stop()
            stop_failovers(service, GRACEFUL_SHUTDOWN_S)


def stop_failovers(service: ApiService, timeout_s: float) -> None:
    """Let the failovers running on this process's threads go on to their end for up to
    ``timeout_s``, then say which still run: the process stays until they end (their threads are
    not daemons) unless it is killed, and a killed one stays recorded as running, for
    ``drsvc failover --resume`` or the controller to carry on."""
    if not service.running_threads():
        return
    log.info("waiting up to %ds for the failovers running here", timeout_s)
    still = service.join_failovers(timeout_s)
    if still:
        log.warning(
            "still running after %ds: %s; if this process is killed, resume them with "
            "drsvc failover --resume (or let the controller carry them on)",
            timeout_s,
            ", ".join(still),
        )
