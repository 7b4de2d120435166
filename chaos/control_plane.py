"""What the control-plane scenarios act on: the application's failovers and who runs them.

A scenario of planned moves (``drill="planned-moves"``) moves the application between east
and west while its own producer and consumer follow it. Each move is run by one of three
executors, as an operator or the service would run it:

- ``cli``: ``drsvc failover`` / ``drsvc failback`` (a process of its own), talking to Consul
  through the ``executor`` proxy (:class:`~chaos.consul_proxy.ConsulProxies`), so a
  nemesis can slow its writes;
- ``api``: ``POST /v1/apps/<app>/failover`` (or ``failback``) to the ``api`` role of the
  scenario's ``drsvc run``, which runs the failover in its own process;
- ``stepped-clock``: :mod:`chaos.stepped_executor`, the executor with an injected clock whose
  wall time a nemesis steps forward (as NTP does), its monotonic time untouched.

:class:`ControlPlane` holds what the nemeses share: the proxies, the service, the application's
keys, and what happened (failover ids, clock steps) for the histories.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from chaos.consul_proxy import ConsulProxies
from chaos.service import Service
from chaos.switch_times import ClockStep
from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.record_store import read_record
from drsvc.errors import LocalEnvError
from drsvc.runtime.failover.views import record_document
from failover.active import decode_active
from failover.naming import (
    app_active_key,
    app_failover_key,
    app_lock_key,
)

Executor = Literal["cli", "api", "stepped-clock"]
EXECUTORS: tuple[Executor, ...] = ("cli", "api", "stepped-clock")

#: the proxies every planned-moves scenario puts in front of Consul
EXECUTOR_PROXY = "executor"
CLIENTS_PROXY = "clients"


@dataclass
class ControlPlane:
    """One scenario's control plane: ``namespace`` and ``app`` name the application's keys,
    ``consul`` is the agent everyone but the proxied users talks to directly."""

    namespace: str
    app: str
    topology: Path
    consul: str
    proxies: ConsulProxies
    service: Service
    run_dir: Path
    api_address: str | None = None
    api_token: str | None = None
    #: how this process reaches a secured Consul (the executor's token); None: by address
    consul_access: ConsulAccess | None = None
    #: every failover a move started, in order
    failover_ids: list[str] = field(default_factory=list)
    clock_steps: list[ClockStep] = field(default_factory=list)
    #: the wall-clock offset file of the stepped executor (empty: no step)
    clock_file: Path = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _local: threading.local = field(default_factory=threading.local, init=False)

    def __post_init__(self) -> None:
        self.clock_file = self.run_dir / "executor-clock-offset-ms"
        self.clock_file.parent.mkdir(parents=True, exist_ok=True)
        self.clock_file.write_text("0")

    # -- reading Consul ----------------------------------------------------------------------

    def coordinator(self) -> ConsulCoordinator:
        """A client of the agent for the calling thread (one HTTP session per thread)."""
        found: ConsulCoordinator | None = getattr(self._local, "coordinator", None)
        if found is None:
            found = ConsulCoordinator(self.consul, access=self.consul_access)
            self._local.coordinator = found
        return found

    def active_cluster(self) -> tuple[str | None, int]:
        entry = self.coordinator().get(app_active_key(self.namespace, self.app))
        document = decode_active(None if entry is None else entry.value, "east")
        return document.cluster, document.epoch

    def latest_failover(self) -> str | None:
        entry = self.coordinator().get(app_failover_key(self.namespace, self.app))
        return None if entry is None or not entry.value else entry.value

    def record(self, failover_id: str) -> dict[str, Any] | None:
        record = read_record(self.coordinator(), self.namespace, failover_id)
        return None if record is None else record_document(record)

    def wait_new_failover(self, after: str | None, timeout_s: float, stop: threading.Event) -> str:
        """The id of the application's next failover (one other than ``after``) once it is
        recorded."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            latest = self.latest_failover()
            if latest is not None and latest != after:
                return latest
            stop.wait(0.02)
        raise LocalEnvError(f"no new failover of {self.app} within {timeout_s:.0f} s")

    def wait_new_lock_holder(
        self, after: str | None, timeout_s: float, stop: threading.Event
    ) -> str:
        """The id of the failover that holds the application's lock, once one other than
        ``after`` does (it is about to record itself and deactivate)."""
        deadline = time.monotonic() + timeout_s
        key = app_lock_key(self.namespace, self.app)
        while not stop.is_set() and time.monotonic() < deadline:
            entry = self.coordinator().get(key)
            if entry is not None and entry.session is not None:
                holder = _holder(entry.value)
                if holder is not None and holder != after:
                    return holder
            stop.wait(0.005)
        raise LocalEnvError(f"no executor took the lock of {self.app} within {timeout_s:.0f} s")

    def wait_step_done(
        self, failover_id: str, step: str, timeout_s: float, stop: threading.Event
    ) -> dict[str, Any]:
        """The record once ``step`` of ``failover_id`` has an ``ok`` outcome."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            record = self.record(failover_id)
            if record is not None and step_done(record, step):
                return record
            stop.wait(0.05)
        raise LocalEnvError(f"failover {failover_id} did not pass {step} within {timeout_s:.0f} s")

    def wait_finished(self, failover_id: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = self.record(failover_id)
            if record is not None and record["state"] in FINISHED:
                return record
            time.sleep(0.5)
        raise LocalEnvError(f"failover {failover_id} did not end within {timeout_s:.0f} s")

    def note_failover(self, failover_id: str) -> None:
        with self._lock:
            if failover_id not in self.failover_ids:
                self.failover_ids.append(failover_id)

    # -- moving ------------------------------------------------------------------------------

    def move(self, back: bool, to: str, executor: Executor) -> Move:
        """Start moving the application to ``to`` (``back``: a failback) with ``executor``."""
        before = self.latest_failover()
        if executor == "api":
            return self._move_by_api(back, to, before)
        if executor == "stepped-clock":
            argv = [
                sys.executable, "-m", "chaos.stepped_executor", str(self.topology), self.app, to,
                self.proxies.address(EXECUTOR_PROXY), str(self.clock_file),
            ]  # fmt: skip
        else:
            argv = [
                sys.executable, "-m", "drsvc.cli.main", "failback" if back else "failover",
                "--app", self.app, "--to", to, "-t", str(self.topology), "--json",
                "--consul", self.proxies.address(EXECUTOR_PROXY),
                "--state-dir", str(self.service.state_dir),
            ]  # fmt: skip
        log = (self.run_dir / f"move-{len(self.failover_ids) + 1}-{executor}.log").open("ab")
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self.service.environ()
        )
        log.close()
        return Move(self, before, process=process)

    def _move_by_api(self, back: bool, to: str, before: str | None) -> Move:
        if self.api_address is None:
            raise LocalEnvError("this scenario's drsvc run has no api role")
        path = f"/v1/apps/{self.app}/{'failback' if back else 'failover'}"
        request = urllib.request.Request(
            f"http://{self.api_address}{path}",
            data=json.dumps({"to": to}).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.api_token}",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        failover_id = str(answer["id"])
        self.note_failover(failover_id)
        return Move(self, before, failover_id=failover_id)


FINISHED = frozenset({"completed", "rolled_back"})


def _holder(value: str) -> str | None:
    """The failover id a lock's value names (the executor writes its id, host and pid)."""
    try:
        found = json.loads(value)
    except ValueError:
        return None
    holder = found.get("failover_id") if isinstance(found, dict) else None
    return holder if isinstance(holder, str) else None


def step_done(record: dict[str, Any], step: str) -> bool:
    """Whether ``record`` (a failover record document) shows ``step`` done."""
    return any(e["step"] == step and e["outcome"] == "ok" for e in record["events"])


@dataclass
class Move:
    """A move under way: a process of its own, or a failover the API runs."""

    plane: ControlPlane
    before: str | None
    process: subprocess.Popen[bytes] | None = None
    failover_id: str | None = None

    def id(self, timeout_s: float = 60.0) -> str:
        """The move's failover id, once recorded."""
        if self.failover_id is None:
            self.failover_id = self.plane.wait_new_failover(
                self.before, timeout_s, threading.Event()
            )
            self.plane.note_failover(self.failover_id)
        return self.failover_id

    def finish(self, timeout_s: float) -> str:
        """Wait for the move's end; a line saying how it ended. Raises when it did not
        complete."""
        failover_id = self.id()
        if self.process is not None:
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired as err:
                self.process.kill()
                raise LocalEnvError(
                    f"failover {failover_id} still ran after {timeout_s:.0f} s"
                ) from err
        record = self.plane.wait_finished(failover_id, timeout_s)
        return describe(record)


def describe(record: dict[str, Any]) -> str:
    """One line on a finished failover; raises when it did not complete."""
    steps = ", ".join(f"{e['step']} {e['outcome']}" for e in record["events"])
    line = f"{record['id']} ({record['kind']}, {record['from']}->{record['to']}): {steps}"
    if record["state"] != "completed":
        raise LocalEnvError(f"failover {line} ended {record['state']}")
    return line
