"""A process recognised by its pid *and* its kernel start time, so that a recycled pid is never
taken for ours.

The local environment records a handle for every process it starts and checks them before it
signals anything; shipped code reads those handles too (the Consul agent a client falls back to
is one that runs), so this lives outside ``drsvc.devenv``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class ProcessHandle(BaseModel):
    """What the state file remembers about a running process."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    pid: int
    start_ticks: int


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; None when no such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name in field 2 may contain spaces, so split after ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def is_alive(handle: ProcessHandle) -> bool:
    """True when the process still runs (and is the one we started, not a recycled pid)."""
    ticks = start_ticks(handle.pid)
    if ticks is None or ticks != handle.start_ticks:
        return False
    try:
        state = Path(f"/proc/{handle.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        _reap(handle.pid)
        return False
    return True


def _reap(pid: int) -> None:
    """Collect an exited child of this very process so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
