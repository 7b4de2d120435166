"""Running the checkpoint stream of a topology: load the state, then follow and emit until stopped.

Start-up, before faust runs (so that nothing is emitted on top of state that was not read):

1. each stream's checkpoints topic is created if missing (compacted) and read to its end: the
   newest checkpoint of every key is the stream's state, the floor monotonicity builds on;
2. each sync topic is read whole into its offset index.

Then one faust worker runs the apps of :mod:`~drsvc.runtime.checkpoints.faust_apps` until SIGTERM
or SIGINT, and the process exits 0. Reading the checkpoints without running the stream is
:mod:`~drsvc.runtime.checkpoints.flow_checkpoints` (which loads no faust).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from drsvc.adapters.consul_client import ConsulClient
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.faust_app import ignore_missing_topics, new_worker, set_client_log_level
from drsvc.runtime.checkpoints.checkpoint_topic import ensure_checkpoints_topic, read_checkpoints
from drsvc.runtime.checkpoints.faust_apps import (
    StreamRunner,
    add_stream_timer,
    add_sync_agent,
    build_app,
)
from drsvc.runtime.checkpoints.flow_checkpoints import client_configs
from drsvc.runtime.checkpoints.group_reader import KafkaGroupReader
from drsvc.runtime.checkpoints.group_sync_hook import GroupSyncHook
from drsvc.runtime.checkpoints.metrics import CheckpointMetrics
from drsvc.runtime.checkpoints.plan import CheckpointPlan, plan_checkpoints
from drsvc.runtime.checkpoints.settings import CheckpointSettings
from drsvc.runtime.checkpoints.stream import CheckpointStream
from drsvc.runtime.checkpoints.sync_follower import SyncFollower
from drsvc.topology.models import Topology

__all__ = ["PreparedService", "prepare_service", "run_service"]

log = logging.getLogger(__name__)


@dataclass
class PreparedService:
    """Everything loaded and built, ready to run."""

    plan: CheckpointPlan
    settings: CheckpointSettings
    apps: dict[str, Any]
    runners: list[StreamRunner]
    followers: list[SyncFollower]


def prepare_service(
    topology: Topology,
    bootstrap: Mapping[str, str],
    settings: CheckpointSettings,
    *,
    flow_id: str | None = None,
    consul: ConsulClient | None = None,
    metrics: CheckpointMetrics | None = None,
) -> PreparedService:
    """Read the state and the syncs, and build the faust apps (blocking; see the module doc)."""
    plan = plan_checkpoints(topology, flow_id)
    clients = client_configs(topology, bootstrap)
    metrics = metrics or CheckpointMetrics()
    states = {}
    for stream_plan in plan.streams:
        target = stream_plan.flow.target
        ensure_checkpoints_topic(
            clients[target],
            stream_plan.checkpoints_topic,
            cluster=target,
            timeout_s=settings.timeout_s,
        )
        read = read_checkpoints(
            clients[target],
            stream_plan.checkpoints_topic,
            cluster=target,
            timeout_s=max(60.0, settings.timeout_s),
        )
        states[stream_plan.flow_id] = read.checkpoints
        log.info(
            "checkpoints of %s: %d key(s) read from %s on %s",
            stream_plan.flow_id,
            len(read.checkpoints),
            stream_plan.checkpoints_topic,
            target,
        )
    followers = {
        (source.cluster, source.topic): SyncFollower(
            source, clients[source.cluster], settings.timeout_s
        )
        for source in plan.sync_sources
    }
    for follower in followers.values():
        follower.load()
    # The faust apps take the same resolved settings as the rest of the process.
    kafka = KafkaClients.for_configs(clients)
    apps = {alias: build_app(alias, kafka, settings) for alias in plan.clusters}
    for (cluster, _topic), follower in followers.items():
        add_sync_agent(apps[cluster], follower)
    runners = []
    for stream_plan in plan.streams:
        flow = stream_plan.flow
        upstream = stream_plan.upstream
        stream = CheckpointStream(
            topology,
            stream_plan,
            followers[(stream_plan.downstream.cluster, stream_plan.downstream.topic)],
            None if upstream is None else followers[(upstream.cluster, upstream.topic)],
            states[flow.id],
        )
        runner = StreamRunner(
            stream,
            KafkaGroupReader(
                flow.source, clients[flow.source], settings.timeout_s, settings.max_group_consumers
            ),
            KafkaGroupReader(flow.target, clients[flow.target], settings.timeout_s),
            metrics,
            GroupSyncHook(topology, flow, clients[flow.target], consul),
            resync_s=settings.group_sync_retry_s,
        )
        add_stream_timer(apps[flow.target], runner, settings.interval_s)
        runners.append(runner)
    return PreparedService(plan, settings, apps, runners, list(followers.values()))


def run_service(prepared: PreparedService, *, verbose: bool = False) -> NoReturn:
    """Run the apps in one faust worker until SIGTERM/SIGINT; exits the process (0 when stopped
    by a signal)."""
    set_client_log_level(verbose=verbose)
    missing = [f for f in prepared.followers if not f.read.exists]
    for follower in missing:
        log.info(
            "offset-sync topic %s does not exist on %s yet (flow %s has copied nothing): "
            "followed as soon as it appears",
            follower.source.topic,
            follower.source.cluster,
            follower.source.flow_id,
        )
    if missing:
        ignore_missing_topics(f.source.topic for f in missing)
    apps = list(prepared.apps.values())
    log.info(
        "checkpointing %s every %.1fs",
        ", ".join(r.stream.flow_id for r in prepared.runners),
        prepared.settings.interval_s,
    )
    worker = new_worker(apps, verbose=verbose)
    worker.execute_from_commandline()
    raise SystemExit(0)  # not reached: the worker exits the process
