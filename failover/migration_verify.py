"""The verdict of ``drsvc migrate verify`` from what the Spark job measured (pure).

Per source partition the job reports the source's records (count, first and last offset, a
checksum over key, value, headers and timestamp) and their copies on the target, found by the
provenance header each copy carries (count, the source offsets they name, the same checksum),
plus per record: source records without a copy (missing), copies whose content differs from
their record (altered), copies beyond one per record (duplicates) and copies of offsets the
source no longer holds. Records written on the target after a cutover carry no provenance: they
are counted, not compared.

Per group and partition: the group's position on the source, the target offset it translates to
(where the copy of the source position's record is, or the end of the copies), and the group's
position on the target if it has one. A position on the target before the translated one would
read records twice; one without a position on the target is not cut over yet.

:func:`verdict` passes when nothing is missing, altered or duplicated, each partition's copies
match its records (first, last, checksum) and no group sits before its translated position.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True, order=True)
class PartitionComparison:
    topic: str
    partition: int
    source_records: int
    source_first: int | None
    source_last: int | None
    source_checksum: str | None
    copies: int
    copied_first: int | None
    copied_last: int | None
    copies_checksum: str | None
    missing: int
    altered: int
    duplicates: int
    #: copies of source offsets the source does not hold (any more)
    orphans: int
    #: records on the target without provenance from the source (written there after a cutover)
    target_only: int

    def problems(self) -> list[str]:
        where = f"{self.topic}-{self.partition}"
        found = []
        if self.missing:
            found.append(f"{where}: {self.missing} source record(s) have no copy")
        if self.altered:
            found.append(f"{where}: {self.altered} copy(ies) differ from their record")
        if self.duplicates:
            found.append(f"{where}: {self.duplicates} record(s) copied more than once")
        if not self.missing and not self.duplicates:
            if (self.source_first, self.source_last) != (self.copied_first, self.copied_last):
                found.append(
                    f"{where}: source offsets {self.source_first}..{self.source_last}, copies of"
                    f" {self.copied_first}..{self.copied_last}"
                )
            if self.source_checksum != self.copies_checksum and not self.altered:
                found.append(f"{where}: checksums differ")
        return found


@dataclass(frozen=True, order=True)
class GroupComparison:
    group: str
    topic: str
    partition: int
    source_position: int | None
    #: where the source position lands on the target (None: no copies to place it)
    translated: int | None
    target_position: int | None

    @property
    def state(self) -> str:
        if self.target_position is None:
            return "not on the target"
        if self.translated is None:
            return "unknown"
        if self.target_position < self.translated:
            return "behind"
        # Ahead is fine: after its cutover the group reads on from there on the target, while
        # its source position stays where it left the source.
        return "ok"

    def problems(self) -> list[str]:
        if self.state != "behind":
            return []
        assert self.translated is not None and self.target_position is not None
        return [
            f"group {self.group} {self.topic}-{self.partition}: at {self.target_position} on the"
            f" target, before {self.translated} where its source position"
            f" {self.source_position} lands ({self.translated - self.target_position} record(s)"
            " would be read twice)"
        ]


@dataclass(frozen=True)
class MigrationVerdict:
    passed: bool
    problems: tuple[str, ...]
    partitions: tuple[PartitionComparison, ...]
    groups: tuple[GroupComparison, ...]

    def as_dict(self) -> dict[str, object]:
        totals = {
            key: sum(getattr(p, key) for p in self.partitions)
            for key in (
                "source_records", "copies", "missing", "altered", "duplicates", "orphans",
                "target_only",
            )
        }  # fmt: skip
        return {
            "passed": self.passed,
            "verdict": "PASSED" if self.passed else "FAILED",
            "problems": list(self.problems),
            "totals": totals,
            "partitions": [asdict(p) for p in self.partitions],
            "groups": [{**asdict(g), "state": g.state} for g in self.groups],
        }


def verdict(
    partitions: Iterable[PartitionComparison], groups: Iterable[GroupComparison]
) -> MigrationVerdict:
    parts = tuple(sorted(partitions))
    gs = tuple(sorted(groups))
    problems = [p for part in parts for p in part.problems()]
    problems += [p for g in gs for p in g.problems()]
    return MigrationVerdict(not problems, tuple(problems), parts, gs)
