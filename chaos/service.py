"""The drsvc service a scenario runs against: ``drsvc run`` with every role but the API (a
scenario that fails over through the API adds it), as a subprocess with its own state
directory, and the CLI commands a drill calls.

On secured clusters each principal's roles run in a ``drsvc run`` of their own, with that
role's topology (:class:`RunPart`); the first part is the executor's, whose topology, state
directory and environment the CLI commands use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drsvc.demo.service import start_run
from drsvc.errors import LocalEnvError

ROLES = "replicate,heartbeats,checkpoints,controller"


@dataclass(frozen=True)
class RunPart:
    """One more ``drsvc run``: its roles, under the principal its topology names."""

    topology: Path
    state_dir: Path
    roles: str
    env: Mapping[str, str] = field(default_factory=dict)


class Service:
    """``drsvc run`` of one scenario's topology; roles log under ``state_dir/run`` (and those of
    each of ``parts`` under its own state directory)."""

    def __init__(
        self,
        topology: Path,
        state_dir: Path,
        consul: str,
        roles: str = ROLES,
        env: Mapping[str, str] | None = None,
        parts: Sequence[RunPart] = (),
    ) -> None:
        self.topology = topology
        self.state_dir = state_dir
        self.consul = consul
        self.env = dict(env or {})
        self.run_dir = state_dir / "run"
        #: every ``drsvc run``'s directory of ``roles.json``, this one's first
        self.run_dirs = (self.run_dir, *(p.state_dir / "run" for p in parts))
        # A suite killed on its timeout must not leave the service copying on its own:
        # start_run ties the service's life to this process.
        consul_env = {"DRSVC_CONSUL_HTTP_ADDR": self.consul}
        self._runs = [start_run(topology, state_dir, roles, {**self.env, **consul_env})]
        try:
            for part in parts:
                self._runs.append(
                    start_run(part.topology, part.state_dir, part.roles, {**part.env, **consul_env})
                )
        except BaseException:
            self.stop()
            raise
        self.proc = self._runs[0].proc

    def environ(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.env,
            "DRSVC_CONSUL_HTTP_ADDR": self.consul,
            "PYTHONUNBUFFERED": "1",
        }

    def check(self) -> None:
        for run, run_dir in zip(self._runs, self.run_dirs, strict=True):
            if run.proc.poll() is not None:
                raise LocalEnvError(
                    f"drsvc run stopped (exit {run.proc.returncode}); see {run_dir.parent}"
                )

    def roles_running(self) -> bool:
        return all(_roles_running(run_dir) for run_dir in self.run_dirs)

    def stop(self) -> None:
        for run in self._runs:
            run.stop()

    def command(self, *args: str, timeout_s: float = 300) -> tuple[int, dict[str, Any], str]:
        """``drsvc <args> -t <topology> --json``: exit code, JSON answer, stderr."""
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "drsvc.cli.main",
                *args,
                "-t",
                str(self.topology),
                "--json",
                "--state-dir",
                str(self.state_dir),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=self.environ(),
        )
        try:
            answer: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
        except ValueError:
            answer = {"raw": done.stdout}
        return done.returncode, answer, done.stderr


def _roles_running(run_dir: Path) -> bool:
    try:
        document = json.loads((run_dir / "roles.json").read_text())
    except (OSError, ValueError):
        return False
    roles = document.get("roles", [])
    return bool(roles) and all(r.get("state") == "running" for r in roles)


def wait(predicate: Any, timeout_s: float, what: str, service: Service | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if service is not None:
            service.check()
        try:
            if predicate():
                return
            last_error = None
        except Exception as err:  # a cluster answering an error while things move: ask again
            last_error = err
        time.sleep(0.5)
    because = f" (last asked: {last_error})" if last_error is not None else ""
    raise LocalEnvError(f"timed out after {timeout_s:.0f} s waiting for {what}{because}")


def retrying(
    service: Service, args: tuple[str, ...], timeout_s: float, retry_on: Mapping[str, str]
) -> dict[str, Any]:
    """Run a command until it exits 0; retried while its error contains a ``retry_on`` key."""
    deadline = time.monotonic() + timeout_s
    while True:
        code, answer, err = service.command(*args)
        if code == 0:
            return answer
        text = f"{err} {json.dumps(answer)}"
        if time.monotonic() > deadline or not any(k in text for k in retry_on):
            raise LocalEnvError(f"drsvc {' '.join(args)} failed (exit {code}): {text.strip()}")
        time.sleep(2)
