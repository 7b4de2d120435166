"""``drsvc status``: per flow and source partition, how far replication got, the lag, and who
copies it, in the shape of ``kafka-consumer-groups --describe`` (see ``docs/observability.md``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.cli.common import (
    ConsulOption,
    StateDirOption,
    TopologyOption,
    load_with_bootstraps,
    resolve_consul,
)
from drsvc.errors import ConfigError, DrsvcError
from drsvc.runtime.failover.app_states import application_states
from drsvc.runtime.status.flow_status import read_status
from drsvc.runtime.status.report import FlowStatus, StatusReport
from drsvc.topology.models import Topology

HELP = (
    "Show each flow's replication progress per source partition: the replicated offset (next "
    "source offset whose copy is persisted), the source's log end offset, the lag between them "
    "and the worker that owns the partition. Exits 1 if some flow's clusters could not be read."
)


def register(app: typer.Typer) -> None:
    @app.command(help=HELP)
    def status(
        topology_file: TopologyOption,
        flow_id: Annotated[
            str | None,
            typer.Option("--flow", help="Only this flow, e.g. east->west (default: all)."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object instead of tables.")
        ] = False,
        timeout_s: Annotated[
            float, typer.Option(help="Seconds to wait for each cluster's answers.", min=1)
        ] = 10.0,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir, consul_role="executor")
        flows = list(topology.flows)
        if flow_id is not None:
            flows = [flow for flow in flows if flow.id == flow_id]
            if not flows:
                known = ", ".join(f.id for f in topology.flows) or "none"
                raise ConfigError(
                    f"topology {topology_file} has no flow {flow_id!r} (flows: {known})"
                )
        report = read_status(topology, flows, bootstrap, timeout_s)
        apps = _applications(topology, resolve_consul(consul, state_dir))
        if as_json:
            typer.echo(json.dumps({**report.as_dict(), **apps}, indent=2))
        else:
            console = Console()
            if not console.is_terminal:  # piped: keep rows whole rather than fit 80 columns
                console = Console(width=200)
            render(report, console)
            render_applications(apps, console)
        if report.failed:
            raise typer.Exit(1)


def _applications(topology: Topology, consul: str | None) -> dict[str, object]:
    """Each application's active cluster and the controller's leader, from Consul (an error
    here is shown, not fatal: the flows' status stands on its own)."""
    if not topology.applications:
        return {}
    if consul is None:
        return {"applications_error": "no Consul agent known: pass --consul host:port"}
    try:
        return application_states(topology, ConsulCoordinator(consul))
    except DrsvcError as err:
        return {"applications_error": str(err)}


def render_applications(apps: dict[str, object], console: Console) -> None:
    if not apps:
        return
    console.print()
    if "applications_error" in apps:
        console.print(Text(f"applications: {apps['applications_error']}", style="yellow"))
        return
    leader = apps.get("controller_leader") or "none"
    console.print(Text(f"applications (controller leader: {leader})", style="bold"))
    rows: list[dict[str, object]] = apps["applications"]  # type: ignore[assignment]
    for row in rows:
        active = row["active"] or "none (switching)"
        auto = ", auto failover" if row["auto_failover"] else ""
        error = f": {row['error']}" if row.get("error") else ""
        console.print(f"  {row['app']}: active {active}, epoch {row['epoch']}{auto}{error}")


def render(report: StatusReport, console: Console) -> None:
    """Per flow, one line of totals and a table in the shape of Kafka's consumer-group tool."""
    if not report.flows:
        console.print("the topology has no flows")
    for number, flow in enumerate(report.flows):
        if number:
            console.print()
        console.print(_headline(flow))
        if flow.error is not None:
            console.print(Text(f"error: {flow.error}", style="red"))
            continue
        if flow.partitions:
            console.print(_table(flow))


def _headline(flow: FlowStatus) -> Text:
    line = Text(f"flow {flow.flow}", style="bold")
    line.append(
        f" ({flow.delivery}, progress in group '{flow.progress_group}' on {flow.progress_cluster})"
    )
    if flow.error is None:
        line.append(f": {len(flow.partitions)} partition(s), lag {flow.lag}")
        if flow.unknown_partitions:
            line.append(f" (+ {flow.unknown_partitions} partition(s) of unknown lag)")
    return line


def _table(flow: FlowStatus) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for header in (
        "FLOW",
        f"TOPIC ({flow.source})",
        "PARTITION",
        "REPLICATED-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        f"REMOTE-TOPIC ({flow.target})",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ):
        table.add_column(header, no_wrap=True)
    for p in flow.partitions:
        owner = p.owner
        table.add_row(
            flow.flow,
            p.topic,
            str(p.partition),
            _number(p.replicated_offset) if p.progress != "unknown" else "?",
            _number(p.source_end_offset),
            _lag(p.lag),
            p.remote_topic,
            "-" if owner is None else owner.member_id,
            "-" if owner is None else owner.host,
            "-" if owner is None else owner.client_id,
        )
    return table


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _lag(value: int | None) -> Text:
    if value is None:
        return Text("?", style="yellow")
    return Text(str(value), style="green" if value == 0 else "yellow")
