"""The supervisor with real child processes: small Python scripts standing in for roles."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.supervisor.restart_policy import RestartPolicy
from drsvc.runtime.supervisor.roles import RoleSpec
from drsvc.runtime.supervisor.roles_file import read_roles_file
from drsvc.runtime.supervisor.run_lock import hold_run_lock
from drsvc.runtime.supervisor.status import Snapshot
from drsvc.runtime.supervisor.supervisor import Outcome, Supervisor, SupervisorSettings

FAST = RestartPolicy(
    initial_backoff_s=0.2, max_backoff_s=0.8, stable_after_s=5.0, crash_loop_after=3
)

SCRIPTS = {
    # Runs until SIGTERM, then exits 0; says what it was started with.
    "steady": """
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        print("steady up", os.environ.get("DRSVC_ROLE"), " ".join(sys.argv[1:]), flush=True)
        while True:
            time.sleep(0.05)
    """,
    "crasher": """
        import sys
        print("about to fail", flush=True)
        print("boom: the disk is on fire", file=sys.stderr, flush=True)
        sys.exit(3)
    """,
    "bad_input": """
        import sys
        print("error: no such option --bogus", file=sys.stderr)
        sys.exit(2)
    """,
    "stubborn": """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGTERM", flush=True)
        while True:
            time.sleep(0.05)
    """,
}


def script_role(tmp_path: Path, name: str, script: str, *, metrics: bool = False) -> RoleSpec:
    path = tmp_path / f"{script}.py"
    path.write_text(textwrap.dedent(SCRIPTS[script]))
    return RoleSpec(name=name, kind=script, command=(sys.executable, str(path)), metrics=metrics)


class StopWhen:
    """The supervisor's sleep: sleeps for real, and asks it to stop once ``done()`` holds (or
    after ``timeout_s``, which fails the test). Keeps the supervisor in the main thread."""

    def __init__(self, done: Callable[[], bool], timeout_s: float = 20.0) -> None:
        self.done = done
        self.deadline = time.monotonic() + timeout_s
        self.supervisor: Supervisor | None = None
        self.timed_out = False
        self.stop_requests = 1

    def __call__(self, seconds: float) -> None:
        time.sleep(seconds)
        assert self.supervisor is not None
        if self.stop_requests and (self.done() or time.monotonic() > self.deadline):
            self.timed_out = time.monotonic() > self.deadline
            for _ in range(self.stop_requests):
                self.supervisor.request_stop("test is done")
            self.stop_requests = 0


def supervise(
    tmp_path: Path,
    roles: list[RoleSpec],
    done: Callable[[Path], bool],
    *,
    grace_s: float = 5.0,
    stop_requests: int = 1,
) -> tuple[Outcome, Path]:
    run_dir = tmp_path / "run"
    roles_file = run_dir / "roles.json"
    stopper = StopWhen(lambda: roles_file.exists() and done(roles_file))
    stopper.stop_requests = stop_requests
    supervisor = Supervisor(
        roles,
        run_dir,
        tmp_path / "topology.yaml",
        policy=FAST,
        settings=SupervisorSettings(grace_s=grace_s, tick_s=0.05, scrape_every_s=0),
        sleep=stopper,
    )
    stopper.supervisor = supervisor
    outcome = supervisor.run()
    assert not stopper.timed_out, f"condition not reached; roles.json: {roles_file.read_text()}"
    return outcome, roles_file


def roles_by_name(roles_file: Path) -> dict[str, dict[str, object]]:
    return {role["name"]: role for role in read_roles_file(roles_file)["roles"]}


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_crashing_role_is_restarted_with_backoff_beside_a_steady_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="drsvc.run")
    roles = [script_role(tmp_path, "steady", "steady"), script_role(tmp_path, "crasher", "crasher")]
    started = time.monotonic()

    outcome, roles_file = supervise(
        tmp_path,
        roles,
        lambda f: int(roles_by_name(f)["crasher"]["crashes"]) >= 4,  # type: ignore[call-overload]
    )

    elapsed = time.monotonic() - started
    assert outcome is Outcome.CLEAN
    # Backoffs 0.2 + 0.4 + 0.8 before the fourth crash: the restarts were not immediate.
    assert elapsed >= 1.4
    final = roles_by_name(roles_file)
    assert read_roles_file(roles_file)["state"] == "stopped"
    assert final["crasher"]["state"] == "stopped"
    assert int(final["crasher"]["restarts"]) >= 3  # type: ignore[call-overload]
    assert final["crasher"]["last_exit"] == "exited with code 3"
    assert final["steady"]["restarts"] == 0
    assert final["steady"]["pid"] is None
    messages = [r.getMessage() for r in caplog.records]
    assert any("crasher exited with code 3" in m and "restarting in 0.2s" in m for m in messages)
    loud = [r for r in caplog.records if "crasher keeps crashing" in r.getMessage()]
    assert loud and loud[0].levelno == logging.ERROR
    assert "| boom: the disk is on fire" in loud[0].getMessage()
    log_text = (tmp_path / "run" / "crasher.log").read_text()
    assert log_text.count("boom: the disk is on fire") >= 4


def test_bad_input_is_not_retried_and_alone_ends_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="drsvc.run")
    roles = [script_role(tmp_path, "replicate.a-to-b.1", "bad_input")]
    supervisor = Supervisor(
        roles,
        tmp_path / "run",
        tmp_path / "t.yaml",
        policy=FAST,
        settings=SupervisorSettings(tick_s=0.05, scrape_every_s=0),
    )
    started = time.monotonic()
    assert supervisor.run() is Outcome.ALL_FAILED
    assert time.monotonic() - started < 10
    role = roles_by_name(tmp_path / "run" / "roles.json")["replicate.a-to-b.1"]
    assert role["state"] == "failed"
    assert role["restarts"] == 0
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("not restarting it" in m and "no such option --bogus" in m for m in failed)


def test_bad_input_of_one_role_leaves_the_others_running(tmp_path: Path) -> None:
    roles = [script_role(tmp_path, "steady", "steady"), script_role(tmp_path, "bad", "bad_input")]
    outcome, roles_file = supervise(
        tmp_path, roles, lambda f: roles_by_name(f)["bad"]["state"] == "failed"
    )
    assert outcome is Outcome.CLEAN
    assert roles_by_name(roles_file)["bad"]["restarts"] == 0


def test_roles_get_their_name_a_metrics_port_and_keep_the_port_across_restarts(
    tmp_path: Path,
) -> None:
    steady = script_role(tmp_path, "steady", "steady", metrics=True)
    seen_pids: set[int] = set()

    def restarted_once(roles_file: Path) -> bool:
        role = roles_by_name(roles_file)["steady"]
        if role["state"] != "running" or role["pid"] is None:
            return False
        greetings = (tmp_path / "run" / "steady.log").read_text().count("steady up")
        if greetings < len(seen_pids) + 1:
            return False  # the new process has not said what it was started with yet
        seen_pids.add(int(role["pid"]))  # type: ignore[call-overload]
        if len(seen_pids) == 1:
            os.kill(int(role["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
        return len(seen_pids) == 2

    outcome, roles_file = supervise(tmp_path, [steady], restarted_once)

    assert outcome is Outcome.CLEAN
    role = roles_by_name(roles_file)["steady"]
    assert role["restarts"] == 1 and role["crashes"] == 1
    assert role["last_exit"] == "exited with code 0"  # the clean stop at the end
    port = role["metrics_port"]
    assert isinstance(port, int) and port > 0
    lines = [
        line
        for line in (tmp_path / "run" / "steady.log").read_text().splitlines()
        if line.startswith("steady up")
    ]
    assert lines == [f"steady up steady --metrics-port {port}"] * 2
    assert all(gone(pid) for pid in seen_pids)


def test_a_role_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    roles = [
        script_role(tmp_path, "stubborn", "stubborn"),
        script_role(tmp_path, "steady", "steady"),
    ]
    pids: list[int] = []

    def both_up(roles_file: Path) -> bool:
        running = [r for r in roles_by_name(roles_file).values() if r["state"] == "running"]
        pids[:] = [int(r["pid"]) for r in running]  # type: ignore[call-overload]
        stubborn_log = tmp_path / "run" / "stubborn.log"
        return len(running) == 2 and "ignoring SIGTERM" in stubborn_log.read_text()

    started = time.monotonic()
    outcome, roles_file = supervise(tmp_path, roles, both_up, grace_s=1.0)
    assert outcome is Outcome.UNCLEAN
    assert time.monotonic() - started < 15
    assert all(gone(pid) for pid in pids)
    assert roles_by_name(roles_file)["stubborn"]["last_exit"] == "killed by SIGKILL"


def test_a_second_stop_request_does_not_wait_for_the_grace_period(tmp_path: Path) -> None:
    roles = [script_role(tmp_path, "stubborn", "stubborn")]
    started = time.monotonic()
    outcome, _ = supervise(
        tmp_path,
        roles,
        lambda f: "ignoring SIGTERM" in (tmp_path / "run" / "stubborn.log").read_text(),
        grace_s=60.0,
        stop_requests=2,
    )
    assert outcome is Outcome.UNCLEAN
    assert time.monotonic() - started < 20


SUPERVISOR_MAIN = """
import sys
from pathlib import Path
from drsvc.runtime.supervisor.roles import RoleSpec
from drsvc.runtime.supervisor.supervisor import Supervisor, SupervisorSettings

run_dir, script = Path(sys.argv[1]), sys.argv[2]
role = RoleSpec(name="steady", kind="steady", command=(sys.executable, script), metrics=False)
Supervisor([role], run_dir, Path("t.yaml"), settings=SupervisorSettings(scrape_every_s=0)).run()
"""


def test_roles_die_with_a_supervisor_killed_by_sigkill(tmp_path: Path) -> None:
    steady = script_role(tmp_path, "steady", "steady")
    run_dir = tmp_path / "run"
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR_MAIN, str(run_dir), steady.command[1]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        child_pid = None
        while time.monotonic() < deadline and child_pid is None:
            time.sleep(0.1)
            try:
                child_pid = roles_by_name(run_dir / "roles.json")["steady"]["pid"]
            except (OSError, ValueError, KeyError):
                continue
        assert isinstance(child_pid, int), "the supervisor never started its role"
        assert not gone(child_pid)
        supervisor.kill()
        supervisor.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not gone(child_pid):
            time.sleep(0.05)
        assert gone(child_pid), "the role outlived its supervisor"
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait(10)


def test_one_supervisor_per_run_directory(tmp_path: Path) -> None:
    with hold_run_lock(tmp_path):
        assert (tmp_path / "supervisor.lock").read_text().strip() == str(os.getpid())
        holder = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path;"
                "from drsvc.runtime.supervisor.run_lock import hold_run_lock\n"
                "with hold_run_lock(Path(sys.argv[1])): pass",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert holder.returncode != 0
        assert f"another drsvc run (pid {os.getpid()}) already supervises" in holder.stderr
    with hold_run_lock(tmp_path):  # released: free again
        pass
    with pytest.raises(ConfigError), hold_run_lock(tmp_path), hold_run_lock(tmp_path):
        pass


def test_roles_file_lists_every_role(tmp_path: Path) -> None:
    roles = [script_role(tmp_path, "steady", "steady"), script_role(tmp_path, "other", "steady")]
    running: dict[str, object] = {}

    def all_running(roles_file: Path) -> bool:
        document = read_roles_file(roles_file)
        if all(r["state"] == "running" for r in document["roles"]):
            running.update(document)
            return True
        return False

    supervise(tmp_path, roles, all_running)
    assert running["state"] == "running"
    assert running["supervisor_pid"] == os.getpid()
    entries = running["roles"]
    assert isinstance(entries, list)
    assert [(r["name"], r["kind"], r["restarts"]) for r in entries] == [
        ("steady", "steady", 0),
        ("other", "steady", 0),
    ]
    for entry in entries:
        assert isinstance(entry["pid"], int)
        assert entry["log_file"] == str(tmp_path / "run" / f"{entry['name']}.log")
    json.dumps(running)  # plain JSON types only


class BrokenView:
    """A view that fails once the role runs (a closed terminal, a bug)."""

    def __init__(self) -> None:
        self.failures = 0

    def update(self, snapshot: Snapshot) -> None:
        if any(r.pid is not None for r in snapshot.roles):
            self.failures += 1
            raise BrokenPipeError("the terminal went away")

    def close(self) -> None:
        return None


def test_a_failing_view_does_not_take_the_roles_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    view = BrokenView()
    steady = script_role(tmp_path, "steady", "steady")
    roles_file = tmp_path / "run" / "roles.json"
    started = time.monotonic()
    stopper = StopWhen(lambda: time.monotonic() - started > 1.5)
    supervisor = Supervisor(
        [steady],
        tmp_path / "run",
        tmp_path / "t.yaml",
        view=view,
        policy=FAST,
        settings=SupervisorSettings(tick_s=0.05, scrape_every_s=0),
        sleep=stopper,
    )
    stopper.supervisor = supervisor
    assert supervisor.run() is Outcome.CLEAN
    assert view.failures == 1  # dropped after its first failure
    role = roles_by_name(roles_file)["steady"]
    assert role["restarts"] == 0 and role["last_exit"] == "exited with code 0"
    assert any("the status view failed" in r.getMessage() for r in caplog.records)


class FailingSleep:
    """Raises once, the first time it is called while a role runs (a bug in the loop)."""

    def __init__(self, roles_file: Path) -> None:
        self.roles_file = roles_file
        self.pid: int | None = None

    def __call__(self, seconds: float) -> None:
        time.sleep(seconds)
        if self.pid is None and self.roles_file.exists():
            pid = roles_by_name(self.roles_file)["steady"]["pid"]
            if isinstance(pid, int):
                self.pid = pid
                raise RuntimeError("a bug in the supervisor loop")


def test_a_failing_supervisor_loop_still_stops_the_roles_gracefully(tmp_path: Path) -> None:
    roles_file = tmp_path / "run" / "roles.json"
    sleep = FailingSleep(roles_file)
    supervisor = Supervisor(
        [script_role(tmp_path, "steady", "steady")],
        tmp_path / "run",
        tmp_path / "t.yaml",
        policy=FAST,
        settings=SupervisorSettings(tick_s=0.05, scrape_every_s=0),
        sleep=sleep,
    )
    with pytest.raises(RuntimeError, match="a bug in the supervisor loop"):
        supervisor.run()
    assert sleep.pid is not None and gone(sleep.pid)
    role = roles_by_name(roles_file)["steady"]
    assert role["state"] == "stopped"
    assert role["last_exit"] in {"exited with code 0", "killed by SIGTERM"}
