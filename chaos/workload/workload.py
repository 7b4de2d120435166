"""A scenario's workload: producers and consumers on named clusters, one history directory.

    workload = Workload(history_dir, {"east": "127.0.0.1:9092"}, producers, consumers, seed=7)
    workload.start()
    ...                                   # faults, failovers
    workload.wait_for(lambda s: s.acknowledged >= 10_000, timeout_s=60)
    stats = workload.stop()               # every history flushed

Each producer and consumer writes its own part files, so nothing is shared between their threads
but the directory. :meth:`Workload.flush` writes what is buffered while they run (a scenario
calls it before a fault that could take the process down with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from chaos.workload.consumer import ConsumerSpec, ConsumerStats, HistoryConsumer
from chaos.workload.producer import ProducerSpec, ProducerStats, SequenceProducer
from chaos.workload.shapes import Shape
from drsvc.verify.histories import COMMITS, CONSUMED, PRODUCED, HistoryTable


@dataclass(frozen=True)
class WorkloadStats:
    producers: Mapping[str, ProducerStats] = field(default_factory=dict)
    consumers: Mapping[str, ConsumerStats] = field(default_factory=dict)

    @property
    def acknowledged(self) -> int:
        return sum(s.acknowledged for s in self.producers.values())

    @property
    def aborted(self) -> int:
        return sum(s.aborted for s in self.producers.values())

    @property
    def processed(self) -> int:
        return sum(s.processed for s in self.consumers.values())

    def errors(self) -> list[str]:
        out = [f"{p}: {e}" for p, s in self.producers.items() for e in s.errors]
        return out + [f"{c}: {e}" for c, s in self.consumers.items() for e in s.errors]


class Workload:
    """Producers and consumers of one scenario (see the module docstring)."""

    def __init__(
        self,
        history_dir: Path,
        bootstrap: Mapping[str, str],
        producers: Sequence[ProducerSpec],
        consumers: Sequence[ConsumerSpec] = (),
        shape: Shape | None = None,
        seed: int = 0,
        settings: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """``settings``: per cluster, the clients' security settings (none when not given)."""
        ids = [p.producer_id for p in producers]
        if len(set(ids)) != len(ids):
            raise ValueError(f"producer ids must be unique: {ids}")
        for cluster in {p.cluster for p in producers} | {c.cluster for c in consumers}:
            if cluster not in bootstrap:
                raise ValueError(f"no bootstrap servers for cluster '{cluster}'")
        self.history_dir = history_dir
        self.seed = seed
        self.producers = [
            SequenceProducer(
                spec,
                bootstrap[spec.cluster],
                HistoryTable(history_dir, PRODUCED),
                shape=shape,
                seed=seed,
                settings=(settings or {}).get(spec.cluster),
            )
            for spec in producers
        ]
        self.consumers = [
            HistoryConsumer(
                spec,
                bootstrap[spec.cluster],
                HistoryTable(history_dir, CONSUMED),
                HistoryTable(history_dir, COMMITS),
                settings=(settings or {}).get(spec.cluster),
            )
            for spec in consumers
        ]

    def start(self) -> None:
        for consumer in self.consumers:
            consumer.start()
        for producer in self.producers:
            producer.start()

    def stats(self) -> WorkloadStats:
        return WorkloadStats(
            {p.spec.producer_id: p.stats for p in self.producers},
            {f"{c.spec.group}/{c.spec.member}": c.stats for c in self.consumers},
        )

    def wait_for(
        self, predicate: Callable[[WorkloadStats], bool], timeout_s: float, interval_s: float = 0.1
    ) -> WorkloadStats:
        """Wait until ``predicate`` holds for the running totals; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.stats()
            if predicate(stats):
                return stats
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"workload condition not met within {timeout_s:.0f} s: "
                    f"{stats.acknowledged} acknowledged, {stats.processed} processed, "
                    f"errors {stats.errors()[:3]}"
                )
            time.sleep(interval_s)

    def stop_producers(self, timeout_s: float = 60.0) -> None:
        for producer in self.producers:
            producer.stop(timeout_s)

    def stop_consumers(self, timeout_s: float = 60.0) -> None:
        for consumer in self.consumers:
            consumer.stop(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> WorkloadStats:
        """Stop producers first, then consumers; every history is flushed."""
        self.stop_producers(timeout_s)
        self.stop_consumers(timeout_s)
        return self.stats()

    def flush(self) -> None:
        """Write every buffered history row now."""
        for producer in self.producers:
            producer.history.flush()
        for consumer in self.consumers:
            consumer.consumed.flush()
            consumer.commits.flush()

    def __enter__(self) -> Workload:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
