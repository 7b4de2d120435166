"""The view without a terminal: the roles' output on stderr, and a summary line per flow.

Lifecycle events (started, exited, restarting) are the supervisor's own log lines. This view adds
the roles' output, followed from their log files, each line prefixed with the role's name (in
``--log-format json``, the roles already write JSON objects naming their role; other lines, such
as a traceback, are wrapped into one), and every ``summary_every_s`` one line per flow.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from drsvc.runtime.supervisor.flow_metrics import FlowNumbers
from drsvc.runtime.supervisor.formatting import format_count, format_latency
from drsvc.runtime.supervisor.log_files import LogFollower
from drsvc.runtime.supervisor.status import FlowStatus, Snapshot

log = logging.getLogger("drsvc.run")


def describe_flow(flow: FlowStatus) -> str:
    """``east->west: 1/1 workers, 1.2k records/s, lag 0, latency 35 ms, 10.4k copied``."""
    numbers: FlowNumbers = flow.numbers
    return (
        f"{flow.flow}: {flow.workers_running}/{flow.workers} workers, "
        f"{format_count(numbers.records_per_s)} records/s, "
        f"lag {format_count(numbers.lag_records)}, latency {format_latency(numbers.latency_ms)}, "
        f"{format_count(numbers.records_copied)} copied"
    )


class PlainView:
    """Log lines for a pipe or a file (no terminal, or ``--plain``)."""

    def __init__(
        self,
        log_files: Mapping[str, Path],
        *,
        summary_every_s: float = 10.0,
        log_format: str = "text",
        follow_output: bool = True,
        stream: Callable[[], TextIO] = lambda: sys.stderr,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Start at the current end: output of an earlier ``drsvc run`` is not replayed.
        self._followers = (
            {
                name: LogFollower(path, path.stat().st_size if path.exists() else 0)
                for name, path in log_files.items()
            }
            if follow_output
            else {}
        )
        self._summary_every_s = summary_every_s
        self._json = log_format == "json"
        self._stream = stream
        self._clock = clock
        self._next_summary = clock() + summary_every_s

    def update(self, snapshot: Snapshot) -> None:
        self._echo_output()
        now = self._clock()
        if self._summary_every_s > 0 and now >= self._next_summary and not snapshot.stopping:
            self._next_summary = now + self._summary_every_s
            for flow in snapshot.flows:
                log.info("flow %s", describe_flow(flow))

    def close(self) -> None:
        self._echo_output()

    def _echo_output(self) -> None:
        stream = self._stream()
        wrote = False
        for name, follower in self._followers.items():
            for line in follower.new_lines():
                if line.startswith("=== ") and " drsvc run starts: " in line:
                    continue  # the supervisor's own marker; it logs the start itself
                stream.write(self._format(name, line) + "\n")
                wrote = True
        if wrote:
            stream.flush()

    def _format(self, role: str, line: str) -> str:
        if not self._json:
            return f"{role} | {line}"
        if line.startswith("{"):
            return line
        return json.dumps(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "level": "info",
                "logger": "drsvc.run.output",
                "message": line,
                "role": role,
            },
            ensure_ascii=False,
        )
