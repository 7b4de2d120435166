"""``drsvc verify`` fails a history in which the application was used on its old cluster after
the new one was activated: a record acknowledged there after the activation, or a group's
commit there after its offsets were set on the new cluster. The history is written as a
scenario writes it (Parquet parts per table), the ``switches`` table with plain Arrow."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from verify_frames import Rec, observed

from drsvc.verify import histories, job
from drsvc.verify.identity import value_prefix

EPOCH_HEADER = "drsvc.epoch"
#: east -> west, planned: none at 1000 (epoch 2), offsets set at 1400, west active at 1500
AWAY: dict[str, Any] = {
    "failover_id": "f1", "app": "orders", "from_cluster": "east", "to_cluster": "west",
    "planned": True, "deactivate_ms": 1000, "set_offsets_ms": 1400, "activate_ms": 1500,
    "none_epoch": 2, "to_epoch": 3,
}  # fmt: skip


def write_switches(directory: Path, *rows: dict[str, Any]) -> None:
    (directory / "switches").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), directory / "switches" / "part-0.parquet")


def log_of(count: int) -> list[Rec]:
    """Records sent on east under epoch 1, created at 100, 200, ... (all before the switch)."""
    return [
        Rec("p0", s, 0, s, None, value_prefix("p0", s), ((EPOCH_HEADER, b"1"),), 100 + 100 * s)
        for s in range(count)
    ]


def write_produced(directory: Path, log: list[Rec], acks: dict[int, int]) -> None:
    rows = [
        histories.ProducedRecord(
            r.producer_id, r.seq, "east", "t", r.partition, r.offset, r.key,
            hashlib.sha256(r.value).hexdigest(), len(r.value), list(r.headers), r.timestamp_ms,
            False, False, acks.get(r.offset, r.timestamp_ms + 5),
        )
        for r in log
    ]  # fmt: skip
    histories.write_rows(directory, histories.PRODUCED, rows)


def request(directory: Path) -> job.VerifyRequest:
    return job.VerifyRequest(
        history_dir=directory,
        bootstrap={},
        places=(job.Place("east", "t", "east", "t"),),
        aliases=frozenset({"east", "west"}),
    )


def test_a_record_acknowledged_on_the_old_cluster_after_the_switch_fails_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = log_of(10)  # the last one created at 1000 under epoch 1 ...
    write_produced(tmp_path, log, {9: 1600})  # ... and acknowledged after west was active
    write_switches(tmp_path, AWAY)
    verdict = job.evaluate(spark, request(tmp_path), observed(spark, log, "east", "t"))
    assert verdict.checks.get("two_active") == 1
    assert verdict.failed == ("two_active",)
    assert verdict.samples["two_active"][0]["offset"] == 9


def test_the_same_history_acknowledged_in_time_passes(spark: SparkSession, tmp_path: Path) -> None:
    log = log_of(10)
    write_produced(tmp_path, log, {})
    write_switches(tmp_path, AWAY)
    verdict = job.evaluate(spark, request(tmp_path), observed(spark, log, "east", "t"))
    assert verdict.passed and verdict.checks.get("two_active") == 0
    assert verdict.as_dict()["checks"]["two_active"] == 0


def test_a_commit_on_the_old_cluster_after_set_offsets_fails_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = log_of(10)
    write_produced(tmp_path, log, {})
    write_switches(tmp_path, AWAY)
    # the failovers history names the failover's group; it committed on east at 1300 (in
    # time) and at 1450, after its offsets were set on west
    histories.write_rows(
        tmp_path,
        histories.FAILOVERS,
        [histories.FailoverEvent("f1", "g", "east", "west", 1500, True)],
    )
    histories.write_rows(
        tmp_path,
        histories.COMMITS,
        [
            histories.Commit("g", "m1", "east", "t", 0, 8, 1300),
            histories.Commit("g", "m1", "east", "t", 0, 10, 1450),
        ],
    )
    verdict = job.evaluate(spark, request(tmp_path), observed(spark, log, "east", "t"))
    assert verdict.checks.get("two_active") == 1
    assert verdict.failed == ("two_active",)
    assert verdict.samples["two_active"][0]["committed_ms"] == 1450
