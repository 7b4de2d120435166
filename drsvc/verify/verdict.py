"""The verdict of a verification run: counts per check, whether it passed, and samples."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Checks where any violation fails the run (here, apart from the Spark job, so that the chaos
#: suite's rules share the list without importing Spark).
ALWAYS_FATAL = (
    "lost",
    "reordered",
    "altered",
    "loops",
    "skipped_after_failover",
    "aborted_visible",
    "two_active",
)

#: The checks every verdict reports, in the order of the chaos scenarios' ``checks`` object.
CHECKS = (
    "lost",
    "duplicates",
    "reordered",
    "altered",
    "loops",
    "skipped_after_failover",
    "reread_after_failover",
    "aborted_visible",
    "two_active",
)


@dataclass(frozen=True)
class Verdict:
    """What a run found. ``checks`` counts violations: lost, reordered, altered, looped,
    skipped and visible aborted records; extra copies (``duplicates``); records re-read after a
    failover; records and commits of an application on a cluster after another cluster was
    activated for it (``two_active``). ``failed`` names the checks that make the run fail
    (duplicates only in exactly-once mode, re-reads only after a planned failover, the recovery
    point whenever it differs from the reported one)."""

    checks: Mapping[str, int]
    failed: tuple[str, ...]
    rpo_records: int | None
    rpo_reported_records: int | None
    counts: Mapping[str, Any]
    samples: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checks": {name: self.checks.get(name, 0) for name in CHECKS},
            "failed": list(self.failed),
            "rpo_records": self.rpo_records,
            "rpo_reported_records": self.rpo_reported_records,
            "counts": dict(self.counts),
            "samples": {k: v for k, v in self.samples.items() if v},
            "elapsed_s": round(self.elapsed_s, 1),
        }


def jsonable(value: Any) -> Any:
    """A Spark row's value as JSON can carry it (bytes as text if they are UTF-8, else base64)."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
