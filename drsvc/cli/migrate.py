"""``drsvc migrate``: a guided migration of topics from one cluster to another
(``docs/migration.md``): ``plan`` (reads both clusters, changes nothing), ``start`` (creates the
topics, then copies in the foreground until finished), ``status``, ``cutover`` (one application,
as a planned failover), ``verify`` (Spark) and ``finish`` (stops the copy, deletes nothing)."""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table

from drsvc.cli.common import (
    ConsulOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    load_with_bootstraps,
    os_user,
    resolve_consul,
)
from drsvc.components import load_components
from drsvc.errors import ConfigError, RefusedError
from drsvc.runtime.migration.context import MigrationContext, migration_context
from drsvc.runtime.migration.copier import MigrationCopier
from drsvc.runtime.migration.cutover import cutover as run_cutover
from drsvc.runtime.migration.finish import finish_migration
from drsvc.runtime.migration.plan_reader import MigrationPlanReport, read_migration_plan
from drsvc.runtime.migration.positions import migration_check
from drsvc.runtime.migration.start import prepare_start
from drsvc.runtime.migration.status import (
    MigrationStatus,
    app_phases,
    migration_apps,
    read_migration_status,
)
from drsvc.settings import Settings
from drsvc.verify.migration_job import verify_migration
from drsvc.verify.spark import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER
from failover.failover_plan import DEFAULT_CATCH_UP_TIMEOUT_S
from failover.migration_plan import ACTIONS
from failover.migration_progress import TopicProgress
from failover.requester import RequestedBy, RequesterKind

log = logging.getLogger("drsvc.migrate")

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
        help="Migrate topics from one cluster to another: plan, start, status, cutover, verify,"
        " finish.",
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
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir, consul_role="executor")
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

    register_workflow(app)
    _verify_command(app)
    return app


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _context(
    topology_file: Path,
    name: str | None,
    consul: str | None,
    state_dir: Path | None,
    catch_up_timeout_s: float = DEFAULT_CATCH_UP_TIMEOUT_S,
) -> MigrationContext:
    topology, bootstrap = load_with_bootstraps(topology_file, state_dir, consul_role="executor")
    address = resolve_consul(consul, state_dir)
    if address is None:
        raise ConfigError("no Consul agent known: pass --consul host:port")
    return migration_context(
        topology,
        name,
        bootstrap,
        address,
        Settings.from_env(state_dir=state_dir),
        catch_up_timeout_s=catch_up_timeout_s,
        on_event=lambda message: print(message, file=sys.stderr, flush=True),
    )


def _refused(reason: str, as_json: bool, **fields: object) -> None:
    if as_json:
        typer.echo(json.dumps({**fields, "state": "refused", "reason": reason}))
    print(f"drsvc: refused: {reason}", file=sys.stderr)
    raise typer.Exit(EXIT_CONFLICTS)


def register_workflow(app: typer.Typer) -> None:  # noqa: PLR0915 (one closure per command)
    @app.command(
        help="Create the planned topics on the target (refused, creating nothing, when the plan"
        " has a conflict), record the migration as started, then copy its topics with a one-way"
        " identity flow (provenance headers on every copy) in the foreground, showing per topic"
        " the lag and the time to catch up, until SIGINT/SIGTERM or drsvc migrate finish. Run it"
        " again to resume; several processes share the partitions."
    )
    def start(
        topology_file: TopologyOption,
        migration_name: MigrationOption = None,
        progress_every_s: Annotated[
            float, typer.Option(help="Seconds between progress reports.", min=0.5)
        ] = 5.0,
        prepare_only: Annotated[
            bool,
            typer.Option(
                "--prepare-only",
                help="Create the topics and record the start, but copy nothing here (another"
                " process copies).",
            ),
        ] = False,
        take_over_mm2: Annotated[
            bool,
            typer.Option(
                "--take-over-mm2",
                help="Continue where a stopped MirrorMaker 2 (identity names) left its copy,"
                " from its committed progress and offset syncs, copying nothing again; refused,"
                " saying why, when that cannot be placed exactly (docs/migration.md).",
            ),
        ] = False,
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        configure_logging(verbose)
        ctx = _context(topology_file, migration_name, consul, state_dir)
        try:
            report = prepare_start(
                ctx.base, ctx.migration, ctx.bootstrap, ctx.store, take_over_mm2=take_over_mm2
            )
        except RefusedError as err:
            _refused(str(err), False)
        log.info(
            "migration %s: created %s; already matching: %s",
            ctx.migration.name,
            ", ".join(report.created) or "nothing",
            ", ".join(t.topic for t in report.plan.plan.with_action("match")) or "nothing",
        )
        if report.takeover is not None:
            for reason in report.takeover.as_dict()["decisions"]:
                log.info("taking over from MirrorMaker 2: %s", reason)
        if prepare_only:
            typer.echo(json.dumps(report.as_dict(), indent=2))
            return
        show = _progress_display()
        copier = MigrationCopier(
            ctx.topology,
            ctx.migration,
            ctx.bootstrap,
            ctx.store,
            ctx.consul_address,
            progress_every_s=progress_every_s,
            on_progress=show,
        )

        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s: committing what was copied", signal.Signals(signum).name)
            copier.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log.info(
            "migration %s: copying %s -> %s (identity names)",
            ctx.migration.name,
            ctx.migration.source,
            ctx.migration.target,
        )
        copier.run()
        log.info(
            "migration %s: %s after copying %d records",
            ctx.migration.name,
            "finished" if copier.finished else "copy stopped",
            copier.engine.stats.records_copied,
        )

    @app.command(
        help="The migration's state, its copy per partition (as kafka-consumer-groups"
        " --describe shows the flow's group) and each application's phase."
    )
    def status(
        topology_file: TopologyOption,
        migration_name: MigrationOption = None,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        ctx = _context(topology_file, migration_name, consul, state_dir)
        found = read_migration_status(
            ctx.topology, ctx.migration, ctx.bootstrap, ctx.store, ctx.executor
        )
        if as_json:
            typer.echo(json.dumps(found.as_dict(), indent=2))
        else:
            render_status(found)
        if found.flow.error is not None:
            raise typer.Exit(EXIT_CONFLICTS)

    @app.command(
        help="Move one application from the source to the target as a planned failover, once"
        " nothing of its topics lags (refused with the reason otherwise, changing nothing)."
        " Exit 0 completed, 1 refused or rolled back, 2 bad input."
    )
    def cutover(
        topology_file: TopologyOption,
        app_name: Annotated[str, typer.Option("--app", "-a", help="The application.")],
        migration_name: MigrationOption = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Check and print the plan; change nothing.")
        ] = False,
        wait_s: Annotated[
            float,
            typer.Option(
                help="How long the check waits for the copy to reach the source's end.", min=0
            ),
        ] = 10.0,
        catch_up_timeout_s: Annotated[
            float,
            typer.Option(
                "--catch-up-timeout",
                help="How long the failover waits for the last records after the producers"
                " stopped, before rolling back.",
                min=1,
            ),
        ] = DEFAULT_CATCH_UP_TIMEOUT_S,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        ctx = _context(topology_file, migration_name, consul, state_dir, catch_up_timeout_s)
        try:
            check, found_doc = run_cutover(
                ctx.executor,
                ctx.store,
                ctx.reader(),
                ctx.migration,
                app_name,
                wait_s=wait_s,
                dry_run=dry_run,
                requested_by=RequestedBy.of(RequesterKind.CLI, os_user()),
            )
        except RefusedError as err:
            _refused(str(err), as_json, app=app_name, to=ctx.migration.target)
        document: dict[str, Any] = {**found_doc, "check": check.as_dict()}
        if as_json:
            typer.echo(json.dumps(document, indent=2))
        else:
            typer.echo(
                f"cutover of {app_name} to {ctx.migration.target}: {document['state']}"
                + (" (dry run: nothing was changed)" if dry_run else "")
            )
            for group in document.get("groups", []):
                typer.echo(
                    f"  group {group['group']} {group['topic']}-{group['partition']}"
                    f" -> {group['target_offset']}"
                )
        if not dry_run and document["state"] != "completed":
            raise typer.Exit(EXIT_CONFLICTS)

    @app.command(
        help="Stop the migration's copy for good once every application of it is on the"
        " target (refused otherwise). Nothing is deleted on either cluster."
    )
    def finish(
        topology_file: TopologyOption,
        migration_name: MigrationOption = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Check only; change nothing.")
        ] = False,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        ctx = _context(topology_file, migration_name, consul, state_dir)
        apps = migration_apps(ctx.topology, ctx.migration)
        phases = app_phases(ctx.executor, ctx.migration, apps)
        try:
            state = finish_migration(
                ctx.store, ctx.topology.namespace, ctx.migration, phases, dry_run=dry_run
            )
        except RefusedError as err:
            _refused(str(err), as_json, migration=ctx.migration.name)
        document = {"migration": ctx.migration.name, "dry_run": dry_run, **state.as_dict()}
        if as_json:
            typer.echo(json.dumps(document, indent=2))
        else:
            typer.echo(
                f"migration {ctx.migration.name}: "
                + ("may finish (dry run: nothing changed)" if dry_run else state.state)
                + "; nothing was deleted on either cluster"
            )


def _verify_command(app: typer.Typer) -> None:
    @app.command(
        help="Compare the migration's source and target with Spark: per partition the records"
        " and their copies (counts, first and last offsets, checksums of key, value, headers"
        " and timestamp; missing, altered, duplicated copies) and per group its positions."
        " Exit 0 when it passes, 1 when it does not."
    )
    def verify(
        topology_file: TopologyOption,
        migration_name: MigrationOption = None,
        as_json: JsonOption = False,
        master: Annotated[str, typer.Option(help="Spark master.")] = DEFAULT_MASTER,
        driver_memory: Annotated[
            str, typer.Option(help="Spark driver memory (local mode).")
        ] = DEFAULT_DRIVER_MEMORY,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        check = migration_check(_context(topology_file, migration_name, consul, state_dir))
        jars = load_components(Settings.from_env(state_dir=state_dir).cache_dir).spark_kafka.jars
        document = verify_migration(
            check, jars=jars, master=master, driver_memory=driver_memory, shuffle_partitions=2
        )
        if as_json:
            typer.echo(json.dumps(document, indent=2))
        else:
            _render_verdict(document)
        if not document["passed"]:
            raise typer.Exit(EXIT_CONFLICTS)


def _render_verdict(document: dict[str, Any]) -> None:
    console = Console()
    table = Table(box=None, pad_edge=False)
    for column in ("TOPIC", "PARTITION", "RECORDS", "FIRST", "LAST", "COPIES", "MISSING",
                   "ALTERED", "DUPLICATES", "ON TARGET ONLY", "CHECKSUM"):  # fmt: skip
        table.add_column(column)
    for p in document["partitions"]:
        same = p["source_checksum"] == p["copies_checksum"]
        table.add_row(
            p["topic"], str(p["partition"]), str(p["source_records"]), str(p["source_first"]),
            str(p["source_last"]), str(p["copies"]), str(p["missing"]), str(p["altered"]),
            str(p["duplicates"]), str(p["target_only"]), "same" if same else "DIFFERENT",
        )  # fmt: skip
    console.print(table)
    groups = Table(box=None, pad_edge=False)
    for column in ("GROUP", "TOPIC", "PARTITION", "SOURCE", "LANDS AT", "TARGET", "STATE"):
        groups.add_column(column)
    for g in document["groups"]:
        groups.add_row(
            g["group"], g["topic"], str(g["partition"]), str(g["source_position"]),
            str(g["translated"]), str(g["target_position"]), g["state"],
        )  # fmt: skip
    console.print(groups)
    for problem in document["problems"]:
        console.print(f"[red]{problem}[/]")
    console.print(f"verdict: {document['verdict']} ({document['elapsed_s']} s)")


def _progress_display() -> Callable[[list[TopicProgress]], None]:
    """Progress bars per topic on a terminal, else one log line per topic."""
    console = Console(stderr=True)
    if not console.is_terminal:

        def lines(rows: list[TopicProgress]) -> None:
            for row in rows:
                eta = _eta(row)
                log.info(
                    "%s: %d copied, lag %d, %.0f records/s, %s",
                    row.topic, row.copied, row.lag, row.records_per_s, eta,
                )  # fmt: skip

        return lines
    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn(
            "{task.completed:>9.0f}/{task.total:<9.0f} {task.fields[rate]} {task.fields[eta]}"
        ),
        console=console,
        transient=False,
    )
    bars.start()
    tasks: dict[str, TaskID] = {}

    def show(rows: list[TopicProgress]) -> None:
        for row in rows:
            eta = _eta(row)
            rate = f"{row.records_per_s:.0f}/s"
            total = row.copied + row.lag
            if row.topic not in tasks:
                tasks[row.topic] = bars.add_task(row.topic, total=total, rate=rate, eta=eta)
            bars.update(tasks[row.topic], completed=row.copied, total=total, rate=rate, eta=eta)

    return show


def _eta(row: TopicProgress) -> str:
    if row.lag == 0:
        return "caught up"
    if row.eta_s is not None and not row.keeping_up:
        return f"caught up in {row.eta_s:.0f}s"
    return "keeping up" if row.keeping_up else "not gaining on the source"


def render_status(found: MigrationStatus) -> None:
    """The kafka-consumer-groups style table, then the applications."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    doc = found.as_dict()
    console.print(
        f"migration {doc['migration']}: {doc['source']} -> {doc['target']}, {doc['state']},"
        f" lag {doc['lag'] if doc['lag'] is not None else '?'}"
    )
    if found.flow.error:
        console.print(f"[bold red]{found.flow.error}[/]")
    table = Table(box=None, pad_edge=False)
    for column in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                   "CONSUMER-ID", "HOST"):  # fmt: skip
        table.add_column(column, justify="right" if "OFFSET" in column or column in
                         ("PARTITION", "LAG") else "left")  # fmt: skip
    for p in found.flow.partitions:
        table.add_row(
            found.flow.progress_group,
            p.topic,
            str(p.partition),
            "-" if p.replicated_offset is None else str(p.replicated_offset),
            "-" if p.source_end_offset is None else str(p.source_end_offset),
            "-" if p.lag is None else str(p.lag),
            "-" if p.owner is None else p.owner.member_id,
            "-" if p.owner is None else p.owner.host,
        )
    console.print(table)
    apps = Table(box=None, pad_edge=False)
    for column in ("APPLICATION", "PHASE", "ACTIVE", "FAILOVER", "GROUPS"):
        apps.add_column(column)
    for row in found.apps:
        apps.add_row(
            str(row["app"]),
            str(row["phase"]),
            str(row["active"] or "none"),
            str(row["running"] or "-"),
            ", ".join(str(g) for g in row["groups"]),  # type: ignore[attr-defined]
        )
    console.print(apps)


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
