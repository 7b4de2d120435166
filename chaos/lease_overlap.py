"""Whether two clusters were ever in use at once, judged from what clients heard (pure).

A client that asked Consul where its application is active and heard cluster C may act on C from
the moment the answer arrived until its lease runs out, the lease counted from when the request
was sent (:func:`failover.active.lease_deadline_s`). A :class:`LeaseSample` is one such answer as
a client computed it. The switch is safe when no instant exists at which one client may act on
one cluster while another client may act on a different one: the union of the times each
cluster was held never overlaps another's. :func:`overlaps` finds every instant that breaks it.

Times are seconds on one machine's monotonic clock (every process of a scenario runs on the
same machine, so their monotonic clocks agree).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

Interval = tuple[float, float]


@dataclass(frozen=True)
class LeaseSample:
    """One answer a client acted on: ``cluster`` (None: no usable cluster) held from
    ``received_s`` until ``until_s`` (the client's own lease deadline)."""

    sent_s: float
    received_s: float
    cluster: str | None
    epoch: int
    until_s: float

    @property
    def held(self) -> Interval | None:
        """When the client may act on ``cluster`` (None: never)."""
        if self.cluster is None or self.until_s <= self.received_s:
            return None
        return (self.received_s, self.until_s)

    def row(self) -> dict[str, Any]:
        return {
            "sent_s": self.sent_s,
            "received_s": self.received_s,
            "cluster": self.cluster,
            "epoch": self.epoch,
            "until_s": self.until_s,
        }

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> LeaseSample:
        return cls(
            float(row["sent_s"]),
            float(row["received_s"]),
            row["cluster"],
            int(row["epoch"]),
            float(row["until_s"]),
        )


@dataclass(frozen=True)
class Overlap:
    """From ``start_s`` to ``end_s`` clients could act on ``first`` and on ``second`` at once."""

    first: str
    second: str
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as disjoint intervals in time order."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def held_by_cluster(samples: Iterable[LeaseSample]) -> dict[str, list[Interval]]:
    """Per cluster, when at least one client could act on it."""
    spans: dict[str, list[Interval]] = {}
    for sample in samples:
        held = sample.held
        if held is not None and sample.cluster is not None:
            spans.setdefault(sample.cluster, []).append(held)
    return {cluster: merged(found) for cluster, found in sorted(spans.items())}


def overlaps(samples: Iterable[LeaseSample]) -> list[Overlap]:
    """Every span of time in which two different clusters were held at once, in time order."""
    held = held_by_cluster(samples)
    found: list[Overlap] = []
    for first, second in combinations(sorted(held), 2):
        found.extend(_intersections(first, held[first], second, held[second]))
    return sorted(found, key=lambda o: (o.start_s, o.first, o.second))


def longest_overlap_s(samples: Sequence[LeaseSample]) -> float:
    """The longest overlap in seconds (0.0: two clusters were never held at once)."""
    return max((o.seconds for o in overlaps(samples)), default=0.0)


def _intersections(
    first: str, a: Sequence[Interval], second: str, b: Sequence[Interval]
) -> list[Overlap]:
    out: list[Overlap] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append(Overlap(first, second, start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out
