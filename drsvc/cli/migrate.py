"""``drsvc migrate``: a guided migration of topics from one cluster to another
(``docs/migration.md``). So far: ``plan``, which reads both clusters and changes nothing."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from drsvc.cli.common import StateDirOption, TopologyOption, load_with_bootstraps
from drsvc.runtime.migration.plan_reader import MigrationPlanReport, read_migration_plan
from failover.migration_plan import ACTIONS

EXIT_CONFLICTS = 1

MigrationOption = Annotated[
    str | None,
    typer.Option(
        "--migration",
        "-m",
        help="The migration's name in the topology (may be left out when there is one).",
        show_default=False,
    ),
]

PLAN_HELP = (
    "List the source topics a migration selects and say, for each, what the target gets: created"
    " with the same partitions and configs (replication factor as the target's brokers allow, or"
    " as overridden), already there and matching, a conflict (with the reason), or skipped"
    " (internal topics). Reads both clusters, changes nothing. Exits 0 when nothing conflicts,"
    " 1 when something cannot be matched, 2 on bad input."
)

_STYLES = {"create": "green", "match": "cyan", "conflict": "bold red", "skip": "dim"}


def build_app() -> typer.Typer:
    app = typer.Typer(
        help="Migrate topics from one cluster to another (plan; start, status, cutover, verify"
        " and finish are to come).",
        no_args_is_help=True,
    )

    @app.command(help=PLAN_HELP)
    def plan(
        topology_file: TopologyOption,
        migration_name: MigrationOption = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object instead of a table.")
        ] = False,
        timeout_s: Annotated[
            float, typer.Option(help="Seconds to wait for each cluster's answers.", min=1)
        ] = 10.0,
        state_dir: StateDirOption = None,
    ) -> None:
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir)
        migration = topology.migration(migration_name)
        report = read_migration_plan(topology, migration, bootstrap, timeout_s)
        if as_json:
            typer.echo(json.dumps(report.as_dict(), indent=2))
        else:
            console = Console()
            if not console.is_terminal:  # piped: keep rows whole rather than fit 80 columns
                console = Console(width=200)
            render(report, console)
        if report.plan.has_conflicts:
            raise typer.Exit(EXIT_CONFLICTS)

    return app


def render(report: MigrationPlanReport, console: Console) -> None:
    """The plan as a table, then one line of totals."""
    migration = report.migration
    table = Table(
        title=f"migration {migration.name}: {migration.source} -> {migration.target}"
        f" (target brokers: {report.target_brokers})",
        title_justify="left",
    )
    for column in ("topic", "action", "partitions", "rf", "compacted", "configs", "reason"):
        table.add_column(column, justify="right" if column in ("partitions", "rf") else "left")
    for topic in report.plan.topics:
        configs = "\n".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
        skipped = "\n".join(f"not copied: {k} ({why})" for k, why in topic.skipped_configs.items())
        table.add_row(
            topic.topic,
            f"[{_STYLES[topic.action]}]{topic.action}[/]",
            str(topic.partitions),
            str(topic.replication_factor),
            "yes" if topic.compacted else "no",
            "\n".join(part for part in (configs, skipped) if part) or "-",
            topic.reason,
        )
    console.print(table)
    counts = {action: len(report.plan.with_action(action)) for action in ACTIONS}
    console.print(", ".join(f"{n} {action}" for action, n in counts.items()))
    if counts["conflict"]:
        console.print("[bold red]conflicts must be resolved before the migration can start[/]")
