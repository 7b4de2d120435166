"""What the supervisor knows at one moment, for views and for ``roles.json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from drsvc.runtime.supervisor.flow_metrics import FlowNumbers
from drsvc.runtime.supervisor.restart_policy import RoleState


@dataclass(frozen=True)
class RoleStatus:
    """One role as the operator sees it."""

    name: str
    kind: str
    flow: str | None
    state: RoleState
    pid: int | None
    metrics_port: int | None
    restarts: int
    crashes: int
    consecutive_failures: int
    restart_in_s: float | None
    uptime_s: float | None
    last_exit: str | None
    log_file: str
    started_at: float | None
    """Wall-clock time (epoch seconds) the current process started, if one runs."""

    def describe_state(self) -> str:
        """``running``, ``restarting in 4s``, ``failed``: the state in a few words."""
        if self.state is RoleState.WAITING and self.restart_in_s is not None:
            if self.restarts == 0 and self.crashes == 0:
                return "starting"
            return f"restarting in {self.restart_in_s:.0f}s"
        return self.state.value

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "flow": self.flow,
            "state": self.state.value,
            "pid": self.pid,
            "metrics_port": self.metrics_port,
            "restarts": self.restarts,
            "crashes": self.crashes,
            "consecutive_failures": self.consecutive_failures,
            "restart_in_s": None if self.restart_in_s is None else round(self.restart_in_s, 1),
            "last_exit": self.last_exit,
            "log_file": self.log_file,
            "started_at": self.started_at,
        }


@dataclass(frozen=True)
class FlowStatus:
    """One flow: how many of its workers run, and its replication numbers."""

    flow: str
    workers_running: int
    workers: int
    numbers: FlowNumbers = field(default_factory=FlowNumbers)


@dataclass(frozen=True)
class Snapshot:
    roles: tuple[RoleStatus, ...]
    flows: tuple[FlowStatus, ...]
    stopping: bool = False


class StatusView(Protocol):
    """Shows the supervisor's state: a live table, or log lines."""

    def update(self, snapshot: Snapshot) -> None:
        """Called about every tick of the supervisor loop (a fraction of a second)."""

    def close(self) -> None:
        """The supervisor has stopped; show the final state."""
