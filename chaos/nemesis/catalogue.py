"""Every fault kind a schedule may name, and how each becomes a :class:`Nemesis`."""

from __future__ import annotations

from collections.abc import Mapping

from chaos.nemesis.base import Nemesis, Timeline
from chaos.nemesis.context import ChaosContext
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
}

#: kinds that need an environment brought up with links between sites
NEEDS_LINKS = frozenset({"partition", "latency"})


def build(
    kind: str, params: Mapping[str, str], timeline: Timeline, context: ChaosContext
) -> Nemesis:
    """The nemesis of one schedule step."""
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
