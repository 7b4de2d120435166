"""``drsvc heartbeats``: emit heartbeats on every cluster of a topology and watch their freshness.

As a role it runs until SIGTERM/SIGINT. With ``--once`` it only watches (it does not emit, so it
cannot make a cluster look alive) for a few seconds and prints the freshness of every
(observer, source) pair.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from drsvc.cli.common import (
    LogFormatOption,
    MetricsPortOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    load_with_bootstraps,
)
from drsvc.runtime.heartbeats.observer import HeartbeatObserver, ObserverSettings
from drsvc.runtime.heartbeats.report import freshness_report
from drsvc.runtime.heartbeats.runner import HeartbeatRunner, check_timing
from drsvc.runtime.metrics_server import serve_metrics

log = logging.getLogger("drsvc.heartbeats")


def _stop_on_signals(stop: threading.Event) -> None:
    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def register(app: typer.Typer) -> None:
    @app.command("heartbeats")
    def heartbeats_command(
        topology_file: TopologyOption,
        interval_s: Annotated[
            float, typer.Option("--interval-s", help="Seconds between heartbeats.", min=0.01)
        ] = 1.0,
        stale_after_s: Annotated[
            float,
            typer.Option(
                "--stale-after-s",
                help="A source whose heartbeats have not advanced for this long is stale.",
            ),
        ] = 5.0,
        once: Annotated[
            bool,
            typer.Option(
                "--once",
                help="Only watch (no emitting) for --watch-s seconds, print freshness, exit.",
            ),
        ] = False,
        watch_s: Annotated[
            float | None,
            typer.Option(
                "--watch-s",
                help="With --once: how long to watch (default: --stale-after-s plus one"
                " interval, enough to tell fresh from stale).",
                min=0.1,
                show_default=False,
            ),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="With --once: one JSON object on stdout.")
        ] = False,
        metrics_port: MetricsPortOption = None,
        log_format: LogFormatOption = "text",
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Write a heartbeat to every cluster each interval and report, per observing cluster and
        source, how long since its heartbeats last advanced (until SIGINT/SIGTERM)."""
        configure_logging(verbose, log_format)
        check_timing(interval_s, stale_after_s)
        topology, bootstrap = load_with_bootstraps(topology_file, state_dir)
        stop = threading.Event()
        _stop_on_signals(stop)
        serve_metrics(metrics_port)
        if once:
            observer = HeartbeatObserver(
                topology, bootstrap, ObserverSettings(stale_after_s=stale_after_s)
            )
            watched = watch_s if watch_s is not None else stale_after_s + interval_s
            observer.start()
            try:
                stop.wait(watched)
            finally:
                observer.stop()
            freshness = observer.freshness()
            if as_json:
                report = freshness_report(freshness, observer.expected(), stale_after_s, watched)
                typer.echo(json.dumps(report))
            else:
                for (seen_on, source), fresh in sorted(freshness.items()):
                    typer.echo(
                        f"{seen_on} <- {source}: {fresh.state.value} ({fresh.seconds:.1f}s,"
                        f" last offset {fresh.last_offset})"
                    )
            return
        runner = HeartbeatRunner(
            topology, bootstrap, interval_s=interval_s, stale_after_s=stale_after_s
        )
        log.info(
            "heartbeats every %gs on %s; stale after %gs",
            interval_s,
            ", ".join(sorted(topology.clusters)),
            stale_after_s,
        )
        runner.run(stop)
        log.info("heartbeats stopped")
