"""``drsvc replicate``: run the replication worker of one flow in the foreground."""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Annotated

import typer

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
from drsvc.errors import ConfigError
from drsvc.runtime.liveness import loop_liveness
from drsvc.runtime.metrics_server import serve_metrics
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.metrics import install_replication_metrics
from drsvc.runtime.replication.settings import COMPRESSION_TYPES, worker_settings

log = logging.getLogger("drsvc.replicate")


def register(app: typer.Typer) -> None:
    @app.command()
    def replicate(
        topology_file: TopologyOption,
        flow_id: Annotated[str, typer.Option("--flow", help="The flow to run, e.g. east->west.")],
        compression: Annotated[
            str, typer.Option(help=f"Target compression: {', '.join(COMPRESSION_TYPES)}.")
        ] = "lz4",
        message_timeout_ms: Annotated[
            int | None,
            typer.Option(help="How long a record may wait for the target before it is retried."),
        ] = None,
        report_every_s: Annotated[
            float, typer.Option(help="Seconds between progress lines on stderr (0: none).")
        ] = 10.0,
        throttle_bytes_per_s: Annotated[
            int | None,
            typer.Option(
                help="Cap on bytes/s of keys and values (the flow control can override).", min=1
            ),
        ] = None,
        commit_interval_s: Annotated[
            float | None,
            typer.Option(
                help="How often copy progress is committed: at least-once on the source group "
                "(default 1 s), exactly-once with each slot's transaction (default 0.2 s). "
                "Longer means fewer commits and, at least once, more records copied again after "
                "a crash.",
                min=0.05,
            ),
        ] = None,
        slots: Annotated[
            int | None,
            typer.Option(
                help="Exactly-once flows: number of slots (fixed once the flow has run; default: "
                "what the flow already has, else 8).",
                min=1,
                max=1024,
            ),
        ] = None,
        progress_refresh_s: Annotated[
            float | None,
            typer.Option(
                help="Exactly-once flows: commit every partition's progress again at least this "
                "often, idle and paused ones too (default: one day; keep it well below the "
                "target's offsets.retention.minutes).",
                min=0.1,
            ),
        ] = None,
        sync_keepalive_s: Annotated[
            float | None,
            typer.Option(
                help="Write an idle partition's last copy again as an offset sync after this "
                "long, so its consumers' positions stay translatable after the sync topic's "
                "retention (default: a quarter of that retention; it must be shorter).",
                min=0.1,
            ),
        ] = None,
        sync_retention_ms: Annotated[
            int | None,
            typer.Option(
                help="retention.ms of the flow's offset-sync topic when the worker creates it "
                "(default: 7 days). For tests of keepalive syncs.",
                min=1,
                hidden=True,
            ),
        ] = None,
        transaction_timeout_ms: Annotated[
            int | None,
            typer.Option(
                help="Exactly-once flows: transaction.timeout.ms of the slots' producers "
                "(default 20000).",
                min=100,
            ),
        ] = None,
        metrics_port: MetricsPortOption = None,
        log_format: LogFormatOption = "text",
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Copy one flow of a topology (at least once, or exactly once as the flow says) until
        interrupted (SIGINT/SIGTERM)."""
        configure_logging(verbose, log_format)
        if compression not in COMPRESSION_TYPES:
            raise ConfigError(
                f"--compression must be one of {', '.join(COMPRESSION_TYPES)} (got {compression!r})"
            )
        topology, bootstrap = load_with_bootstraps(
            topology_file, state_dir, consul_role="replicator"
        )
        flow = next((f for f in topology.flows if f.id == flow_id), None)
        if flow is None:
            known = ", ".join(f.id for f in topology.flows) or "none"
            raise ConfigError(f"topology {topology_file} has no flow {flow_id!r} (flows: {known})")
        settings = worker_settings(
            topology,
            flow,
            bootstrap,
            compression=compression,
            message_timeout_ms=message_timeout_ms,
            throttle_bytes_per_s=throttle_bytes_per_s,
            consul_http_addr=resolve_consul(consul, state_dir),
            # Exactly-once progress is committed with each slot's transaction.
            commit_interval_s=commit_interval_s if flow.delivery != "exactly-once" else None,
            transaction_interval_s=commit_interval_s if flow.delivery == "exactly-once" else None,
            slots=slots,
            progress_refresh_s=progress_refresh_s,
            sync_keepalive_s=sync_keepalive_s,
            sync_retention_ms=sync_retention_ms,
            transaction_timeout_ms=transaction_timeout_ms,
        )
        if settings.consul_http_addr is None:
            log.warning(
                "no Consul agent known: pause, resume and throttle commands will not reach "
                "this worker"
                + (
                    ", and this standby flow will copy nothing (a failover starts its topics "
                    "through Consul)"
                    if settings.standby
                    else ""
                )
            )
        worker = ReplicationEngine(settings)

        install_replication_metrics(worker)
        serve_metrics(metrics_port)

        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info(
                "received %s: finishing in-flight records and committing progress",
                signal.Signals(signum).name,
            )
            worker.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        last = {"at": time.monotonic(), "copied": 0}
        liveness, ticked = loop_liveness(), {"at": 0.0}

        def report(w: ReplicationEngine) -> None:
            now = time.monotonic()
            if now - ticked["at"] >= 1.0:  # /healthz: the loop turns (once a second is plenty)
                liveness.tick(f"replication {flow_id}")
                ticked["at"] = now
            if report_every_s <= 0 or now - last["at"] < report_every_s:
                return
            rate = (w.stats.records_copied - last["copied"]) / (now - last["at"])
            log.info(
                "%s: %d records copied (%.0f/s), %d syncs, %d rewinds",
                flow_id,
                w.stats.records_copied,
                rate,
                w.stats.syncs_written,
                w.stats.rewinds,
            )
            last["at"], last["copied"] = now, w.stats.records_copied

        log.info("replicating %s (%s policy, %s)", flow_id, flow.policy, flow.delivery)
        worker.run(on_cycle=report)
        log.info("%s stopped after copying %d records", flow_id, worker.stats.records_copied)
