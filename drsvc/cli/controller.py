"""``drsvc controller``: the automated DR trigger (see drsvc.runtime.controller)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Annotated

import typer

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
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
from drsvc.runtime.controller.controller import DEFAULT_CONCURRENT_MOVES, DrController
from drsvc.runtime.controller.observe import ConsulHealth, DirectProbe, HeartbeatArrivals
from drsvc.runtime.controller.vantages import Vantage, require_independent_vantages
from drsvc.runtime.failover.bootstrap import ensure_active_documents
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.runtime.failover.connect import connect_executor
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.runtime.heartbeats.observer import HeartbeatObserver
from drsvc.runtime.metrics_server import serve_metrics
from drsvc.settings import Settings
from failover.failover_plan import DEFAULT_CATCH_UP_TIMEOUT_S

log = logging.getLogger("drsvc.controller")

PROBE_TIMEOUT_S = 2.0
#: A cluster's heartbeats (one a second by default) that have not arrived for this long no
#: longer say it is reachable: three intervals, so one late copy is not taken for silence.
HEARTBEAT_SILENCE_S = 3.0

ReplicaOption = Annotated[
    str | None,
    typer.Option("--replica", help="This replica's name (default: host name and process id)."),
]
ConcurrentOption = Annotated[
    int,
    typer.Option(
        "--max-concurrent-failovers",
        min=1,
        help="How many applications the leader fails over (or resumes) at once; each move runs "
        "on a thread of its own, with its own Consul and Kafka clients.",
    ),
]


def register(app: typer.Typer) -> None:
    @app.command(
        help="Run the automated DR trigger: replicas elect a leader through Consul; the leader "
        "fails over applications with auto_failover when their cluster is unreachable from "
        "every vantage point for the topology's controller.unreachable_after_s."
    )
    def controller(
        topology_file: TopologyOption,
        replica: ReplicaOption = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
        metrics_port: MetricsPortOption = None,
        max_concurrent_failovers: ConcurrentOption = DEFAULT_CONCURRENT_MOVES,
        log_format: LogFormatOption = "text",
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    ) -> None:
        configure_logging(verbose, log_format)
        topology, bootstraps = load_with_bootstraps(
            topology_file, state_dir, consul_role="executor"
        )
        address = resolve_consul(consul, state_dir)
        if address is None:
            raise ConfigError("no Consul agent known: pass --consul host:port")
        name = replica or f"{socket.gethostname()}-{os.getpid()}"
        settings = Settings.from_env(state_dir=state_dir)
        timing = LockTiming(settings.failover_lock_ttl_s, settings.failover_lock_delay_s)
        # A dead cluster's probe waits out its timeout: short, since the decision needs every
        # vantage point to agree anyway, and it is paid on every cycle and twice per failover.
        probes = KafkaFailoverClusters(topology, bootstraps, probe_timeout_s=PROBE_TIMEOUT_S)
        # The probe also asks whether the applications' partitions there have leaders.
        app_topics = sorted({t for app in topology.applications for t in app.topics})
        # Every cluster's heartbeats, read on every cluster: one more vantage point per cluster.
        heartbeats = HeartbeatObserver(topology, bootstraps)
        vantages: list[Vantage] = [
            DirectProbe(name, lambda alias: probes.serves(alias, app_topics)),
            ConsulHealth(lambda: ConsulClient(address)),
            *_heartbeat_vantages(heartbeats),
        ]
        # Refuse to start rather than decide on the controller's own connectivity alone.
        seen = require_independent_vantages(topology, vantages, topology.controller.min_vantages)
        # Clients and executors read the lease and epoch from Consul from the first start on,
        # not from their own copies of the topology (a key that exists is never touched).
        ensure_active_documents(topology, ConsulCoordinator(address))
        for alias, viewpoints in sorted(seen.items()):
            shown = "; ".join(
                f"{v} ({', '.join(sorted(s))})" for v, s in sorted(viewpoints.items())
            )
            log.info("controller %s: %s is seen from %s", name, alias, shown)

        def executor() -> FailoverExecutor:
            # It fails over only what every vantage point, its own probe included, found
            # gone: no second look at the lost cluster holds the switch up. One per move (and
            # one for the loop's reads): Consul and Kafka clients stay on their own thread.
            return connect_executor(
                topology,
                bootstraps,
                address,
                settings,
                catch_up_timeout_s=DEFAULT_CATCH_UP_TIMEOUT_S,
                probe_timeout_s=PROBE_TIMEOUT_S,
                look_at_lost_cluster=False,
            )

        heartbeats.start()
        controller = DrController(
            topology,
            executor(),
            ConsulCoordinator(address),
            vantages,
            replica=name,
            lock_timing=timing,
            executor_factory=executor,
            max_concurrent_moves=max_concurrent_failovers,
        )
        serve_metrics(metrics_port)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        c = topology.controller
        log.info(
            "controller %s: unreachable_after_s=%s cooldown_s=%s interval_s=%s, takeover %.0fs",
            name, c.unreachable_after_s, c.cooldown_s, c.interval_s, timing.takeover_s,
        )  # fmt: skip
        try:
            controller.run(stop)
        finally:
            heartbeats.stop(timeout_s=2.0)


def _heartbeat_vantages(observer: HeartbeatObserver) -> list[HeartbeatArrivals]:
    """A vantage point per cluster that heartbeats are read on (:class:`HeartbeatArrivals`),
    with the clusters whose heartbeats a flow copies there."""
    return [
        HeartbeatArrivals(
            alias,
            observer.freshness,
            HEARTBEAT_SILENCE_S,
            carries=frozenset().union(*topics.values()) - {alias},
        )
        for alias, topics in sorted(observer.routes.items())
    ]
