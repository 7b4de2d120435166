"""``drsvc topology``: check a topology file and show what it will do.

The commands only load and print; errors are :class:`drsvc.errors.TopologyError`, which the main
command turns into ``drsvc: error: ...`` and exit code 2.
"""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from drsvc.topology.loader import load_topology
from drsvc.topology.render import describe_topology, render_topology

FileArgument = Annotated[
    Path, typer.Argument(metavar="FILE", help="Topology file (YAML).", show_default=False)
]


def build_app() -> typer.Typer:
    """The ``topology`` sub-app (built on call, never at import time)."""
    app = typer.Typer(
        name="topology",
        help="Validate and inspect topology files.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.command("validate")(validate)
    app.command("show")(show)
    return app


def validate(file: FileArgument) -> None:
    """Check FILE and print a one-line summary; exit 2 with every problem listed if it is wrong."""
    topology = load_topology(file)
    counts = ", ".join(
        _count(len(items), noun)
        for items, noun in (
            (topology.clusters, "cluster"),
            (topology.flows, "flow"),
            (topology.applications, "application"),
        )
    )
    typer.echo(f"ok: {file}: {counts}")


def show(
    file: FileArgument,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
) -> None:
    """Show clusters, flows with the names their copies get, and internal topics."""
    topology = load_topology(file)
    if as_json:
        typer.echo(json.dumps(describe_topology(topology), indent=2))
    else:
        render_topology(topology, Console())


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
