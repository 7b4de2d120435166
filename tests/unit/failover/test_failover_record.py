"""The failover record's encoding: every field round-trips; unreadable records are refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from failover.active import ActiveDocument
from failover.errors import RecordFormatError
from failover.failover_plan import (
    Cutoff,
    FailoverRecord,
    FailoverRequest,
    GroupTarget,
    Outcome,
    Situation,
    StepName,
    plan_failover,
    record_outcome,
)
from failover.failover_record import decode_record, encode_record
from failover.recovery_point import UnreplicatedRange
from failover.site_recovery import DivergentRange, PartitionOffset, RecoveryPolicy, SiteRecovery


def _record() -> FailoverRecord:
    situation = Situation(frozenset({"east", "west"}), ActiveDocument("east"), False)
    plan = plan_failover(FailoverRequest("orders", "west", request_id="r-1"), situation, "f-1")
    record = FailoverRecord(
        plan,
        created_ms=1_000,
        groups=(GroupTarget("g1", "east.orders", 0, 42, True, "orders", 40, "exact"),),
        cutoffs=(Cutoff("east.orders", 0, 50),),
        unreplicated=(
            UnreplicatedRange("orders", 0, 50, 59),
            UnreplicatedRange("orders", 1, 7, None),
        ),
    )
    return record_outcome(record, StepName.DEACTIVATE, Outcome.OK, 2_000, "active: none")


def test_every_field_round_trips() -> None:
    record = _record()
    assert decode_record(encode_record(record)) == record


def test_a_recovery_round_trips() -> None:
    recovery = SiteRecovery(
        RecoveryPolicy.REPLAY,
        "east",
        3_000,
        (DivergentRange("orders", 0, 50, 60), DivergentRange("orders", 1, 7, 8)),
        into="west",
        replay_from=(PartitionOffset("orders", 0, 100),),
        replayed=11,
        completed_ms=4_000,
    )
    record = replace(_record(), recovery=recovery)
    assert decode_record(encode_record(record)) == record
    stored = json.loads(encode_record(record))["recovery"]["divergence"][0]
    assert (stored["last_offset"], stored["records"]) == (59, 10)


def test_a_recovery_that_is_not_an_object_is_refused() -> None:
    doc = json.loads(encode_record(_record()))
    doc["recovery"] = [1]
    with pytest.raises(RecordFormatError, match="recovery"):
        decode_record(json.dumps(doc))


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"v": 2}', "format version 2"),
    ],
)
def test_unreadable_documents_are_refused(raw: str, names: str) -> None:
    with pytest.raises(RecordFormatError, match=names):
        decode_record(raw)


def test_a_missing_field_is_named() -> None:
    doc = json.loads(encode_record(_record()))
    del doc["app"]
    with pytest.raises(RecordFormatError, match="'app'"):
        decode_record(json.dumps(doc))
    doc = json.loads(encode_record(_record()))
    doc["state"] = "exploded"
    with pytest.raises(RecordFormatError, match="exploded"):
        decode_record(json.dumps(doc))


def test_a_busy_target_group_refuses_the_failover() -> None:
    situation = Situation(
        frozenset({"east", "west"}), ActiveDocument("east"), True, busy_groups=("g2",)
    )
    with pytest.raises(ValueError, match="g2 of application orders have live members on west"):
        plan_failover(FailoverRequest("orders", "west"), situation, "f-2")


def test_the_highest_epoch_written_round_trips_and_older_records_name_it_in_their_steps() -> None:
    record = replace(_record(), epoch=7)
    assert decode_record(encode_record(record)).epoch == 7
    older = json.loads(encode_record(record))
    del older["epoch"]
    older["events"][0]["detail"] = "active: none (epoch 7)"
    older["events"].append(
        {"step": "wait-lease", "outcome": "ok", "at_ms": 3_000, "detail": "lease waited out"}
    )
    assert decode_record(json.dumps(older)).epoch == 7
    del older["events"]
    assert decode_record(json.dumps(older)).epoch == 0
    with pytest.raises(RecordFormatError, match="'epoch'"):
        decode_record(json.dumps({**json.loads(encode_record(record)), "epoch": -1}))
