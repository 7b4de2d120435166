"""``drsvc run``: every role of a topology as a supervised process tree on this machine."""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.api.tls import tls_files
from drsvc.cli.common import (
    LogFormatOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    resolve_consul,
)
from drsvc.errors import ConfigError, DrsvcError
from drsvc.runtime.failover.app_states import application_states
from drsvc.runtime.failover.bootstrap import ensure_active_documents
from drsvc.runtime.logs import LOG_FORMATS, JsonLogFormatter
from drsvc.runtime.supervisor.live_view import LiveView, RecentEvents
from drsvc.runtime.supervisor.plain_view import PlainView
from drsvc.runtime.supervisor.restart_policy import RestartPolicy
from drsvc.runtime.supervisor.roles import (
    ROLE_KINDS,
    default_role_kinds,
    parse_role_kinds,
    plan_roles,
)
from drsvc.runtime.supervisor.run_lock import hold_run_lock
from drsvc.runtime.supervisor.status import StatusView
from drsvc.runtime.supervisor.supervisor import Outcome, Supervisor, SupervisorSettings
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Topology

log = logging.getLogger("drsvc.run")

SUPERVISOR_LOG = "supervisor.log"


def _log_to_file(path: Path, log_format: str, verbose: bool, extra: logging.Handler | None) -> None:
    """The supervisor's own messages go to ``run/supervisor.log`` in every mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(
        JsonLogFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    if extra is not None:
        root.addHandler(extra)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)


def _application_reader(
    topology: Topology, state_dir: Path
) -> Callable[[], Mapping[str, Any]] | None:
    """For the live view: each application's active cluster and the controller's leader, read
    from Consul at most every 2 s with a short timeout (the view is drawn on the supervisor's
    only thread)."""
    if not topology.applications:
        return None
    address = resolve_consul(None, state_dir)
    if address is None:
        return lambda: {"applications_error": "no Consul agent known"}
    try:
        access = _executor_access(topology, address)
    except ConfigError as err:  # the view shows it; the roles report their own
        message = str(err)
        return lambda: {"applications_error": message}
    coordinator = ConsulCoordinator(address, timeout_s=1.0, access=access)
    cached: dict[str, Any] = {"at": -1e9, "value": {}}

    def read() -> Mapping[str, Any]:
        now = time.monotonic()
        if now - cached["at"] >= 2.0:
            try:
                cached["value"] = application_states(topology, coordinator)
            except DrsvcError as err:
                cached["value"] = {"applications_error": str(err)}
            cached["at"] = now
        value: Mapping[str, Any] = cached["value"]
        return value

    return read


def _executor_access(topology: Topology, address: str) -> ConsulAccess:
    """How this process reaches Consul: Consul's variables, else the executor's token of the
    topology (it reads and writes the applications' keys, as the executor does)."""
    return ConsulAccess.from_env(topology.consul, role="executor", address=address)


def _create_active_documents(topology: Topology, state_dir: Path) -> None:
    """Each application's active document, created from the topology if its key is absent, so
    that clients read the configured lease and an epoch from Consul from the first moment on
    (see :mod:`drsvc.runtime.failover.bootstrap`). A Consul that does not answer yet is no
    reason to stop the roles: the controller creates them when it leads, and an absent key
    still means the preferred cluster under the configured lease."""
    if not topology.applications:
        return
    address = resolve_consul(None, state_dir)
    if address is None:
        log.warning("no Consul agent known: the applications' active documents were not created")
        return
    try:
        coordinator = ConsulCoordinator(
            address, timeout_s=5.0, access=_executor_access(topology, address)
        )
        created = ensure_active_documents(topology, coordinator)
    except DrsvcError as err:
        log.warning("the applications' active documents were not created: %s", err)
        return
    if created:
        log.info("active documents created for %s", ", ".join(created))


def api_role_args(
    tokens_file: Path | None, tls_cert: Path | None, tls_key: Path | None
) -> tuple[str, ...]:
    """The API role's own options from ``drsvc run``'s, with absolute paths (the role runs from
    another directory). The TLS files are checked here, so a file that cannot serve stops
    ``drsvc run`` naming it instead of an API role that fails and is restarted over and over."""
    args: list[str] = []
    if tokens_file is not None:
        args += ["--tokens-file", str(tokens_file.resolve())]
    try:
        tls = tls_files(tls_cert, tls_key, None)
    except ConfigError as err:  # the API's messages name its own options
        raise ConfigError(str(err).replace("--tls-", "--api-tls-")) from err
    if tls is not None:
        args += ["--tls-cert", str(tls.cert.resolve()), "--tls-key", str(tls.key.resolve())]
    return tuple(args)


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        topology_file: TopologyOption,
        workers_per_flow: Annotated[
            int, typer.Option(min=1, help="Replication worker processes per flow.")
        ] = 1,
        roles: Annotated[
            str | None,
            typer.Option(
                help=f"Comma-separated roles to run: {', '.join(ROLE_KINDS)} (default: "
                "replicate, heartbeats, checkpoints, and controller when an application has "
                "auto_failover; api only when named here).",
                show_default=False,
            ),
        ] = None,
        plain: Annotated[
            bool, typer.Option("--plain", help="Log lines instead of the live view, even on a TTY.")
        ] = False,
        summary_every_s: Annotated[
            float,
            typer.Option(help="Without the live view: seconds between flow summaries (0: none)."),
        ] = 10.0,
        grace_s: Annotated[
            float,
            typer.Option(min=0, help="On SIGTERM/SIGINT: how long roles may take to stop."),
        ] = 30.0,
        api_tokens_file: Annotated[
            Path | None,
            typer.Option(
                "--api-tokens-file",
                help="The API role's --tokens-file (named tokens, 'name role secret' a line).",
            ),
        ] = None,
        api_tls_cert: Annotated[
            Path | None,
            typer.Option(
                "--api-tls-cert",
                help="The API role's --tls-cert: serve HTTPS with this PEM certificate (chain); "
                "needs --api-tls-key.",
            ),
        ] = None,
        api_tls_key: Annotated[
            Path | None,
            typer.Option("--api-tls-key", help="The API role's --tls-key (mode 600)."),
        ] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
        state_dir: StateDirOption = None,
        log_format: LogFormatOption = "text",
    ) -> None:
        """Run every role of a topology (replication workers per flow, heartbeats,
        checkpoints, the DR controller, the HTTP API), restarting crashed roles with backoff,
        until SIGINT/SIGTERM."""
        if log_format not in LOG_FORMATS:
            raise ConfigError(
                f"--log-format must be one of {', '.join(LOG_FORMATS)} (got {log_format!r})"
            )
        explicit = parse_role_kinds(roles) if roles is not None else None
        topology_path = topology_file.resolve()
        topology = load_topology(topology_path)
        kinds = explicit if explicit is not None else default_role_kinds(topology)
        state = Settings.from_env(state_dir=state_dir).state_dir.resolve()
        run_dir = state / "run"
        specs = plan_roles(
            topology,
            topology_path,
            kinds,
            workers_per_flow=workers_per_flow,
            state_dir=state,
            log_format=log_format,
            verbose=verbose,
            api_args=api_role_args(api_tokens_file, api_tls_cert, api_tls_key),
        )
        live = not plain and sys.stdout.isatty()
        events = RecentEvents() if live else None
        if not live:
            configure_logging(verbose, log_format)
        _log_to_file(run_dir / SUPERVISOR_LOG, log_format, verbose, events)

        with hold_run_lock(run_dir):
            _create_active_documents(topology, state)
            supervisor = Supervisor(
                specs,
                run_dir,
                topology_path,
                policy=RestartPolicy(),
                settings=SupervisorSettings(
                    grace_s=grace_s, scrape_every_s=1.0 if live else summary_every_s
                ),
            )
            view: StatusView = (
                LiveView(
                    f"drsvc run: {topology.name}",
                    run_dir,
                    events,
                    applications=_application_reader(topology, state),
                )
                if live
                else PlainView(
                    supervisor.log_files, summary_every_s=summary_every_s, log_format=log_format
                )
            )
            supervisor.attach_view(view)

            def stop(signum: int, _frame: FrameType | None) -> None:
                supervisor.request_stop(f"received {signal.Signals(signum).name}")

            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, stop)
            try:
                outcome = supervisor.run()
            finally:
                view.close()
        if outcome is Outcome.ALL_FAILED:
            raise ConfigError(
                f"every role of drsvc run failed on bad input; their logs are in {run_dir}"
            )
        if outcome is Outcome.UNCLEAN:
            log.warning("stopped, but not every role stopped cleanly (see %s)", run_dir)
            raise typer.Exit(1)
