"""A failover run by an executor whose wall clock a nemesis steps forward, as NTP would.

Run as ``python -m chaos.stepped_executor TOPOLOGY APP TO CONSUL OFFSET_FILE``: it moves ``APP``
to ``TO`` (a failback when ``TO`` is its preferred cluster) exactly as ``drsvc failover`` does,
with one difference: the executor's clock (:class:`SteppedClock`) reads its wall time as the
machine's plus the milliseconds written in ``OFFSET_FILE`` (read at every call), while its
monotonic time and its sleeps are the machine's. A step of the machine's clock changes wall
time only; this changes it for the executor alone, so the rest of the scenario (Consul, the
clients, the brokers) keeps the real time. It prints the failover's record as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.runtime.failover.views import record_document
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from failover.failover_plan import FailoverRequest


class SteppedClock:
    """The machine's clock, with wall time moved by the offset in ``offset_file`` (ms)."""

    def __init__(self, offset_file: Path) -> None:
        self.offset_file = offset_file

    def offset_ms(self) -> int:
        try:
            return int(self.offset_file.read_text().strip() or "0")
        except (OSError, ValueError):
            return 0

    def time_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms()

    def time(self) -> float:
        return self.time_ms() / 1000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def main(argv: list[str]) -> int:
    topology_file, app, to, consul, offset_file = argv
    topology = load_topology(Path(topology_file))
    settings = Settings.from_env()
    bootstraps = {
        alias: c.bootstrap_servers
        for alias, c in topology.clusters.items()
        if c.bootstrap_servers is not None
    }
    executor = FailoverExecutor(
        topology,
        ConsulCoordinator(consul),
        KafkaFailoverClusters(topology, bootstraps),
        clock=SteppedClock(Path(offset_file)),
        lock_timing=LockTiming(settings.failover_lock_ttl_s, settings.failover_lock_delay_s),
        on_event=lambda message: print(message, file=sys.stderr, flush=True),
    )
    record = executor.start(FailoverRequest(app=app, to=to))
    print(json.dumps(record_document(record)))
    return 0 if record.state.value == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
