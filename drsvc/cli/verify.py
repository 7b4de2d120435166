"""``drsvc verify``: check what the clusters hold against a workload's histories, on Spark
(see ``docs/chaos.md``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from drsvc.cli.common import StateDirOption, TopologyOption, load_with_bootstraps
from drsvc.components import load_components
from drsvc.errors import ConfigError
from drsvc.settings import Settings
from drsvc.verify import job
from drsvc.verify.kafka_options import cluster_read_options
from drsvc.verify.spark import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_EXECUTOR_MEMORY,
    DEFAULT_MASTER,
    parse_conf,
    verification_session,
)
from drsvc.verify.verdict import CHECKS, Verdict

HELP = (
    "Check the topics of a topology's clusters against a workload's histories, with Spark.\n\n"
    "Every record the produced history says was acknowledged must be found, once and in order, "
    "with its bytes, on its topic and on the copy each flow makes of it; nothing may loop; "
    "consumer groups must neither skip nor (after a planned failover) re-read records; the "
    "recovery point must be the one reported; no application may write or commit on a cluster "
    "after another one was activated for it (two_active). Exits 1 when a check fails."
)


def register(app: typer.Typer) -> None:
    @app.command(help=HELP)
    def verify(
        topology_file: TopologyOption,
        history: Annotated[
            Path,
            typer.Option(
                "--history", help="History directory the workload wrote.", show_default=False
            ),
        ],
        master: Annotated[
            str,
            typer.Option(
                help="Spark master: local[N], or a cluster's (spark://HOST:PORT, yarn, "
                "k8s://URL; the driver runs here, see docs/chaos.md)."
            ),
        ] = DEFAULT_MASTER,
        driver_memory: Annotated[
            str, typer.Option(help="Spark driver memory (local mode).")
        ] = DEFAULT_DRIVER_MEMORY,
        executor_memory: Annotated[
            str, typer.Option(help="Memory of each executor (cluster masters).")
        ] = DEFAULT_EXECUTOR_MEMORY,
        spark_conf: Annotated[
            list[str] | None,
            typer.Option(
                "--conf",
                help="A Spark setting KEY=VALUE (repeatable), e.g. spark.jars.packages.",
                show_default=False,
            ),
        ] = None,
        shuffle_partitions: Annotated[
            int, typer.Option(help="Spark shuffle partitions.", min=1)
        ] = 4,
        exactly_once: Annotated[
            bool, typer.Option("--exactly-once", help="Duplicates fail the run too.")
        ] = False,
        max_hops: Annotated[
            int, typer.Option(help="Most flows a record may cross (more is a loop).", min=1)
        ] = 1,
        sample: Annotated[int, typer.Option(help="Violations shown per check.", min=0)] = 10,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object (the verdict).")
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        if not history.is_dir():
            raise ConfigError(f"history directory {history} does not exist")
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir)
        # Each cluster is read with its own security block (the verifier's principal, say):
        # refused here, before Spark starts, when Spark's Kafka client cannot be given it.
        kafka_options = cluster_read_options(topology, bootstrap)
        conf = {"spark.executor.memory": executor_memory, **parse_conf(spark_conf or [])}
        jars = load_components(Settings.from_env().cache_dir).spark_kafka.jars
        started = time.monotonic()
        with verification_session(
            master,
            jars=jars,
            shuffle_partitions=shuffle_partitions,
            driver_memory=driver_memory,
            conf=conf,
        ) as spark:
            spark_started = time.monotonic() - started
            verdict = job.check_history(
                spark,
                topology,
                bootstrap,
                history,
                kafka_options,
                max_hops=max_hops,
                exactly_once=exactly_once,
                sample=sample,
            )
        if as_json:
            document = verdict.as_dict()
            document["spark_start_s"] = round(spark_started, 1)
            typer.echo(json.dumps(document, indent=2, sort_keys=False))
        else:
            render(verdict, Console())
        if not verdict.passed:
            raise typer.Exit(1)


def render(verdict: Verdict, console: Console) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("CHECK")
    table.add_column("VIOLATIONS", justify="right")
    table.add_column("")
    for name in CHECKS:
        count = verdict.checks.get(name, 0)
        table.add_row(name, str(count), "FAILED" if name in verdict.failed else "")
    console.print(table)
    if verdict.rpo_records is not None:
        console.print(
            f"recovery point: {verdict.rpo_records} records, reported "
            f"{verdict.rpo_reported_records}" + (" (FAILED)" if "rpo" in verdict.failed else "")
        )
    for name, rows in verdict.samples.items():
        for row in rows:
            console.print(f"  {name}: {json.dumps(row, default=str)}", soft_wrap=True)
    console.print(
        f"{verdict.counts.get('acknowledged', 0)} acknowledged records checked in "
        f"{verdict.elapsed_s:.1f} s: " + ("PASSED" if verdict.passed else "FAILED")
    )
