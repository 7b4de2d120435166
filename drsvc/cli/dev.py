"""``drsvc dev``: the embedded local environment (real Kafka clusters and a Consul agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.table import Table

from drsvc.devenv.environment import LocalEnvironment, parse_aliases
from drsvc.devenv.smoke import run_smoke
from drsvc.devenv.state import ConsulLayout
from drsvc.errors import ConfigError
from drsvc.settings import Settings

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="State and logs directory (default .drsvc, or DRSVC_STATE_DIR).",
        show_default=False,
    ),
]


def _environment(state_dir: Path | None) -> LocalEnvironment:
    return LocalEnvironment(Settings.from_env(state_dir=state_dir))


def build_app() -> typer.Typer:
    app = typer.Typer(
        help="Run real Kafka clusters and a Consul agent on this machine.",
        no_args_is_help=True,
    )
    err = Console(stderr=True)

    def progress(message: str) -> None:
        err.print(f"[dim]dev:[/dim] {message}", highlight=False)

    @app.command()
    def up(
        clusters: Annotated[
            str, typer.Option("--clusters", help="Comma-separated cluster aliases.")
        ] = "east,west",
        brokers: Annotated[
            int | None,
            typer.Option("--brokers", help="Brokers per new cluster: 1 or 3 (default 1)."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object with the addresses.")
        ] = False,
        consul_layout: Annotated[
            str | None,
            typer.Option(
                "--consul-layout",
                help="single: one Consul server (default); per-site: one per cluster plus a "
                "witness, so losing a site leaves Consul working. Chosen when the "
                "environment is created (or DRSVC_CONSUL_LAYOUT).",
            ),
        ] = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Start a KRaft cluster per alias and Consul; idempotent."""
        if consul_layout not in (None, "single", "per-site"):
            raise ConfigError(f"--consul-layout must be single or per-site (got {consul_layout!r})")
        env = _environment(state_dir)
        info = env.up(
            parse_aliases(clusters),
            brokers=brokers,
            progress=progress,
            consul_layout=cast("ConsulLayout | None", consul_layout),
        )
        if as_json:
            typer.echo(json.dumps(info.to_json_dict()))
            return
        for alias, bootstrap in sorted(info.clusters.items()):
            typer.echo(f"{alias}: {bootstrap}")
        typer.echo(f"consul: {info.consul_http_addr}")
        for site, address in sorted(info.consul_sites.items()):
            typer.echo(f"consul {site}: {address}")

    @app.command()
    def down(
        purge: Annotated[
            bool, typer.Option("--purge", help="Also delete the state directory and all data.")
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Stop every process the local environment started."""
        env = _environment(state_dir)
        stopped = env.down(purge=purge, progress=progress)
        typer.echo(f"stopped {stopped} process(es)")

    @app.command()
    def status(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Show what runs; exit 1 when something recorded is not running."""
        env = _environment(state_dir)
        report = env.status()
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "state_dir": str(report.state_dir),
                        "all_running": report.all_running,
                        "processes": [
                            {
                                "site": p.site,
                                "role": p.role,
                                "address": p.address,
                                "pid": p.pid,
                                "running": p.running,
                                "listening": p.listening,
                                "log_file": str(p.log_file),
                            }
                            for p in report.processes
                        ],
                    }
                )
            )
        else:
            table = Table(title=f"drsvc dev environment ({report.state_dir})")
            for column in ("site", "role", "address", "pid", "state", "log"):
                table.add_column(column)
            for p in report.processes:
                state = (
                    "running"
                    if p.running and p.listening
                    else ("starting" if p.running else "stopped")
                )
                table.add_row(p.site, p.role, p.address, str(p.pid or "-"), state, str(p.log_file))
            Console().print(table)
            if not report.processes:
                typer.echo("nothing is set up here; start it with 'drsvc dev up'")
        if not report.all_running:
            raise typer.Exit(1)

    @app.command()
    def smoke(state_dir: StateDirOption = None) -> None:
        """Produce and consume a record on every cluster and round-trip a Consul key."""
        env = _environment(state_dir)
        for result in run_smoke(env.info()):
            typer.echo(
                f"{result.cluster}: record produced and consumed in {result.round_trip_ms:.0f} ms"
            )
        typer.echo("consul: KV write and read ok")

    return app
