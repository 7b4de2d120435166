"""The "two active" check passes a clean switch and catches records and commits of the
application on its old cluster after the new one was activated, however the history is
corrupted: stale epochs, late acknowledgements, appends after the switch, late commits."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from verify_frames import Rec, keys, observed

from drsvc.verify import histories, two_active
from drsvc.verify.identity import value_prefix
from failover.epoch_header import EPOCH_HEADER, encode_epoch
from failover.provenance import PROVENANCE_HEADER, Provenance, encode

#: east -> west (planned): none at 1000 (epoch 2), offsets set at 1400, west at 1500 (epoch 3)
AWAY = histories.Switch("f1", "orders", "east", "west", True, 1000, 1400, 1500, 2, 3)
#: west -> east: east again at 3000 (epoch 5)
BACK = histories.Switch("f2", "orders", "west", "east", True, 2500, 2900, 3000, 4, 5)


def rec(seq: int, offset: int, created_ms: int, epoch: int | None) -> Rec:
    headers = () if epoch is None else ((EPOCH_HEADER, encode_epoch(epoch)),)
    return Rec("p0", seq, 0, offset, None, value_prefix("p0", seq), headers, created_ms)


def steady(count: int) -> list[Rec]:
    """``count`` records sent while east was active at epoch 1, before the switch."""
    return [rec(seq, seq, 100 + 100 * seq, 1) for seq in range(count)]


def produced(
    spark: SparkSession, acked: Sequence[tuple[Rec, int]], cluster: str = "east"
) -> DataFrame:
    rows = [
        histories.ProducedRecord(
            r.producer_id, r.seq, cluster, "t", r.partition, r.offset, r.key,
            hashlib.sha256(r.value).hexdigest(), len(r.value), list(r.headers), r.timestamp_ms,
            False, r.aborted, ack_ms,
        )
        for r, ack_ms in acked
    ]  # fmt: skip
    return spark.createDataFrame(rows, histories.PRODUCED.spark())


def switches(spark: SparkSession, *rows: histories.Switch) -> DataFrame:
    return spark.createDataFrame(list(rows), histories.SWITCHES.spark())


def app_topics(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([("orders", "t")], "app string, topic string")


def found_records(
    spark: SparkSession,
    log: list[Rec],
    acks: dict[int, int],
    *switch_rows: histories.Switch,
) -> list[tuple[object, ...]]:
    """The violations on east's ``t`` holding ``log``; ``acks``: offset -> ack time."""
    acked = [(r, acks[r.offset]) for r in log if r.offset in acks]
    frame = two_active.records_after_switch(
        observed(spark, log, "east", "t"),
        produced(spark, acked),
        switches(spark, *(switch_rows or (AWAY,))),
        app_topics(spark),
    )
    return keys(frame, "failover_id", "offset", "epoch", "evidence")


def acked_soon(log: list[Rec]) -> dict[int, int]:
    return {r.offset: r.timestamp_ms + 5 for r in log}


def test_a_clean_switch_has_no_violation(spark: SparkSession) -> None:
    log = steady(9)  # the last one created at 900, acknowledged at 905: before deactivate
    assert found_records(spark, log, acked_soon(log)) == []


def test_a_stale_epoch_acknowledged_after_the_activation_is_caught(spark: SparkSession) -> None:
    # a paused producer: created at 900 under epoch 1, its ack heard at 1600 (west at 1500)
    log = [*steady(9), rec(9, 9, 900, 1)]
    acks = {**acked_soon(log[:9]), 9: 1600}
    assert found_records(spark, log, acks) == [("f1", 9, 1, "acknowledged after")]


def test_a_late_ack_of_a_record_appended_before_a_later_acknowledged_one_is_not(
    spark: SparkSession,
) -> None:
    # offset 8's ack was heard late (1600), but offset 9, appended after it, was acknowledged
    # at 1200: offset 8 was on the log before the activation
    log = [*steady(8), rec(8, 8, 850, 1), rec(9, 9, 900, 1)]
    acks = {**acked_soon(log[:8]), 8: 1600, 9: 1200}
    assert found_records(spark, log, acks) == []


def test_an_unacknowledged_record_counts_only_when_it_was_surely_appended_after(
    spark: SparkSession,
) -> None:
    # offset 9 was never acknowledged and was created before the switch: it may have landed
    # before it (a producer cut off by a site loss leaves such records), so it is not counted
    log = [*steady(9), rec(9, 9, 900, 1)]
    assert found_records(spark, log, acked_soon(log[:9])) == []
    # ... but behind a record created at 1700 (itself a violation: no epoch, created while west
    # was active, never acknowledged) it surely landed after the activation
    log = [*steady(9), rec(90, 9, 1700, None), rec(9, 10, 900, 1)]
    assert found_records(spark, log, acked_soon(log[:9])) == [
        ("f1", 9, None, "appended after"),
        ("f1", 10, 1, "appended after"),
    ]


def test_after_failing_back_stale_epochs_count_and_fresh_ones_do_not(
    spark: SparkSession,
) -> None:
    log = [
        *steady(9),
        rec(9, 9, 3100, 5),  # sent under east's new epoch: fine
        rec(10, 10, 3150, None),  # no header, created after east came back: fine
        rec(11, 11, 900, 1),  # a zombie of epoch 1 that landed after the failback
        rec(12, 12, 2000, None),  # no header, created while west was active
    ]
    acks = {**acked_soon(log[:9]), 9: 3105, 10: 3155, 11: 3200, 12: 3210}
    # behind records created once east was back, both surely landed after the activation
    assert found_records(spark, log, acks, AWAY, BACK) == [
        ("f1", 11, 1, "appended after"),
        ("f1", 12, None, "appended after"),
    ]


def test_records_whose_acks_died_with_a_killed_broker_are_not_taken_for_late_ones(
    spark: SparkSession,
) -> None:
    # Offsets 9 and 10 were appended before the switch, but the broker was killed before it
    # acknowledged them; the next acknowledgement in the partition comes from a record written
    # once east was active again (seen in a site-loss drill): no evidence that they landed late.
    log = [*steady(9), rec(9, 9, 900, 1), rec(10, 10, 950, 1), rec(11, 11, 3100, 5)]
    acks = {**acked_soon(log[:9]), 11: 3105}
    assert found_records(spark, log, acks, AWAY, BACK) == []
    # the same records acknowledged while west was active: the producer was still writing
    acks = {**acked_soon(log[:9]), 10: 1600, 11: 3105}
    assert found_records(spark, log, acks, AWAY, BACK) == [
        ("f1", 9, 1, "acknowledged after"),
        ("f1", 10, 1, "acknowledged after"),
    ]


def test_a_rolled_back_switch_activated_nothing_else(spark: SparkSession) -> None:
    rolled_back = AWAY._replace(set_offsets_ms=None, activate_ms=None, to_epoch=None)
    log = [*steady(9), rec(9, 9, 900, 1)]
    acks = {**acked_soon(log[:9]), 9: 1600}
    assert found_records(spark, log, acks, rolled_back) == []


def test_copies_and_other_applications_topics_are_not_judged(spark: SparkSession) -> None:
    hop = encode(Provenance("west", "t", 0, 0))
    log = [*steady(9), rec(9, 9, 900, 1)]
    copied = [*log[:9], log[9].at(9, headers=(*log[9].headers, (PROVENANCE_HEADER, hop)))]
    acks = {**acked_soon(log[:9]), 9: 1600}
    assert found_records(spark, copied, acks) == []
    other_app = two_active.records_after_switch(
        observed(spark, log, "east", "t"),
        produced(spark, [(r, acks[r.offset]) for r in log]),
        switches(spark, AWAY._replace(app="payments")),
        app_topics(spark),
    )
    assert other_app.count() == 0


def commits(spark: SparkSession, *at_ms: int, cluster: str = "east") -> DataFrame:
    rows = [histories.Commit("g", "m1", cluster, "t", 0, 10 + i, t) for i, t in enumerate(at_ms)]
    return spark.createDataFrame(rows, histories.COMMITS.spark())


def late_commits(
    spark: SparkSession, history: DataFrame, *switch_rows: histories.Switch
) -> list[tuple[object, ...]]:
    groups = spark.createDataFrame([("orders", "g")], "app string, group string")
    frame = two_active.commits_after_switch(history, switches(spark, *switch_rows), groups)
    return keys(frame, "failover_id", "committed_ms", "since_ms")


def test_commits_on_the_old_cluster_after_set_offsets_are_caught(spark: SparkSession) -> None:
    # 1300: before set-offsets; 1450 and 1600: after it; 3100: east is active again
    history = commits(spark, 1300, 1450, 1600, 3100)
    assert late_commits(spark, history, AWAY, BACK) == [("f1", 1450, 1400), ("f1", 1600, 1400)]
    # on the new cluster, commits are the point
    assert late_commits(spark, commits(spark, 1450, 1600, cluster="west"), AWAY) == []


def test_an_unplanned_switch_lets_the_old_lease_run_out_before_it_counts(
    spark: SparkSession,
) -> None:
    # set-offsets before wait-lease: commits until the activation re-read, never skip
    unplanned = AWAY._replace(planned=False, set_offsets_ms=1100)
    assert late_commits(spark, commits(spark, 1300, 1600), unplanned) == [("f1", 1600, 1500)]
