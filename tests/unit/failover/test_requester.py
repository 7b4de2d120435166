"""Who asked for a failover: carried from the request into the plan and the record, round-trips,
and records from before it (or from a newer build) still read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from failover.active import ActiveDocument
from failover.errors import PolicyError, RecordFormatError
from failover.failover_plan import (
    FailoverRecord,
    FailoverRequest,
    Situation,
    plan_failover,
    request_fingerprint,
)
from failover.failover_record import decode_record, encode_record, recovery_point
from failover.recovery_point import UnreplicatedRange
from failover.requester import UNKNOWN_REQUESTER, RequestedBy, RequesterKind
from failover.site_recovery import DivergentRange, RecoveryPolicy, SiteRecovery

ALICE = RequestedBy(RequesterKind.API, "alice", "operator")
SITUATION = Situation(frozenset({"east", "west"}), ActiveDocument("east"), False)


def _record(requested_by: RequestedBy = ALICE) -> FailoverRecord:
    request = FailoverRequest("orders", "west", force=True, requested_by=requested_by)
    return FailoverRecord(plan_failover(request, SITUATION, "f-1"), created_ms=1_000)


def test_the_plan_and_the_record_keep_who_asked() -> None:
    record = _record()
    assert record.plan.requested_by == ALICE
    assert decode_record(encode_record(record)) == record
    assert json.loads(encode_record(record))["requested_by"] == {
        "kind": "api",
        "name": "alice",
        "role": "operator",
    }


def test_a_record_written_before_reads_as_asked_by_someone_unknown() -> None:
    doc = json.loads(encode_record(_record()))
    del doc["requested_by"]
    record = decode_record(json.dumps(doc))
    assert record.plan.requested_by == UNKNOWN_REQUESTER
    assert record.plan.requested_by.describe() == "unknown"


def test_a_kind_a_newer_build_wrote_reads_as_unknown_with_its_name() -> None:
    doc = json.loads(encode_record(_record()))
    doc["requested_by"] = {"kind": "scheduler", "name": "nightly", "role": None}
    assert decode_record(json.dumps(doc)).plan.requested_by == RequestedBy(
        RequesterKind.UNKNOWN, "nightly"
    )


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("alice", "'requested_by' must be an object"),
        ({"kind": "api", "name": 7}, "string 'name'"),
        ({"kind": "api", "name": "a b"}, "requester name 'a b'"),
    ],
)
def test_a_malformed_requester_is_named(value: object, names: str) -> None:
    doc = json.loads(encode_record(_record()))
    doc["requested_by"] = value
    with pytest.raises(RecordFormatError, match=names):
        decode_record(json.dumps(doc))


def test_who_asked_is_not_part_of_what_was_asked() -> None:
    """The same request id repeated by another operator is the same request, not a conflict."""
    asked = FailoverRequest("orders", "west", request_id="r-1", requested_by=ALICE)
    again = replace(asked, requested_by=RequestedBy(RequesterKind.API, "bob", "operator"))
    assert request_fingerprint(asked) == request_fingerprint(again)


def test_names_are_checked_and_never_hold_spaces_or_secrets_by_shape() -> None:
    with pytest.raises(PolicyError, match="requester name"):
        RequestedBy(RequesterKind.CLI, "two words")
    assert RequestedBy(RequesterKind.CONTROLLER, "ctl-1").describe() == "controller:ctl-1"
    assert ALICE.describe() == "api:alice (operator)"


def test_the_recovery_point_is_exact_once_the_returned_site_was_recovered() -> None:
    open_range = replace(_record(), unreplicated=(UnreplicatedRange("orders", 0, 40, None),))
    assert recovery_point(open_range) == (0, False, "switch")
    recovered = replace(
        open_range,
        recovery=SiteRecovery(
            RecoveryPolicy.QUARANTINE, "east", 5_000, (DivergentRange("orders", 0, 40, 41),)
        ),
    )
    assert recovery_point(recovered) == (1, True, "recovery")
