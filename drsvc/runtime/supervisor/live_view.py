"""The view on a terminal: a table of roles and flows, redrawn about once a second.

Refreshed from the supervisor loop (``auto_refresh`` off), so rich starts no thread of its own:
the parent-death hook needs a single-threaded supervisor. The supervisor's log messages are
shown in a short "recent events" list under the tables (:class:`RecentEvents` collects them);
the roles' own output stays in their log files.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from drsvc.runtime.supervisor.formatting import format_count, format_duration, format_latency
from drsvc.runtime.supervisor.restart_policy import RoleState
from drsvc.runtime.supervisor.status import RoleStatus, Snapshot

_STATE_STYLES = {
    RoleState.RUNNING: "green",
    RoleState.WAITING: "yellow",
    RoleState.FAILED: "bold red",
    RoleState.STOPPING: "cyan",
    RoleState.STOPPED: "dim",
}


class RecentEvents(logging.Handler):
    """Keeps the last few log messages for the live view."""

    def __init__(self, capacity: int = 8) -> None:
        super().__init__()
        self.events: deque[tuple[str, str]] = deque(maxlen=capacity)
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        # A crash report carries the role's last lines; its first line is the news.
        text = self.format(record).splitlines()[0]
        self.events.append((record.levelname, text))


def _state_text(role: RoleStatus) -> Text:
    text = role.describe_state()
    if role.state is RoleState.WAITING and role.consecutive_failures:
        text += f" (crashed {role.consecutive_failures}x in a row)"
    return Text(text, style=_STATE_STYLES[role.state])


def render(
    snapshot: Snapshot,
    title: str,
    events: RecentEvents | None,
    run_dir: Path,
    applications: Mapping[str, Any] | None = None,
) -> RenderableType:
    """The whole screen for one snapshot (``applications``: each application's active cluster
    and the controller's leader, or the error reading them)."""
    roles = Table(title=title, title_justify="left", expand=False)
    for column in ("role", "state", "pid", "up", "restarts", "metrics", "last exit"):
        roles.add_column(column, justify="right" if column in {"pid", "restarts"} else "left")
    for role in snapshot.roles:
        roles.add_row(
            role.name,
            _state_text(role),
            "-" if role.pid is None else str(role.pid),
            format_duration(role.uptime_s),
            str(role.restarts),
            "-" if role.metrics_port is None else f":{role.metrics_port}",
            role.last_exit or "-",
        )
    parts: list[RenderableType] = [roles]
    if snapshot.flows:
        flows = Table(expand=False)
        flows.add_column("flow")
        flows.add_column("workers", justify="right")
        for column in ("records/s", "lag (records)", "latency", "copied"):
            flows.add_column(column, justify="right")
        for flow in snapshot.flows:
            numbers = flow.numbers
            flows.add_row(
                flow.flow,
                f"{flow.workers_running}/{flow.workers}",
                format_count(numbers.records_per_s),
                format_count(numbers.lag_records),
                format_latency(numbers.latency_ms),
                format_count(numbers.records_copied),
            )
        parts.append(flows)
    if applications:
        parts.append(_applications(applications))
    if events is not None and events.events:
        lines = Text()
        for level, message in events.events:
            style = {"ERROR": "red", "WARNING": "yellow"}.get(level, "")
            lines.append(message + "\n", style=style)
        parts.append(lines)
    footer = "stopping: waiting for roles to exit (Ctrl-C again kills them)"
    if snapshot.stopping and all(role.pid is None for role in snapshot.roles):
        footer = "every role stopped"
    elif not snapshot.stopping:
        footer = f"role logs: {run_dir}/<role>.log    Ctrl-C stops every role"
    parts.append(Text(footer, style="dim"))
    return Group(*parts)


def _applications(applications: Mapping[str, Any]) -> RenderableType:
    if applications.get("applications_error"):
        return Text(f"applications: {applications['applications_error']}", style="yellow")
    leader = applications.get("controller_leader") or "none"
    table = Table(title=f"applications (controller leader: {leader})", title_justify="left",
                  expand=False)  # fmt: skip
    for column in ("application", "active", "epoch", "auto failover"):
        table.add_column(column)
    for row in applications.get("applications", []):
        active = row.get("active")
        table.add_row(
            row["app"],
            Text(active or "none (switching)", style="green" if active else "yellow"),
            str(row.get("epoch")),
            "yes" if row.get("auto_failover") else "no",
        )
    return table


class LiveView:
    """A ``rich`` live display on the terminal."""

    def __init__(
        self,
        title: str,
        run_dir: Path,
        events: RecentEvents | None = None,
        *,
        refresh_every_s: float = 1.0,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
        applications: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self._title = title
        self._applications = applications
        self._run_dir = run_dir
        self._events = events
        self._refresh_every_s = refresh_every_s
        self._clock = clock
        self._live = Live(console=console or Console(), auto_refresh=False, transient=False)
        self._started = False
        self._next_refresh = 0.0
        self._was_stopping = False
        self._last: Snapshot | None = None

    def update(self, snapshot: Snapshot) -> None:
        self._last = snapshot
        now = self._clock()
        if now < self._next_refresh and snapshot.stopping == self._was_stopping:
            return
        self._next_refresh = now + self._refresh_every_s
        self._was_stopping = snapshot.stopping
        if not self._started:
            self._live.start()
            self._started = True
        apps = self._applications() if self._applications is not None else None
        self._live.update(
            render(snapshot, self._title, self._events, self._run_dir, apps), refresh=True
        )

    def close(self) -> None:
        if not self._started:
            return
        if self._last is not None:  # the final state, even if the last update was throttled
            self._live.update(
                render(self._last, self._title, self._events, self._run_dir), refresh=True
            )
        self._live.stop()
