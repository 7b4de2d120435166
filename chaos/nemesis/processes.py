"""Nemeses on processes: kill -9 of a ``drsvc run`` role (a replication worker, the checkpoint
agent, the controller replica) and of a broker, SIGSTOP/SIGCONT of a broker, and slow
transaction commits (the target's transaction coordinator frozen for a moment)."""

from __future__ import annotations

import signal
from collections.abc import Mapping

from chaos.nemesis.base import Nemesis, Timeline
from chaos.nemesis.context import ChaosContext, signal_group
from drsvc.errors import LocalEnvError
from drsvc.kafka.admin import admin_client

#: how long a killed role may take to run again (the supervisor restarts it after 1 s)
ROLE_RESTART_TIMEOUT_S = 60.0


class KillRole(Nemesis):
    """SIGKILL of a role's process group; healed when ``drsvc run`` has restarted it."""

    def __init__(self, timeline: Timeline, context: ChaosContext, role: str, kind: str) -> None:
        super().__init__(timeline, role)
        self.kind = kind
        self.context = context
        self._pid: int | None = None

    def inject(self) -> str:
        pid = self.context.role_pid(self.target)
        if pid is None:
            raise LocalEnvError(f"role {self.target} is not running: nothing to kill")
        signal_group(pid, signal.SIGKILL)
        self._pid = pid
        return f"kill -9 {self.target} (pid {pid})"

    def heal(self) -> str:
        pid = self.context.wait_role_running(self.target, self._pid, ROLE_RESTART_TIMEOUT_S)
        return f"kill -9 {self.target} (pid {self._pid}); restarted by drsvc run as pid {pid}"


class KillBroker(Nemesis):
    """SIGKILL of one broker; healed by starting it again (same ports, same data)."""

    kind = "kill-broker"

    def __init__(self, timeline: Timeline, context: ChaosContext, site: str, node_id: int) -> None:
        super().__init__(timeline, f"{site}/kafka-{node_id}")
        self.context = context
        self.site = site
        self.node_id = node_id

    def inject(self) -> str:
        handle = self.context.broker_handle(self.site, self.node_id)
        signal_group(handle.pid, signal.SIGKILL)
        return f"kill -9 broker {self.node_id} of {self.site} (pid {handle.pid})"

    def heal(self) -> str:
        self.context.restart_environment()
        handle = self.context.broker_handle(self.site, self.node_id)
        return f"kill -9 broker {self.node_id} of {self.site}; restarted as pid {handle.pid}"


class PauseBrokers(Nemesis):
    """SIGSTOP of brokers (frozen: connections stay open, nothing answers); SIGCONT heals."""

    def __init__(
        self, timeline: Timeline, context: ChaosContext, site: str, node_ids: list[int], kind: str
    ) -> None:
        nodes = ",".join(str(n) for n in node_ids)
        super().__init__(timeline, f"{site}/kafka-{nodes}")
        self.kind = kind
        self.context = context
        self.site = site
        self.node_ids = node_ids
        self._pids: list[int] = []

    def inject(self) -> str:
        for node_id in self.node_ids:
            pid = self.context.broker_handle(self.site, node_id).pid
            signal_group(pid, signal.SIGSTOP)
            self._pids.append(pid)
        return f"SIGSTOP broker(s) {self.node_ids} of {self.site}"

    def heal(self) -> None:
        for pid in self._pids:
            signal_group(pid, signal.SIGCONT)


def pause_broker(timeline: Timeline, context: ChaosContext, site: str, node_id: int) -> Nemesis:
    return PauseBrokers(timeline, context, site, [node_id], "pause-broker")


def transaction_coordinators(
    bootstrap: str, settings: Mapping[str, str] | None = None
) -> list[int]:
    """The brokers leading partitions of ``__transaction_state``: the transaction coordinators
    of the cluster (every transactional id hashes to one of those partitions)."""
    admin = admin_client(bootstrap, dict(settings or {}))
    metadata = admin.list_topics("__transaction_state", timeout=10)
    topic = metadata.topics.get("__transaction_state")
    if topic is None or topic.error is not None or not topic.partitions:
        raise LocalEnvError("the cluster has no __transaction_state topic yet")
    return sorted({p.leader for p in topic.partitions.values() if p.leader >= 0})


def slow_commits(timeline: Timeline, context: ChaosContext, site: str) -> Nemesis:
    """Commits on ``site`` stall while its transaction coordinator(s) are frozen: exactly-once
    workers' ``commit_transaction`` (and their produce requests to those brokers) wait until
    SIGCONT; nothing is refused, everything is slow."""
    nodes = transaction_coordinators(*context.admin_of(site))
    return PauseBrokers(timeline, context, site, nodes, "slow-commits")
