"""A standalone Spark cluster on this machine: a master and workers started with PySpark's own
``bin/spark-class``, on free loopback ports, for running ``drsvc verify --master spark://...``
and ``spark-submit`` the way a real cluster runs them (executors in their own JVMs).

Each daemon runs in its own process group with its logs and work directory under ``root``;
:meth:`StandaloneSpark.stop` sends SIGTERM, then SIGKILL (executors go with their worker).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from drsvc.devenv.ports import allocate_ports
from drsvc.devenv.processes import ProcessHandle, spawn, stop_all
from drsvc.errors import LocalEnvError

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: heap of the master and worker daemons themselves (Spark's default is 1g each)
DAEMON_MEMORY = "256m"


def spark_home() -> Path:
    """The installed PySpark, which is a whole Spark: ``bin/spark-class``, ``bin/spark-submit``."""
    return Path(pyspark.__file__).resolve().parent


def alive_workers(state: dict[str, Any]) -> int:
    """How many workers the master's ``/json`` document lists as ALIVE."""
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def applications(state: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The running and completed applications named ``name`` in the master's ``/json``."""
    apps = [*state.get("activeapps", []), *state.get("completedapps", [])]
    return [a for a in apps if a.get("name") == name]


@dataclass
class StandaloneSpark:
    """A master and ``workers`` workers of ``worker_cores`` cores and ``worker_memory`` each."""

    root: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    master_port: int = field(init=False, default=0)
    web_port: int = field(init=False, default=0)
    handles: list[ProcessHandle] = field(init=False, default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(init=False, default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def web_url(self) -> str:
        return f"http://{HOST}:{self.web_port}"

    def worker_dir(self, index: int) -> Path:
        """Where worker ``index`` keeps its executors' directories (``app-*/<id>/stderr``)."""
        return self.root / f"worker-{index}" / "work"

    def environment(self) -> dict[str, str]:
        """The variables every daemon, driver and ``spark-submit`` of this cluster runs with."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_LOG_DIR": str(self.root / "logs"),
        }

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the master, then the workers; return once every worker is ALIVE at the master
        (a :class:`LocalEnvError` with the logs' place when not in ``timeout_s``)."""
        ports = allocate_ports(HOST, 2 + 2 * self.workers)
        self.master_port, self.web_port = ports[0], ports[1]
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.root.mkdir(parents=True, exist_ok=True)
        master = [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(self.master_port),
                  "--webui-port", str(self.web_port)]  # fmt: skip
        self._spawn(master, self.root / "master.log")
        for i in range(self.workers):
            port, web = ports[2 + 2 * i], ports[3 + 2 * i]
            self.worker_dir(i).mkdir(parents=True, exist_ok=True)
            worker = [spark_class, WORKER_CLASS, self.master_url, "--host", HOST,
                      "--port", str(port), "--webui-port", str(web),
                      "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                      "--work-dir", str(self.worker_dir(i))]  # fmt: skip
            self._spawn(worker, self.root / f"worker-{i}.log")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p.args for p in self._procs if p.poll() is not None]
            if dead:
                raise LocalEnvError(f"a Spark daemon exited at start; see the logs in {self.root}")
            state = self.state()
            if state is not None and alive_workers(state) >= self.workers:
                return
            time.sleep(1.0)
        raise LocalEnvError(
            f"Spark standalone: {self.workers} workers not alive at {self.web_url} within "
            f"{timeout_s:.0f} s; see the logs in {self.root}"
        )

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json`` document (workers, applications); None while it is not up."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json", timeout=5) as response:
                document: dict[str, Any] = json.load(response)
                return document
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM every daemon's process group, SIGKILL those still there after ``grace_s``."""
        stop_all(list(reversed(self.handles)), grace_s)
        for proc in self._procs:
            proc.wait(timeout=10)
        self.handles.clear()
        self._procs.clear()

    def _spawn(self, argv: list[str], log_file: Path) -> None:
        handle, proc = spawn(argv, log_file, cwd=self.root, env=self.environment())
        self.handles.append(handle)
        self._procs.append(proc)
