"""Whether an application may be cut over to a migration's target now (pure).

A cutover is a planned failover of the application from the migration's source to its target
(the failover executor does the switch). Before it starts anything it must be safe:

* the migration was started and is not finished;
* the application belongs to the migration (listed in it, or, when the migration lists none, any
  application) and each of its topics is one the migration copies;
* the application is active on the source (not switching, not already moved);
* **nothing lags**: for every partition of its topics, the copy reached what the source held when
  the check began (``replicated`` read after ``source_end``), so the executor's own catch-up wait
  after the producers stopped is short.

:func:`cutover_refusals` lists every reason at once; an empty list means go.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from failover.migration_state import AppPhase, MigrationState


@dataclass(frozen=True, order=True)
class PartitionCatchUp:
    """One source partition: its end when the check began and how far the copy had got after."""

    topic: str
    partition: int
    source_end: int
    #: next source offset with a copy on the target (None: nothing copied yet)
    replicated: int | None

    @property
    def lag(self) -> int:
        return max(0, self.source_end - (self.replicated or 0))


def lagging(partitions: Iterable[PartitionCatchUp]) -> list[PartitionCatchUp]:
    """The partitions whose copy is behind what the source held, in order."""
    return sorted(p for p in partitions if p.lag > 0)


def cutover_refusals(
    *,
    app: str,
    app_topics: Collection[str],
    migration_apps: Collection[str],
    migrated_topics: Collection[str],
    state: MigrationState | None,
    phase: AppPhase,
    partitions: Iterable[PartitionCatchUp],
    max_shown: int = 5,
) -> list[str]:
    """Every reason the cutover of ``app`` must not start now (empty: it may)."""
    reasons: list[str] = []
    if state is None:
        reasons.append("the migration was not started (drsvc migrate start)")
    elif state.state == "finished":
        reasons.append("the migration is finished: its flow no longer copies")
    if migration_apps and app not in migration_apps:
        reasons.append(
            f"application {app} is not part of this migration (it lists"
            f" {', '.join(sorted(migration_apps))})"
        )
    uncovered = sorted(set(app_topics) - set(migrated_topics))
    if uncovered:
        reasons.append(
            f"the migration does not copy topic(s) {', '.join(uncovered)} of application {app}"
        )
    if phase != "on-source":
        reasons.append(
            {
                "switching": f"application {app} is switching clusters (a failover is running)",
                "on-target": f"application {app} is already on the target",
                "elsewhere": f"application {app} is active on neither cluster of the migration",
            }.get(phase, f"application {app} is {phase}")
        )
    behind = lagging(partitions)
    if behind:
        total = sum(p.lag for p in behind)
        shown = ", ".join(f"{p.topic}-{p.partition} {p.lag} behind" for p in behind[:max_shown]) + (
            f" and {len(behind) - max_shown} more" if len(behind) > max_shown else ""
        )
        reasons.append(
            f"the copy lags: {total} record(s) in {len(behind)} partition(s) not on the target"
            f" yet ({shown}); is the copy (drsvc migrate start) running? Try again once it"
            " has caught up"
        )
    return reasons


def catch_up_rows(
    ends: Mapping[tuple[str, int], int], replicated: Mapping[tuple[str, int], int]
) -> list[PartitionCatchUp]:
    """Rows for every partition in ``ends`` (a partition nothing was copied of has None)."""
    return [
        PartitionCatchUp(topic, partition, end, replicated.get((topic, partition)))
        for (topic, partition), end in sorted(ends.items())
    ]
