"""Managed child processes that outlive the ``drsvc`` command which started them.

A process is identified by its pid *and* its kernel start time (:mod:`drsvc.process_handle`),
so a recycled pid is never taken for our broker and never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from drsvc.process_handle import ProcessHandle, is_alive, start_ticks

__all__ = ["ProcessHandle", "is_alive", "spawn", "stop", "stop_all"]


def spawn(
    argv: Sequence[str],
    log_file: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> tuple[ProcessHandle, subprocess.Popen[bytes]]:
    """Start ``argv`` detached in its own session, stdout and stderr appended to ``log_file``."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    ticks = start_ticks(proc.pid)
    return ProcessHandle(pid=proc.pid, start_ticks=ticks if ticks is not None else -1), proc


def stop(handle: ProcessHandle, grace_s: float = 30.0) -> None:
    """SIGTERM the process group, wait up to ``grace_s``, then SIGKILL; return once it is gone."""
    stop_all([handle], grace_s)


def stop_all(handles: Sequence[ProcessHandle], grace_s: float = 30.0) -> list[ProcessHandle]:
    """Stop several processes at once (they shut down in parallel); return those that were killed.

    Raises :class:`OSError` if a process survives even SIGKILL, which only happens when it is
    stuck in the kernel; the caller reports it rather than pretending all is stopped.
    """
    running = [h for h in handles if is_alive(h)]
    for handle in running:
        _signal_group(handle, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while running and time.monotonic() < deadline:
        running = [h for h in running if is_alive(h)]
        if running:
            time.sleep(0.1)
    killed = list(running)
    for handle in killed:
        _signal_group(handle, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while running and time.monotonic() < deadline:
        running = [h for h in running if is_alive(h)]
        if running:
            time.sleep(0.05)
    if running:
        raise OSError(f"processes {[h.pid for h in running]} survived SIGKILL")
    return killed


def _signal_group(handle: ProcessHandle, sig: signal.Signals) -> None:
    try:
        os.killpg(handle.pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(handle.pid, sig)
