"""Reading the roles' log files: following new lines, and the last lines of one run."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

_READ_LIMIT = 1024 * 1024


class LogFollower:
    """Hands out the complete lines appended to a file since the last call."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self._partial = b""

    def new_lines(self) -> list[str]:
        """Lines completed since the last call (at most about a MiB per call, so one chatty role
        cannot stall the supervisor; the rest comes next time)."""
        try:
            with self.path.open("rb") as file:
                size = os.fstat(file.fileno()).st_size
                if size < self.offset:  # truncated or replaced: start over
                    self.offset, self._partial = 0, b""
                file.seek(self.offset)
                chunk = file.read(_READ_LIMIT)
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in complete]


def last_lines(path: Path, start: int, count: int) -> list[str]:
    """The last ``count`` lines written to ``path`` after byte ``start`` (one run of a role)."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            # The tail of a long run is all that matters; a bounded read keeps it cheap.
            file.seek(max(start, size - 64 * 1024))
            data = file.read()
    except FileNotFoundError:
        return []
    tail: deque[str] = deque(maxlen=count)
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            tail.append(line)
    return list(tail)
