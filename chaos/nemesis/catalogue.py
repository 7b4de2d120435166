"""Every fault kind a schedule may name, and how each becomes a :class:`Nemesis`."""

from __future__ import annotations

from collections.abc import Mapping

from chaos.control_plane import EXECUTORS, ControlPlane
from chaos.nemesis.base import Nemesis, Timeline
from chaos.nemesis.context import ChaosContext
from chaos.nemesis.control_plane import (
    CutClientConsul,
    KillApi,
    PauseProducer,
    PlannedMove,
    SlowConsulWrites,
    StepClock,
)
from chaos.nemesis.processes import KillBroker, KillRole, pause_broker, slow_commits
from chaos.nemesis.sites import Latency, LoseConsulServer, LoseSite, Partition
from chaos.nemesis.transactions import HangingTransaction

#: fault kind -> what it does (``chaos list`` shows it)
FAULT_KINDS: Mapping[str, str] = {
    "kill-worker": "kill -9 of a replication worker (flow=SRC->TGT); drsvc run restarts it",
    "kill-checkpoints": "kill -9 of the checkpoint agent; drsvc run restarts it",
    "kill-controller": "kill -9 of the DR controller replica; drsvc run restarts it",
    "kill-broker": "kill -9 of a broker (site, node), started again at heal",
    "pause-broker": "SIGSTOP of a broker (site, node), SIGCONT at heal",
    "slow-commits": "SIGSTOP of a site's transaction coordinator broker(s): commits stall",
    "hanging-transaction": "a source transaction begun, written, never committed; producer killed",
    "lose-consul-server": "kill -9 of a site's Consul server, started again at heal",
    "lose-site": "every broker of a site killed; the site returns at heal",
    "partition": "the network between two sites cut (needs links)",
    "latency": "latency added between two sites (needs links)",
    "planned-failover": "the application moved to another cluster (to, executor=cli|api|"
    "stepped-clock); heal waits until it completed",
    "planned-failback": "the application moved back to its preferred cluster (the same)",
    "slow-consul-writes": "the executor's Consul requests delayed (ms) from the next failover's "
    "start until its none is committed",
    "cut-client-consul": "the application's clients cut off from Consul, back at heal",
    "pause-producer": "SIGSTOP of the application's producer process (full queue), SIGCONT once "
    "another cluster is active",
    "kill-api": "kill -9 of the api role while its failover waits out the lease; heal waits "
    "until the failover was resumed and completed",
    "step-clock": "the stepped executor's wall clock moved (s) forward during the lease wait",
}

#: kinds that act on the control plane of a planned-moves scenario
CONTROL_PLANE_KINDS = frozenset(
    {
        "planned-failover",
        "planned-failback",
        "slow-consul-writes",
        "cut-client-consul",
        "pause-producer",
        "kill-api",
        "step-clock",
    }
)

#: kinds that need an environment brought up with links between sites
NEEDS_LINKS = frozenset({"partition", "latency"})


def build(
    kind: str, params: Mapping[str, str], timeline: Timeline, context: ChaosContext
) -> Nemesis:
    """The nemesis of one schedule step."""
    if kind in CONTROL_PLANE_KINDS:
        return _control_plane(kind, params, timeline, context)
    if kind == "kill-worker":
        source, target = params["flow"].split("->")
        role = f"replicate.{source}-to-{target}.{params.get('worker', '1')}"
        return KillRole(timeline, context, role, kind)
    if kind == "kill-checkpoints":
        return KillRole(timeline, context, "checkpoints", kind)
    if kind == "kill-controller":
        return KillRole(timeline, context, "controller", kind)
    if kind == "kill-broker":
        return KillBroker(timeline, context, params["site"], int(params.get("node", "1")))
    if kind == "pause-broker":
        return pause_broker(timeline, context, params["site"], int(params.get("node", "1")))
    if kind == "slow-commits":
        return slow_commits(timeline, context, params["site"])
    if kind == "hanging-transaction":
        topic = context.extra["topics"][params.get("topic", "0")]
        return HangingTransaction(
            timeline,
            context,
            params["site"],
            topic,
            timeout_ms=int(params.get("timeout_ms", "10000")),
        )
    if kind == "lose-consul-server":
        return LoseConsulServer(timeline, context, params["site"])
    if kind == "lose-site":
        return LoseSite(timeline, context, params["site"])
    if kind == "partition":
        return Partition(timeline, context, params["a"], params["b"])
    if kind == "latency":
        return Latency(
            timeline,
            context,
            params["a"],
            params["b"],
            int(params["ms"]),
            int(params.get("jitter_ms", "0")),
        )
    raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})")


def _control_plane(
    kind: str, params: Mapping[str, str], timeline: Timeline, context: ChaosContext
) -> Nemesis:
    plane = context.extra.get("control_plane")
    if not isinstance(plane, ControlPlane):
        raise ValueError(f"fault kind {kind!r} needs a planned-moves scenario")
    if kind in ("planned-failover", "planned-failback"):
        executor = params.get("executor", "cli")
        if executor not in EXECUTORS:
            raise ValueError(f"{kind}: executor must be one of {', '.join(EXECUTORS)}")
        return PlannedMove(timeline, plane, params["to"], executor, kind == "planned-failback")
    if kind == "slow-consul-writes":
        return SlowConsulWrites(timeline, plane, int(params.get("ms", "4500")))
    if kind == "cut-client-consul":
        return CutClientConsul(timeline, plane)
    if kind == "pause-producer":
        process = context.extra.get("paused_producer")
        if process is None:
            raise ValueError("pause-producer needs the scenario's producer process")
        return PauseProducer(timeline, plane, process, float(params.get("after_s", "1")))
    if kind == "kill-api":
        return KillApi(timeline, plane, context, float(params.get("resume_after_s", "60")))
    return StepClock(timeline, plane, float(params.get("s", "5")))
