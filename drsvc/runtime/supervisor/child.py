"""One running role process: started in its own process group, output appended to its log file.

The child writes straight into its log file (not through a pipe to the supervisor), so its output
never waits on the supervisor and survives it; the supervisor follows the file for what it shows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path


class ChildProcess:
    """A started role process and where this run of it begins in its log file."""

    def __init__(self, popen: subprocess.Popen[bytes], log_file: Path, log_offset: int) -> None:
        self.popen = popen
        self.log_file = log_file
        self.log_offset = log_offset
        """Size of the log file before this run wrote to it: its own output starts here."""
        self.started_wall = time.time()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_file: Path,
        preexec_fn: Callable[[], None] | None = None,
    ) -> ChildProcess:
        """Start ``argv`` in a new session (own process group, away from the terminal's Ctrl-C,
        which reaches the supervisor alone), stdin closed, stdout and stderr into ``log_file``.

        Raises :class:`OSError` when the program cannot be started at all.
        """
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as out:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            out.write(f"=== {stamp} drsvc run starts: {' '.join(argv)}\n".encode())
            out.flush()
            offset = out.tell()
            # preexec_fn is unsafe only with threads; the supervisor starts none (see supervisor).
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
                preexec_fn=preexec_fn,  # noqa: PLW1509
            )
        return cls(popen, log_file, offset)

    def poll(self) -> int | None:
        """The exit code once the process has ended (and been reaped), else None."""
        return self.popen.poll()

    def signal_group(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the role's whole process group (it may have children of its own)."""
        with contextlib.suppress(ProcessLookupError):
            try:
                os.killpg(self.popen.pid, sig)
            except PermissionError:
                self.popen.send_signal(sig)

    def kill_leftovers(self) -> None:
        """After the role exited: SIGKILL whatever it left behind in its process group. A group
        id cannot be reused while any member lives, so this never hits an unrelated process."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
