"""Histories written with Arrow read back with Spark's schema; places follow the topology's
flows; the verdict counts each check and fails on the right ones."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from verify_frames import copies, observed, produced, renumber, workload

from drsvc.topology.loader import load_topology_text
from drsvc.verify import histories, job
from drsvc.verify.verdict import CHECKS

TOPOLOGY = """
name: aa
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, topics: {include: ["orders", "chaos-.*"]}}
  - {source: west, target: east}
"""


def test_places_follow_the_flows() -> None:
    topology = load_topology_text(TOPOLOGY)
    places = job.plan_places(topology, [("east", "chaos-a"), ("east", "other"), ("west", "x")])
    assert places == (
        job.Place("east", "chaos-a", "east", "chaos-a"),
        job.Place("east", "chaos-a", "west", "east.chaos-a"),
        job.Place("east", "other", "east", "other"),  # not copied by east->west
        job.Place("west", "x", "east", "west.x"),
        job.Place("west", "x", "west", "x"),
    )


def test_histories_round_trip_through_arrow_and_spark(spark: SparkSession, tmp_path: Path) -> None:
    row = histories.ProducedRecord(
        "p0", 3, "east", "t", 1, 9, None, "ab" * 32, 7, [("a", None), ("b", b"")], 5, True, False, 6
    )
    table = histories.HistoryTable(tmp_path, histories.PRODUCED, flush_every=2)
    table.append(row)
    assert table.buffered == 1 and not histories.part_files(tmp_path, histories.PRODUCED)
    table.append(row._replace(seq=4))  # the second row fills the buffer: written at once
    table.append(row._replace(seq=5))
    table.flush()
    assert len(histories.part_files(tmp_path, histories.PRODUCED)) == 2
    assert [r["seq"] for r in histories.read_rows(tmp_path, histories.PRODUCED)] == [3, 4, 5]
    frame = job.read_table(spark, tmp_path, histories.PRODUCED)
    back = frame.orderBy("seq").first()
    assert back is not None
    headers = [("a", None), ("b", bytearray(b""))]
    assert tuple(back) == (*tuple(row)[:9], headers, 5, True, False, 6)
    empty = job.read_table(spark, tmp_path, histories.FAILOVERS)
    assert empty.count() == 0 and empty.schema == histories.FAILOVERS.spark()


def request(tmp_path: Path) -> job.VerifyRequest:
    return job.VerifyRequest(
        history_dir=tmp_path,
        bootstrap={},
        places=(job.Place("east", "t", "west", "east.t"),),
        aliases=frozenset({"east", "west"}),
    )


def test_the_verdict_counts_each_check(spark: SparkSession, tmp_path: Path) -> None:
    source = workload(8, partitions=2)
    histories.write_rows(
        tmp_path,
        histories.PRODUCED,
        produced(spark, source).collect(),  # rows in schema order
    )
    good = copies(source, "east", "t")
    damaged = renumber([*good[1:], good[3]])  # the first record lost, another copied twice
    verdict = job.evaluate(spark, request(tmp_path), observed(spark, damaged, "west", "east.t"))
    document = json.loads(json.dumps(verdict.as_dict()))
    assert list(document["checks"]) == list(CHECKS)
    assert document["checks"]["lost"] == 1
    assert document["checks"]["duplicates"] == 1
    assert sum(document["checks"].values()) == 2
    assert document["passed"] is False and document["failed"] == ["lost"]
    assert document["samples"]["lost"][0]["seq"] == source[0].seq
    assert document["counts"]["acknowledged"] == 8
    assert document["rpo_records"] is None  # no failover in this history


def test_judging() -> None:
    clean = dict.fromkeys(CHECKS, 0)
    assert job.judge(clean, 0, 0, exactly_once=True) == ()
    assert job.judge({**clean, "duplicates": 3}, 0, 0, exactly_once=False) == ()
    assert job.judge({**clean, "duplicates": 3}, 0, 0, exactly_once=True) == ("duplicates",)
    # re-reads after an unplanned failover are counted; after a planned one they fail
    assert job.judge({**clean, "reread_after_failover": 4}, 0, 0, exactly_once=True) == ()
    rereads = {**clean, "reread_after_failover": 4}
    assert job.judge(rereads, 1, 0, exactly_once=True) == ("reread_after_failover",)
    assert job.judge(clean, 0, 2, exactly_once=False) == ("rpo",)
    for name in job.ALWAYS_FATAL:
        assert job.judge({**clean, name: 1}, 0, 0, exactly_once=False) == (name,)
