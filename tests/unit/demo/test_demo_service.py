"""``drsvc run`` as the demo and the chaos suite start it: the command line, the environment and
the log it gets, its own process group, and a stop that ends it even when it ignores SIGTERM."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from drsvc.demo import service
from drsvc.demo.service import RUN_LOG, run_argv, start_run


def test_the_command_runs_the_roles_with_plain_logs_and_no_summary(tmp_path: Path) -> None:
    argv = run_argv(Path("topology.yaml"), tmp_path, "replicate,api")

    assert argv[:4] == [sys.executable, "-m", "drsvc.cli.main", "run"]
    assert argv[argv.index("-t") + 1] == "topology.yaml"
    assert argv[argv.index("--roles") + 1] == "replicate,api"
    assert argv[argv.index("--state-dir") + 1] == str(tmp_path)
    assert argv[argv.index("--summary-every-s") + 1] == "0"
    assert "--plain" in argv


def _child(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """Makes ``start_run`` start ``python -c code`` instead of the service."""
    monkeypatch.setattr(service, "run_argv", lambda *_: [sys.executable, "-c", code])


def test_the_service_gets_the_extra_environment_and_writes_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _child(
        monkeypatch,
        "import os; print(os.environ['DRSVC_API_PORT'], os.environ['PYTHONUNBUFFERED'],"
        " os.getpgid(0) == os.getpid())",
    )
    state = tmp_path / "state"

    run = start_run(Path("t.yaml"), state, "api", {"DRSVC_API_PORT": "8123"})
    assert run.proc.wait(30) == 0
    run.stop()

    assert run.log.closed
    assert (state / RUN_LOG).read_text().split() == ["8123", "1", "True"]


def test_stop_kills_a_service_that_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _child(
        monkeypatch,
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print('ready', flush=True); time.sleep(60)",
    )
    run = start_run(Path("t.yaml"), tmp_path, "replicate")
    log = tmp_path / RUN_LOG
    deadline = time.monotonic() + 30
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)

    run.stop(grace_s=0.5)

    assert run.proc.returncode == -9
    assert run.log.closed
