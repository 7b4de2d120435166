"""``drsvc demo``: the whole service on the embedded default, with a disaster-recovery drill
(see :mod:`drsvc.demo.drill`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from drsvc.cli.common import StateDirOption
from drsvc.demo.drill import DemoOptions, run_demo
from drsvc.settings import Settings

DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "active-active.yaml"


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        drill: Annotated[
            bool,
            typer.Option(
                "--drill/--no-drill",
                help="Lose east, fail over automatically, bring it back, fail back, and judge "
                "(default); or just run the service until Ctrl-C.",
            ),
        ] = True,
        topology_file: Annotated[
            Path, typer.Option("--topology", "-t", help="Active/active topology to run.")
        ] = DEFAULT_TOPOLOGY,
        rate: Annotated[
            float, typer.Option(help="Orders per second the application writes.", min=1)
        ] = 100.0,
        threshold_s: Annotated[
            float,
            typer.Option(
                "--threshold-s",
                help="How long east must be unreachable before the controller acts "
                "(production default: 60).",
                min=1,
            ),
        ] = 5.0,
        spark: Annotated[
            bool,
            typer.Option(
                "--spark/--no-spark",
                help="End the drill with the Spark check of both clusters (drsvc verify).",
            ),
        ] = True,
        secure: Annotated[
            bool,
            typer.Option(
                "--secure",
                help="Run on a secured environment (SASL_SSL with SCRAM, ACLs, Consul ACLs over "
                "HTTPS): every role under its own principal with only its grants, the API over "
                "HTTPS. Its environment lives in <state dir>/demo-secure.",
            ),
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Run every role of drsvc on local clusters with an application that follows failovers;
        lose a site, watch the automated failover, fail back, and get the verdict. Its own
        local environment lives in <state dir>/demo (<state dir>/demo-secure with --secure) and
        is started afresh each time."""
        base = Settings.from_env(state_dir=state_dir).state_dir
        options = DemoOptions(
            topology=topology_file,
            # apart from the plain demo's: an environment is secured or not for its whole life
            state_dir=(base / ("demo-secure" if secure else "demo")).resolve(),
            drill=drill,
            rate_per_s=rate,
            threshold_s=threshold_s,
            spark=spark,
            secure=secure,
        )
        code = run_demo(options, Console())
        if code:
            raise typer.Exit(code)
