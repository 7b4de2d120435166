"""The drill's second opinion: its history as the Parquet tables ``drsvc verify`` reads, and the
Spark job run over them and the clusters' topics.

The demo's own verdict (:mod:`drsvc.demo.verdict`) judges what the application saw; the Spark job
reads the orders and every copy of them on both clusters (lost, duplicated, reordered, altered,
looped) and the consumer group's reads across each move (skipped, re-read), and compares the
recovery point with the one drsvc reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drsvc.demo.workload import History
from drsvc.verify import histories
from failover.epoch_header import EPOCH_HEADER, encode_epoch

__all__ = ["run_verify", "write_history"]


def write_history(
    directory: Path,
    history: History,
    *,
    run_id: str,
    topic: str,
    group: str,
    records: Sequence[dict[str, Any]],
    unreplicated: Sequence[dict[str, Any]],
) -> Path:
    """Write the tables; ``records``: the failover records of the drill (API documents);
    ``unreplicated``: what drsvc reported as never replicated (exact ranges, on the lost
    cluster, of the unplanned failover ``records[0]``)."""
    produced = [
        histories.ProducedRecord(
            run_id,
            a.seq,
            a.cluster,
            topic,
            a.partition,
            a.offset,
            a.key,
            a.value_sha256,
            a.value_size,
            # what the log holds: the client stamps the epoch it joined under
            [] if a.epoch is None else [(EPOCH_HEADER, encode_epoch(a.epoch))],
            a.timestamp_ms,
            False,
            False,
            int(a.at * 1000),
        )
        for a in history.acked
    ]
    consumed = [
        histories.ConsumedRecord(
            group,
            "demo",
            r.cluster,
            r.topic,
            r.partition,
            r.offset,
            run_id,
            r.seq,
            int(r.at * 1000),
        )
        for r in history.read
    ]
    failovers = [
        histories.FailoverEvent(
            r["id"],
            group,
            r["from"],
            r["to"],
            next(e["at_ms"] for e in r["events"] if e["step"] == "activate"),
            r["kind"] == "planned",
        )
        for r in records
    ]
    cutoffs = [
        histories.Cutoff(r["id"], r["to"], c["topic"], c["partition"], c["offset"])
        for r in records
        for c in r["cutoffs"]
    ]
    lost = [
        histories.Unreplicated(
            records[0]["id"],
            records[0]["from"],
            u["topic"],
            u["partition"],
            u["first_offset"],
            u["last_offset"],
        )
        for u in unreplicated
    ]
    for schema, rows in (
        (histories.PRODUCED, produced),
        (histories.CONSUMED, consumed),
        (histories.FAILOVERS, failovers),
        (histories.CUTOFFS, cutoffs),
        (histories.UNREPLICATED, lost),
    ):
        histories.write_rows(directory, schema, rows)
    return directory


def run_verify(topology: Path, history_dir: Path, state_dir: Path, log: Path) -> dict[str, Any]:
    """``drsvc verify --json`` (in a process of its own: Spark's JVM stays out of the demo's)."""
    with log.open("ab") as err:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "drsvc.cli.main",
                "verify",
                "-t",
                str(topology),
                "--history",
                str(history_dir),
                "--json",
                "--state-dir",
                str(state_dir),
                "--master",
                "local[2]",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=900,
            check=False,
        )
    try:
        verdict: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {"passed": False, "error": f"drsvc verify exited {done.returncode}; see {log}"}
    return verdict
