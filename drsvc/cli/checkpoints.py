"""``drsvc checkpoints``: run the checkpoint agents of a topology's flows in the foreground, or
print the checkpoints they wrote (``--once --json``). See ``docs/checkpoints.md``."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from drsvc.adapters.consul_client import ConsulClient
from drsvc.cli.common import (
    ConsulOption,
    LogFormatOption,
    MetricsPortOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    load_with_bootstraps,
    resolve_consul,
)
from drsvc.errors import ConfigError, DrsvcError
from drsvc.runtime.checkpoints.flow_checkpoints import read_flow_checkpoints
from drsvc.runtime.checkpoints.service import prepare_service, run_service
from drsvc.runtime.checkpoints.settings import CheckpointSettings
from drsvc.runtime.metrics_server import serve_metrics
from failover import naming

log = logging.getLogger("drsvc.checkpoints")

HELP = (
    "Follow the consumer groups on each flow's source, translate their committed offsets through "
    "the offset syncs, and keep the translated positions as checkpoints in the compacted topic "
    "<source>.checkpoints.internal on the flow's target; also export, per group and partition, "
    "what a failover right now would lose and read twice. Runs until SIGTERM or SIGINT. With "
    "--once --json, print the checkpoints the topics hold now and exit."
)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""

    @app.command(help=HELP)
    def checkpoints(
        topology_file: TopologyOption,
        flow_id: Annotated[
            str | None,
            typer.Option("--flow", help="Only this flow (e.g. east->west); default: every flow."),
        ] = None,
        interval_s: Annotated[
            float,
            typer.Option(help="Seconds between polls of the groups' committed offsets.", min=0.05),
        ] = 1.0,
        once: Annotated[
            bool, typer.Option("--once", help="Print the current checkpoints and exit.")
        ] = False,
        as_json: Annotated[
            bool, typer.Option("--json", help="With --once: one JSON object on stdout.")
        ] = False,
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
        log_format: LogFormatOption = "text",
        metrics_port: MetricsPortOption = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        configure_logging(verbose, log_format)
        topology, bootstrap = load_with_bootstraps(
            topology_file, state_dir, consul_role="checkpoints"
        )
        if once:
            flows = read_flow_checkpoints(topology, bootstrap, flow_id=flow_id)
            if as_json:
                typer.echo(json.dumps({"flows": flows}, indent=2))
            else:
                _print_checkpoints(flows)
            return
        if as_json:
            raise ConfigError("--json goes with --once (the running agents log instead)")
        serve_metrics(metrics_port)
        data_dir, temporary = _data_dir(state_dir)
        settings = CheckpointSettings(
            data_dir=data_dir,
            interval_s=interval_s,
            app_id_suffix="" if flow_id is None else naming.checkpoints_app_suffix(flow_id),
        )
        try:
            prepared = prepare_service(
                topology,
                bootstrap,
                settings,
                flow_id=flow_id,
                consul=_consul_client(consul, state_dir),
            )
            run_service(prepared, verbose=verbose)
        finally:
            if temporary:
                shutil.rmtree(data_dir, ignore_errors=True)


def _consul_client(option: str | None, state_dir: Path | None) -> ConsulClient | None:
    """The Consul agent for the group offset syncer, if one is known; checkpoints do not need it."""
    try:
        address = resolve_consul(option, state_dir)
    except DrsvcError as err:
        log.debug("no Consul agent for the group offset syncer: %s", err)
        return None
    return ConsulClient(address) if address else None


def _data_dir(state_dir: Path | None) -> tuple[Path, bool]:
    """Where the faust apps' (empty: no tables) data directories go, and whether it is a
    temporary directory to remove at exit: ``<state dir>/checkpoints`` when a state directory is
    given (reused after a crash), else a new directory in the system's temporary directory, never
    the working directory."""
    if state_dir is not None:
        data_dir = state_dir / "checkpoints"
        data_dir.mkdir(parents=True, exist_ok=True)
        return data_dir, False
    return Path(tempfile.mkdtemp(prefix="drsvc-checkpoints-")), True


def _print_checkpoints(flows: list[dict[str, object]]) -> None:
    for flow in flows:
        typer.echo(f"flow {flow['flow']}: {flow['topic']} on {flow['cluster']}")
        groups = flow["groups"]
        assert isinstance(groups, dict)
        if not groups:
            typer.echo("  no checkpoints")
        for group, rows in groups.items():
            for row in rows:
                target = "-" if row["target_offset"] is None else row["target_offset"]
                typer.echo(
                    f"  {group} {row['source_topic']}[{row['partition']}] {row['source_offset']}"
                    f" -> {row['topic']}[{row['partition']}] {target} ({row['reason']})"
                )
