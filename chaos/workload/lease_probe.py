"""A stream of clients that start at every instant: the worst case for the switch's lease.

A client following its application's active key with blocking queries hears a change as soon
as it commits, so its last answer naming the old cluster left at least one watch period before
the "none" write. A client that *starts* (or whose watch reconnects) just before that write
gets the old cluster from a request sent at that very moment, and holds it a whole lease from
then: the latest anyone may hold the old cluster. :class:`LeaseProbe` is such clients, one every
``period_s``: each is a fresh :class:`drsvc.client.ActiveCluster` that reads the key once and
reports what it may do and until when, as a :class:`~chaos.lease_overlap.LeaseSample`.
:func:`chaos.lease_overlap.overlaps` then says whether any two clusters were held at once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from chaos.lease_overlap import LeaseSample
from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.client import ActiveCluster
from drsvc.topology.models import Topology

#: the file of a history directory the samples go to (one JSON object a line)
SAMPLES_FILE = "lease-samples.jsonl"


def read_once(client: ActiveCluster) -> LeaseSample:
    """``client``'s first read of the key and what it may do with it (a new client's index
    is 0, so Consul answers at once with the value of the moment)."""
    sent = time.monotonic()
    client.watch_once()
    received = time.monotonic()
    state = client.state()
    return LeaseSample(sent, received, state.cluster, state.epoch, state.lease_deadline_s)


class LeaseProbe:
    """A new client of application ``app`` every ``period_s`` on its own thread."""

    def __init__(
        self,
        app: str,
        topology: Topology,
        consul: str,
        access: ConsulAccess | None = None,
        period_s: float = 0.1,
    ) -> None:
        """``access``: how to reach a secured Consul (the application's token)."""
        self.app = app
        self.topology = topology
        self.period_s = period_s
        self.samples: list[LeaseSample] = []
        self.errors = 0
        self._coordinator = ConsulCoordinator(consul, access=access)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-probe-{app}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[LeaseSample]:
        self._stop.set()
        self._thread.join(30)
        return list(self.samples)

    def sample(self) -> LeaseSample:
        client = ActiveCluster(self.app, self.topology, coordinator=self._coordinator)
        return read_once(client)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.sample())
            except Exception:  # Consul slow or away: that client heard nothing, holds nothing
                self.errors += 1
            self._stop.wait(self.period_s)

    def write(self, history_dir: Path) -> Path:
        path = history_dir / SAMPLES_FILE
        with path.open("w") as out:
            for sample in self.samples:
                out.write(json.dumps(sample.row()) + "\n")
        return path


def read_samples(history_dir: Path) -> list[LeaseSample]:
    path = history_dir / SAMPLES_FILE
    if not path.exists():
        return []
    return [LeaseSample.of_row(json.loads(line)) for line in path.read_text().splitlines() if line]
