from __future__ import annotations

import os

from drsvc.process_handle import ProcessHandle, is_alive, start_ticks


def test_a_process_is_recognised_by_its_pid_and_start_time() -> None:
    ticks = start_ticks(os.getpid())
    assert ticks is not None
    assert is_alive(ProcessHandle(pid=os.getpid(), start_ticks=ticks))
    # the same pid, started at another time: a recycled pid, not our process
    assert not is_alive(ProcessHandle(pid=os.getpid(), start_ticks=ticks + 1))


def test_a_pid_that_does_not_exist_is_not_alive() -> None:
    absent = 2**22 + 17  # above the kernel's largest pid
    assert start_ticks(absent) is None
    assert not is_alive(ProcessHandle(pid=absent, start_ticks=1))
