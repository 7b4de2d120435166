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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from drsvc.runtime.supervisor.parent_death import die_with_parent_hook

__all__ = ["RUN_LOG", "RunGroup", "RunProcess", "RunSpec", "run_argv", "start_run", "start_runs"]

#: the service's output, in the state directory it runs with
RUN_LOG = "drsvc-run.log"


def run_argv(topology: Path, state_dir: Path, roles: str, args: Sequence[str] = ()) -> list[str]:
    """The command line of ``drsvc run`` with ``roles`` for ``topology``, and ``args``."""
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
        *args,
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
    topology: Path,
    state_dir: Path,
    roles: str,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> RunProcess:
    """Starts ``drsvc run`` with ``roles`` for ``topology`` and its state in ``state_dir``, in
    this process's environment plus ``env``, with ``args`` added to its command line. Call it
    from the main thread: the child dies with the thread that started it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    log = (state_dir / RUN_LOG).open("ab")
    try:
        proc = subprocess.Popen(
            run_argv(topology, state_dir, roles, args),
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


@dataclass(frozen=True)
class RunSpec:
    """One ``drsvc run``: its topology (which names the principal it runs as), its state
    directory, its roles, the variables it gets and the options it adds."""

    topology: Path
    state_dir: Path
    roles: str
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    #: who runs it (its principal), for messages
    label: str = ""


@dataclass
class RunGroup:
    """The ``drsvc run`` processes of one service, watched as one: on secured clusters each
    principal's roles run apart, and the service is down when any of them stopped."""

    runs: list[RunProcess]
    specs: list[RunSpec]

    def poll(self) -> int | None:
        """The exit code of the first run that stopped (None: every run is running)."""
        for run in self.runs:
            code = run.proc.poll()
            if code is not None:
                return code
        return None

    def stopped(self) -> str | None:
        """Which run stopped and where its log is (None: none)."""
        for run, spec in zip(self.runs, self.specs, strict=True):
            code = run.proc.poll()
            if code is not None:
                who = f" as {spec.label}" if spec.label else ""
                return (
                    f"drsvc run --roles {spec.roles}{who} stopped (exit {code}); "
                    f"see {spec.state_dir / RUN_LOG}"
                )
        return None

    def stop(self) -> None:
        for run in self.runs:
            run.stop()


def start_runs(specs: Sequence[RunSpec]) -> RunGroup:
    """Starts every run of ``specs`` (see :func:`start_run`); stops those already started when
    one cannot start."""
    runs: list[RunProcess] = []
    try:
        for spec in specs:
            runs.append(start_run(spec.topology, spec.state_dir, spec.roles, spec.env, spec.args))
    except BaseException:
        for run in runs:
            run.stop()
        raise
    return RunGroup(runs, list(specs))
