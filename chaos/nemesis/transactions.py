"""A source transaction left hanging: begun, written, never committed, its producer killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from chaos.nemesis.base import Nemesis, Timeline, now_ms
from chaos.nemesis.context import ChaosContext
from chaos.nemesis.hanging_producer import SETTINGS_VARIABLE
from drsvc.errors import LocalEnvError
from drsvc.kafka.admin import admin_client
from drsvc.verify.histories import PRODUCED, ProducedRecord, write_rows


class HangingTransaction(Nemesis):
    """Starts :mod:`chaos.nemesis.hanging_producer` against ``topic`` on ``site``; heal kills it
    (SIGKILL) and waits until the broker aborted the transaction (``timeout_ms`` after it
    began): the topic's last stable offset has passed every record it wrote.

    Its records go into the ``produced`` history flagged ``aborted``: the producer never
    committed, so no ``read_committed`` reader may ever see them, on the source or on a copy."""

    kind = "hanging-transaction"

    def __init__(
        self,
        timeline: Timeline,
        context: ChaosContext,
        site: str,
        topic: str,
        records: int = 20,
        timeout_ms: int = 10_000,
    ) -> None:
        super().__init__(timeline, f"{site}/{topic}")
        self.context = context
        self.site = site
        self.topic = topic
        self.records = records
        self.timeout_ms = timeout_ms
        self.producer_id = f"hanging{now_ms() % 1_000_000}"
        self._proc: subprocess.Popen[str] | None = None
        self._rows: list[dict[str, Any]] = []

    def inject(self) -> str:
        bootstrap, settings = self.context.admin_of(self.site)
        argv = [
            sys.executable,
            "-m",
            "chaos.nemesis.hanging_producer",
            bootstrap,
            self.topic,
            self.producer_id,
            str(self.records),
            str(self.timeout_ms),
        ]
        # Settings (a password among them) go through the environment, never the command line.
        env = {**os.environ, SETTINGS_VARIABLE: json.dumps(settings)}
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        assert self._proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in self._proc.stdout:
            if line.strip() == "open":
                break
            self._rows.append(json.loads(line))
            if time.monotonic() > deadline:
                break
        if not self._rows:
            self._proc.kill()
            raise LocalEnvError(f"the hanging producer wrote nothing to {self.topic}")
        write_rows(self.context.history_dir, PRODUCED, [self._row(r) for r in self._rows])
        return (
            f"transaction of {len(self._rows)} records on {self.site}/{self.topic} left open "
            f"(transaction.timeout.ms {self.timeout_ms})"
        )

    def _row(self, row: dict[str, Any]) -> ProducedRecord:
        return ProducedRecord(
            self.producer_id,
            row["seq"],
            self.site,
            self.topic,
            row["partition"],
            row["offset"],
            b"hanging",
            row["value_sha256"],
            row["value_size"],
            [],
            row["timestamp_ms"],
            True,
            True,
            now_ms(),
        )

    def heal(self) -> str:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGKILL)
        self._proc.wait(10)
        waited = self._wait_aborted()
        return (
            f"transaction of {len(self._rows)} records on {self.site}/{self.topic}: producer "
            f"killed (kill -9); the broker aborted it, stable again after {waited:.1f} s"
        )

    def _wait_aborted(self) -> float:
        started = time.monotonic()
        last: dict[int, int] = {}
        for row in self._rows:
            last[row["partition"]] = max(last.get(row["partition"], -1), row["offset"])
        admin = admin_client(*self.context.admin_of(self.site))
        deadline = started + self.timeout_ms / 1000 + 60
        while time.monotonic() < deadline:
            request = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in last}  # type: ignore[no-untyped-call]
            futures = admin.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10
            )
            stable = {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}
            if all(stable.get(p, -1) > offset for p, offset in last.items()):
                return time.monotonic() - started
            time.sleep(0.5)
        raise LocalEnvError(f"the hanging transaction on {self.topic} was never aborted")
