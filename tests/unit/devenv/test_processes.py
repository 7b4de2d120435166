from __future__ import annotations

import sys
import time
from pathlib import Path

from drsvc.devenv.processes import ProcessHandle, is_alive, spawn, stop, stop_all


def test_spawned_process_is_tracked_and_stopped(tmp_path: Path) -> None:
    handle, _ = spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "a.log", tmp_path
    )
    assert is_alive(handle)
    stop(handle, grace_s=5)
    assert not is_alive(handle)


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    handle, _ = spawn([sys.executable, "-c", code], tmp_path / "b.log", tmp_path)
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "b.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    killed = stop_all([handle], grace_s=0.5)
    assert killed == [handle]
    assert not is_alive(handle)


def test_a_recycled_pid_is_not_taken_for_ours(tmp_path: Path) -> None:
    handle, _ = spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "c.log", tmp_path
    )
    try:
        impostor = ProcessHandle(pid=handle.pid, start_ticks=handle.start_ticks + 1)
        assert not is_alive(impostor)
        stop(impostor)  # must not signal the real process
        assert is_alive(handle)
    finally:
        stop(handle, grace_s=5)


def test_output_goes_to_the_log_file(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "d.log"
    handle, proc = spawn([sys.executable, "-c", "print('hello from child')"], log, tmp_path)
    proc.wait(timeout=10)
    assert "hello from child" in log.read_text()
    assert not is_alive(handle)
