"""``drsvc run`` against real clusters: it supervises the replication worker of a flow, restarts
it after ``kill -9``, replication goes on, and SIGTERM stops everything cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from replication_support import (
    create,
    end_offsets,
    produce,
    read_all,
    sequence_records,
    wait_for,
    write_topology,
)

from drsvc.devenv.environment import EnvironmentInfo

ROLE = "replicate.east-to-west.1"


class RunProcess:
    """``drsvc run --plain`` as a subprocess, its output in a file."""

    def __init__(self, topology: Path, state_dir: Path, output: Path, consul: str | None) -> None:
        self.state_dir = state_dir
        self.output = output
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if consul:
            env["DRSVC_CONSUL_HTTP_ADDR"] = consul
        with output.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "drsvc.cli.main", "run", "--topology", str(topology),
                 "--roles", "replicate", "--plain", "--state-dir", str(state_dir),
                 "--summary-every-s", "2"],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def tail(self) -> str:
        return "\n".join(self.text().splitlines()[-40:])

    def roles(self) -> dict[str, dict[str, Any]]:
        try:
            document = json.loads((self.state_dir / "run" / "roles.json").read_text())
        except (OSError, ValueError):  # not written yet
            return {}
        return {role["name"]: role for role in document["roles"]}

    def running_pid(self, role: str) -> int | None:
        entry = self.roles().get(role)
        if entry is None or entry["state"] != "running":
            return None
        pid: int | None = entry["pid"]
        return pid

    def stop(self) -> int:
        """SIGTERM, then its exit code (it must exit within the roles' grace period)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"drsvc run did not stop after SIGTERM:\n{self.tail()}") from None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _copied(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def test_run_restarts_a_killed_worker_and_stops_cleanly(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "run-orders", 2)
    topology = write_topology(
        tmp_path / "run.yaml",
        "run",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["run-orders"]}}],
    )
    run = RunProcess(
        topology, tmp_path / "state", tmp_path / "drsvc-run.out", cluster_pair.consul_http_addr
    )
    pids: list[int] = []
    try:
        produce(east, "run-orders", sequence_records(400, 2, tag="before-"))
        wait_for(lambda: _copied(west, "east.run-orders") >= 400, 120, "records before the kill")
        first = run.running_pid(ROLE)
        assert first is not None, run.tail()
        pids.append(first)
        assert run.roles()[ROLE]["restarts"] == 0

        os.kill(first, signal.SIGKILL)
        wait_for(lambda: run.running_pid(ROLE) not in (None, first), 60, "the restarted worker")
        second = run.running_pid(ROLE)
        assert second is not None
        pids.append(second)
        entry = run.roles()[ROLE]
        assert entry["restarts"] == 1 and entry["last_exit"] == "killed by SIGKILL", entry

        produce(east, "run-orders", sequence_records(400, 2, first=400, tag="after-"))
        # The new worker may wait for the group to drop the killed member (its session timeout).
        wait_for(lambda: _copied(west, "east.run-orders") >= 800, 180, "records after the kill")
        assert run.proc.poll() is None, run.tail()
        # The supervisor scrapes its workers every few seconds: a worker that copied everything
        # within one interval is seen at the next scrape (its partitions' counters stay).
        wait_for(
            lambda: any(
                not line.endswith("- copied")
                for line in run.text().splitlines()
                if "flow east->west: 1/1 workers" in line
            ),
            30,
            "a flow summary with the worker's numbers",
        )
    finally:
        code = run.stop()

    assert code == 0, f"drsvc run exited with {code}:\n{run.tail()}"
    assert pids and not [pid for pid in pids if _alive(pid)], "a role outlived drsvc run"
    final = run.roles()[ROLE]
    assert final["state"] == "stopped" and final["pid"] is None

    # At least once: every record arrived (the kill may have duplicated a few).
    values = {r.value for r in read_all(west, "east.run-orders")}
    expected = {f"before-{i}".encode() for i in range(400)}
    expected |= {f"after-{i}".encode() for i in range(400, 800)}
    assert expected <= values

    text = run.text()
    assert f"started {ROLE} (pid {pids[0]}" in text
    assert f"{ROLE} killed by SIGKILL" in text
    assert f"restarted {ROLE} (pid {pids[1]}" in text
    assert f"{ROLE} | " in text  # the worker's own lines, prefixed with its role
    # Flow summaries with numbers scraped from the worker's metrics endpoint.
    summaries = [line for line in text.splitlines() if "flow east->west: 1/1 workers" in line]
    assert summaries, run.tail()
    assert any(not line.endswith("- copied") for line in summaries), summaries[-3:]
    log_file = tmp_path / "state" / "run" / f"{ROLE}.log"
    assert log_file.read_text(errors="replace").count("drsvc run starts:") == 2
