"""``drsvc translate``: where a consumer group would continue on another cluster, partition by
partition, from the offset syncs of the flows between the two (see ``docs/translation.md``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from drsvc.cli.common import StateDirOption, TopologyOption, load_with_bootstraps
from drsvc.runtime.translation.cluster_view import KafkaClusterView
from drsvc.runtime.translation.group_translation import (
    GroupTranslation,
    PartitionTranslation,
    iso_time,
    select_flows,
    translate_group,
)

HELP = (
    "Translate the committed offsets of a consumer group from one cluster to another.\n\n"
    "Failover (a flow FROM->TO exists): the group's offsets on FROM's topics become positions in "
    "their copies on TO. Failback (a flow TO->FROM exists): its offsets on the copies on FROM "
    "become positions in the originals on TO. Exact means zero records skipped and zero read "
    "twice; otherwise the reason and the offsets affected are shown."
)


def register(app: typer.Typer) -> None:
    @app.command(help=HELP)
    def translate(
        topology_file: TopologyOption,
        group: Annotated[str, typer.Option("--group", "-g", help="The consumer group.")],
        from_alias: Annotated[
            str, typer.Option("--from", help="Cluster the group has committed offsets on.")
        ],
        to_alias: Annotated[str, typer.Option("--to", help="Cluster the group would continue on.")],
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object instead of a table.")
        ] = False,
        timeout_s: Annotated[
            float, typer.Option(help="Seconds to wait for each cluster's answers.", min=1)
        ] = 30.0,
        state_dir: StateDirOption = None,
    ) -> None:
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir)
        # Check the request before connecting anywhere: bad aliases and chains fail fast.
        select_flows(topology, group, from_alias, to_alias)
        views = {
            alias: KafkaClusterView(
                alias, topology.cluster(alias).client_config(bootstrap.get(alias)), timeout_s
            )
            for alias in (from_alias, to_alias)
        }
        result = translate_group(topology, group, from_alias, to_alias, views)
        if as_json:
            typer.echo(json.dumps(result.as_dict(), indent=2))
        else:
            console = Console()
            if not console.is_terminal:  # piped: keep rows whole rather than fit 80 columns
                console = Console(width=200)
            render(result, console)


def render(result: GroupTranslation, console: Console) -> None:
    """A table in the shape of Kafka's consumer-group tool, then what was left out and why."""
    src, dst = result.from_alias, result.to_alias
    table = Table(box=None, pad_edge=False, header_style="bold")
    for header in (
        "GROUP",
        f"TOPIC ({src})",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        f"TOPIC ({dst})",
        "TRANSLATED-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "NOT-REPLICATED",
        "WOULD-LOSE",
        "WOULD-REREAD",
        "TRANSLATION",
    ):
        table.add_column(header, no_wrap=True)
    for p in result.partitions:
        table.add_row(
            result.group,
            p.source_topic,
            str(p.partition),
            str(p.source_offset),
            _number(p.source_end),
            _number(p.source_lag),
            p.topic,
            _number(p.target_offset),
            _number(p.target_end),
            _number(p.target_lag),
            _number(p.not_replicated),
            _number(p.would_lose),
            _number(p.would_reread),
            _verdict(p),
        )
    title = f"consumer group '{result.group}'"
    if result.application is not None:
        title += f" (application {result.application})"
    console.print(f"{title}: {src} -> {dst}")
    if result.partitions:
        console.print(table)
    exact = sum(p.exact for p in result.partitions)
    console.print(f"{exact} of {len(result.partitions)} partition(s) translate exactly")
    if result.as_of_ms is not None and result.partitions:
        console.print(
            f"WOULD-LOSE and WOULD-REREAD: records a failover right now would lose or read "
            f"twice, as of {iso_time(result.as_of_ms)}"
        )
    for unrouted in result.unrouted:
        shown = ",".join(map(str, unrouted.partitions))
        console.print(f"not translated: {unrouted.topic} [{shown}]: {unrouted.reason}")
    for note in result.notes:
        console.print(f"note: {note}")


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _verdict(p: PartitionTranslation) -> Text:
    if p.exact:
        return Text(f"exact ({p.direction})", style="green")
    detail = f", {p.pending} pending" if p.pending else ""
    return Text(
        f"{p.reason}{detail} ({p.direction})",
        style="yellow" if p.target_offset is not None else "red",
    )
