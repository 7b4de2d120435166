"""One ``drsvc run`` per state directory: two supervisors would start every role twice and
overwrite each other's ``roles.json``."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from drsvc.errors import ConfigError

LOCK_FILE = "supervisor.lock"


@contextlib.contextmanager
def hold_run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``<run_dir>/supervisor.lock`` while the block runs; the kernel drops the lock when
    the process dies, however it dies. Raises :class:`ConfigError` when another process holds it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            raise ConfigError(
                f"another drsvc run (pid {holder}) already supervises {run_dir}; stop it first "
                "or use another --state-dir"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
