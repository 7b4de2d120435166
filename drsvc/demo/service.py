"""``drsvc run`` as a child process: how the demo and the chaos suite start the service.

Both run the service for a topology the same way: every role asked for, plain log lines (no live
view) into ``drsvc-run.log`` of the state directory, no periodic summary, in a process group of its
own, and tied to the caller's life, so that a demo or a suite that is killed does not leave the
service copying on its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from drsvc.runtime.supervisor.parent_death import die_with_parent_hook

__all__ = ["RUN_LOG", "RunProcess", "run_argv", "start_run"]

#: the service's output, in the state directory it runs with
RUN_LOG = "drsvc-run.log"


def run_argv(topology: Path, state_dir: Path, roles: str) -> list[str]:
    """The command line of ``drsvc run`` with ``roles`` for ``topology``."""
    return [
        sys.executable,
        "-m",
        "drsvc.cli.main",
        "run",
        "-t",
        str(topology),
        "--roles",
        roles,
        "--plain",
        "--state-dir",
        str(state_dir),
        "--summary-every-s",
        "0",
    ]


@dataclass
class RunProcess:
    """A started ``drsvc run``, with the log file its output goes to."""

    proc: subprocess.Popen[bytes]
    log: BinaryIO

    def stop(self, grace_s: float = 60) -> None:
        """SIGTERM, and SIGKILL to its whole process group if it has not stopped within
        ``grace_s``; closes the log file."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
        finally:
            self.log.close()


def start_run(
    topology: Path, state_dir: Path, roles: str, env: Mapping[str, str] | None = None
) -> RunProcess:
    """Starts ``drsvc run`` with ``roles`` for ``topology`` and its state in ``state_dir``, in
    this process's environment plus ``env``. Call it from the main thread: the child dies with
    the thread that started it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    log = (state_dir / RUN_LOG).open("ab")
    try:
        proc = subprocess.Popen(
            run_argv(topology, state_dir, roles),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
            # The hook is loaded before the fork and only calls prctl in the child, so the
            # threads of this process (Spark's gateway among them) hold nothing it needs.
            preexec_fn=die_with_parent_hook(),  # noqa: PLW1509
        )
    except BaseException:
        log.close()
        raise
    return RunProcess(proc, log)
